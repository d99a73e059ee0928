"""The student-forcing expert (`ttw_jax.arramon.expert`): worked poses on a hand-made street,
and on synthetic cities it finishes every turn from the ground truth's start in the ground
truth's number of steps, and recovers after random detours."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ttw_jax.arramon import env, episodes as ae, expert, synthetic as syn
from ttw_jax.core.env import rollout
from ttw_jax.core.vocab import Vocabulary

pytestmark = pytest.mark.usefixtures("fast_compile")

# An open 20 x 20 square (one raster); the gold path walks from (5, 5) north (+z) 3 steps, turns
# right (+x) and walks 2 steps; the target stands 2 units further east.
OPEN = env.Walkable(grid=np.ones((1, 40, 40), bool), origin=np.zeros((1, 2), np.float32),
                    resolution=0.5)
PATH = jnp.array([[5, 5], [5, 6], [5, 7], [5, 8], [6, 8], [7, 8], [0, 0]], jnp.float32)
OBJECTS = jnp.array([[9.0, 0.06, 8.0], [5.0, 0.06, 18.0]])     # target, a distracter


def _state(x, z, heading, walkable=OPEN):
    return env.reset_navigation(walkable, jnp.array([x, z]), 0.0, OBJECTS, jnp.ones(2, bool), 0,
                                heading)


def _expert(state, walkable=OPEN):
    return int(expert.navigation_expert(walkable, state, PATH, 6, 0))


@pytest.mark.parametrize("pose, action", [
    ((5, 5, 0), env.FORWARD),          # on the path, facing the next point
    ((5, 8, 0), env.RIGHT),            # at the corner: the next point is 90 degrees right
    ((5, 8, 2), env.RIGHT),            # 30 degrees short of it: one more turn right
    ((5, 8, 3), env.FORWARD),          # facing it
    ((5, 8, 4), env.LEFT),             # 30 degrees past it: back left
    ((5, 7, 5), env.LEFT),             # facing away, 150 degrees to the left of it
    ((5, 7, 7), env.RIGHT),            # facing away, 150 degrees to the right of it
    ((7, 8, 3), env.PICK),             # at the end, the target 2 ahead: pick it up
    ((7, 8, 0), env.RIGHT),            # at the end facing north: turn towards the target
    ((7, 8, 8), env.LEFT),             # facing south-west: the target is behind on the left
])
def test_worked_poses_on_an_open_square(pose, action):
    assert _expert(_state(*pose)) == action


def test_off_the_path_it_heads_for_the_nearest_point_and_around_walls():
    # 2 units west of the path's (5, 7): farther than NEAR, so it heads for (5, 7) itself
    # (east of it: bearing 90 degrees from north, -11 degrees from east).
    assert _expert(_state(3, 6.6, 0)) == env.RIGHT
    assert _expert(_state(3, 6.6, 3)) == env.FORWARD
    # The same pose with a wall right ahead: FORWARD would be refused, so it turns towards the
    # point (to the left) instead.
    grid = np.ones((1, 40, 40), bool)
    grid[0, 8, :] = False                                   # x in [4, 4.5) is a wall
    walled = env.Walkable(grid=grid, origin=np.zeros((1, 2), np.float32), resolution=0.5)
    assert _expert(_state(3, 6.6, 3, walled), walled) == env.LEFT


def _turns(num: int, seed: int):
    records = syn.synthetic_instances(num, seed)
    vocab = Vocabulary.build(s for r in records for k in ("navi_inst_gt", "assem_inst_gt")
                             for s in r["instructions"][k])
    walk, index = ae.walkable_for(records)
    batch = {k: jnp.asarray(v)
             for k, v in ae.turn_examples(ae.episodes(records, vocab, 64, 8, index)).items()}
    return walk, batch


def test_from_the_gold_start_it_finishes_every_turn_in_the_gold_number_of_steps():
    walk, batch = _turns(64, seed=3)
    policy = expert.expert_policy(walk, batch)
    final, _, _ = jax.jit(lambda s: rollout(env.step_navigation, walk, s, policy, None,
                                            jax.random.key(0), 60))(
        ae.navigation_start(walk, batch))
    np.testing.assert_array_equal(final.picked, batch["target"])
    np.testing.assert_array_equal(final.num_steps, batch["navi_len"])


def test_after_a_random_detour_it_still_reaches_the_target():
    walk, batch = _turns(64, seed=4)
    expert_policy = expert.expert_policy(walk, batch)

    def detour_then_expert(carry, state, t, key):
        _, action, _ = expert_policy(carry, state, t, key)
        wander = jax.random.randint(key, action.shape, 0, 3)     # forward / left / right
        return carry, jnp.where(t < 8, wander, action).astype(jnp.int32), None

    final, _, traj = jax.jit(lambda s: rollout(env.step_navigation, walk, s, detour_then_expert,
                                               None, jax.random.key(1), 120))(
        ae.navigation_start(walk, batch))
    detoured = np.any(np.asarray(traj.action[:8]).T != np.asarray(batch["navi_actions"][:, :8]),
                      1)
    assert detoured.mean() > 0.9
    picked = np.asarray(final.picked)
    assert np.all(picked != np.where(np.asarray(batch["target"]) == 0, 1, 0))  # never the other
    assert np.mean(picked == np.asarray(batch["target"])) >= 0.97
