"""Parity of the on-device grid environment with an obviously-correct pure-Python reference."""
import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.core.env import batched
from ttw_jax.talk_the_walk import env as grid, maps


def reference_step(x, y, o, action, nx, ny):
    """Plain Python: UP/RIGHT/DOWN/LEFT move and face that way; turns rotate; FORWARD moves ahead."""
    moves = {0: (0, 1), 1: (1, 0), 2: (0, -1), 3: (-1, 0)}
    if action <= 3:
        o = action
        dx, dy = moves[action]
    elif action == 4:
        o, dx, dy = (o - 1) % 4, 0, 0
    elif action == 5:
        o, dx, dy = (o + 1) % 4, 0, 0
    else:
        dx, dy = moves[o]
    return min(max(x + dx, 0), nx - 1), min(max(y + dy, 0), ny - 1), o


def reference_observe(ids, x, y, o):
    """Plain Python, the released code's corner rule: SW (x even, y even) shows its landmarks
    facing S or W, SE (x odd, y even) facing E or S, NW (x even, y odd) facing N or W, NE (x odd,
    y odd) facing N or E; anything else shows Empty."""
    corner = {(0, 0): "SW", (1, 0): "SE", (0, 1): "NW", (1, 1): "NE"}[(x % 2, y % 2)]
    facing = "NESW"[o]
    if facing in {"SW": "SW", "SE": "ES", "NW": "NW", "NE": "NE"}[corner]:
        return list(ids)
    return [maps.EMPTY_ID] + [0] * (len(ids) - 1)


def test_orientation_aware_walks_match_reference():
    rng = np.random.default_rng(1)
    b, t, nx, ny, k = 96, 10, 4, 4, 2
    landmarks = rng.integers(1, 10, size=(b, nx, ny, k)).astype(np.int32)
    actions = rng.choice(grid.AWARE_ACTIONS, size=(b, t)).astype(np.int32)
    starts = rng.integers(0, 4, size=(b, 3)).astype(np.int32)
    state = batched(grid.reset, params_axis=0)(landmarks, starts[:, :2], starts[:, 2])
    walk = jax.jit(jax.vmap(grid.walk, in_axes=(0, 0, 0, None)), static_argnums=3)(
        jnp.asarray(landmarks), state, jnp.asarray(actions), True)
    seen = 0
    for i in range(b):
        x, y, o = starts[i]
        pos, obs = [(x, y)], [reference_observe(landmarks[i, x, y], x, y, o)]
        for a in actions[i]:
            x, y, o = reference_step(x, y, o, int(a), nx, ny)
            pos.append((x, y))
            obs.append(reference_observe(landmarks[i, x, y], x, y, o))
        np.testing.assert_array_equal(walk.positions[i], np.array(pos))
        np.testing.assert_array_equal(walk.obs[i], np.array(obs))
        seen += sum(o[0] != maps.EMPTY_ID for o in obs)
    assert 0.3 < seen / (b * (t + 1)) < 0.7   # about half the time it faces away


def test_orientation_aware_observation_hand_examples():
    lm = jnp.full((4, 4, 2), 3).at[..., 1].set(0)   # a Restaurant on every corner
    seen = lambda x, y, o: int(grid.observe(lm, grid.reset(lm, jnp.array([x, y]), jnp.array(o)),
                                            orientation_aware=True)[0])
    R, E = 3, maps.EMPTY_ID
    # (0, 0) is a SW corner: visible facing S (2) or W (3).
    assert [seen(0, 0, o) for o in range(4)] == [E, E, R, R]
    assert [seen(1, 0, o) for o in range(4)] == [E, R, R, E]   # SE: E, S
    assert [seen(0, 1, o) for o in range(4)] == [R, E, E, R]   # NW: N, W
    assert [seen(3, 3, o) for o in range(4)] == [R, R, E, E]   # NE: N, E
    # The agnostic tourist sees them whatever it faces.
    assert int(grid.observe(lm, grid.reset(lm, jnp.array([0, 0]), jnp.array(0)))[0]) == R


def test_rollout_matches_reference_on_random_sequences():
    rng = np.random.default_rng(0)
    b, t, nx, ny, k = 64, 12, 4, 4, 3
    landmarks = rng.integers(0, 11, size=(b, nx, ny, k)).astype(np.int32)
    actions = rng.integers(0, 7, size=(b, t)).astype(np.int32)
    starts = rng.integers(0, 4, size=(b, 3)).astype(np.int32)
    state = batched(grid.reset, params_axis=0)(landmarks, starts[:, :2], starts[:, 2])
    walk = jax.jit(jax.vmap(grid.walk))(jnp.asarray(landmarks), state, jnp.asarray(actions))
    for i in range(b):
        x, y, o = starts[i]
        pos, obs = [(x, y)], [landmarks[i, x, y]]
        for a in actions[i]:
            x, y, o = reference_step(x, y, o, int(a), nx, ny)
            pos.append((x, y))
            obs.append(landmarks[i, x, y])
        np.testing.assert_array_equal(walk.positions[i], np.array(pos))
        np.testing.assert_array_equal(walk.obs[i], np.array(obs))


def test_blocked_moves_leave_the_tourist_in_place():
    lm = jnp.arange(16).reshape(4, 4, 1)
    s = grid.reset(lm, jnp.array([0, 3]), jnp.array(0))
    for action in (grid.UP, grid.LEFT):
        s2 = grid.step(lm, s, action)
        obs = grid.observe(lm, s2)
        assert s2.pos.tolist() == [0, 3] and int(obs[0]) == 3
    s3 = grid.step(lm, s, grid.RIGHT)
    assert s3.pos.tolist() == [1, 3] and int(s3.orientation) == 1
    # Facing east, TURNLEFT faces north, FORWARD against the top edge stays put.
    s4 = grid.step(lm, s3, grid.TURNLEFT)
    s5 = grid.step(lm, s4, grid.FORWARD)
    assert int(s4.orientation) == 0 and s5.pos.tolist() == [1, 3]


def test_random_walk_is_uniform_and_reproducible():
    lm = jnp.zeros((4, 4, 1), jnp.int32)
    keys = jax.random.split(jax.random.key(0), 4000)
    walk = jax.jit(jax.vmap(grid.random_walk, in_axes=(None, 0, None)), static_argnums=2)
    walks = walk(lm, keys, 2)
    counts = np.bincount(np.asarray(walks.actions).ravel(), minlength=4) / 8000
    np.testing.assert_allclose(counts, 0.25, atol=0.02)
    starts = np.bincount(np.asarray(walks.positions[:, 0, 0] * 4 + walks.positions[:, 0, 1]), minlength=16)
    assert starts.min() > 150
    again = walk(lm, keys, 2)
    np.testing.assert_array_equal(walks.positions, again.positions)
