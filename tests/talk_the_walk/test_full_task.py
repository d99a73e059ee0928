import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ttw_jax.talk_the_walk.full_task import run_full_task

pytestmark = pytest.mark.usefixtures("fast_compile_unless_slow")  # tiny models

# Every corner carries a unique landmark id (1..16), so a single observation reveals the corner.
UNIQUE = jnp.arange(1, 17, dtype=jnp.int32).reshape(1, 4, 4, 1)


def episodes(n, target):
    return jnp.repeat(UNIQUE, n, axis=0), jnp.full((n,), target, jnp.int32)


def oracle(obs, actions, landmarks):
    """Knows where the tourist is: logits peak on the corner whose id is the last observation."""
    return jnp.where(jnp.arange(16)[None] == obs[:, -1, 0:1] - 1, 0.0, -1e9)


def test_oracle_guide_always_succeeds_on_first_evaluation():
    lm, target = episodes(256, 5)
    res = jax.jit(lambda k: run_full_task(k, oracle, lm, target, T=2, max_steps=400))(jax.random.key(0))
    assert bool(jnp.all(res.success)) and bool(jnp.all(res.evaluations == 1))
    assert int(res.steps.min()) >= 2  # no prediction before T moves
    # The hitting time of one corner by a random walk on a 4x4 grid is tens of steps.
    assert 5 < res.summary()["mean_steps_success"] < 100


def test_guide_that_always_names_the_target_spends_its_three_evaluations():
    lm, target = episodes(512, 0)
    always_target = lambda obs, actions, landmarks: jnp.where(jnp.arange(16)[None] == 0, 0.0, -1e9) + 0 * obs[:, :1, 0]
    res = run_full_task(jax.random.key(1), always_target, lm, target, T=1, max_steps=150)
    s = np.asarray(res.steps)
    assert bool(jnp.all(res.ended))
    # It asks at moves 1, 2, 3: success iff the tourist is on corner 0 at one of them.
    assert set(np.unique(s)) <= {1, 2, 3}
    failed = ~np.asarray(res.success)
    assert np.all(s[failed] == 3) and np.all(np.asarray(res.evaluations)[failed] == 3)
    assert 0 < res.summary()["success_rate"] < 0.5


def test_guide_that_never_names_the_target_never_ends():
    lm, target = episodes(64, 3)
    never = lambda obs, actions, landmarks: jnp.where(jnp.arange(16)[None] == 0, 0.0, -1e9) + 0 * obs[:, :1, 0]
    res = run_full_task(jax.random.key(2), never, lm, target, T=0, max_steps=20, greedy=True)
    assert not bool(jnp.any(res.ended)) and bool(jnp.all(res.steps == 20))
    assert res.summary()["success_rate"] == 0.0


def start_oracle(obs, actions, landmarks):
    """Names the corner whose id is the FIRST of the T+1 observations (where the walk began)."""
    return jnp.where(jnp.arange(16)[None] == obs[:, 0, 0:1] - 1, 0.0, -1e9)


def test_start_label_checks_the_first_corner_of_the_message():
    lm, target = episodes(256, 5)
    run = lambda predict, label: jax.jit(lambda k: run_full_task(
        k, predict, lm, target, T=2, max_steps=400, label=label))(jax.random.key(3))
    # A guide naming where the walk began succeeds at once under the released code's check ...
    res = run(start_oracle, "start")
    assert bool(jnp.all(res.success)) and bool(jnp.all(res.evaluations == 1))
    # ... and fails whenever the tourist has since moved away under the final-corner check.
    res_final = run(start_oracle, "final")
    assert float(jnp.mean(res_final.evaluations > 1)) > 0.3
    # The final-corner oracle is right only under its own label.
    assert bool(jnp.all(run(oracle, "final").success))
    assert float(jnp.mean(run(oracle, "start").evaluations > 1)) > 0.3


def test_orientation_aware_tourist_walks_with_turns_and_forward():
    lm, target = episodes(128, 0)   # (Empty is id 10: the oracle then names corner 9, not 0)
    aware = jax.jit(lambda k, p: run_full_task(k, p, lm, target, T=3, max_steps=200,
                                               orientation_aware=True), static_argnums=1)
    # The oracle reads the last observation, which is Empty unless the tourist faces away from
    # the intersection: every evaluation it asks for succeeds, but it needs more steps than with
    # an agnostic tourist (and some episodes run out of steps).
    res = aware(jax.random.key(4), oracle)
    assert bool(jnp.all(res.success == (res.evaluations == 1)))
    assert float(jnp.mean(res.success)) > 0.6
    agnostic = run_full_task(jax.random.key(4), oracle, lm, target, T=3, max_steps=200)
    assert res.summary()["mean_steps_success"] > agnostic.summary()["mean_steps_success"] + 5
    # Only TURNLEFT / TURNRIGHT / FORWARD (ids 4-6) are taken: a guide that names the target only
    # after an agnostic move never asks.
    on_agnostic = lambda obs, actions, landmarks: jnp.where(
        (jnp.arange(16)[None] == 0) == jnp.any(actions < 4, axis=1, keepdims=True), 0.0, -1e9)
    assert int(aware(jax.random.key(5), on_agnostic).evaluations.max()) == 0
    assert int(run_full_task(jax.random.key(5), on_agnostic, lm, target, T=3,
                             max_steps=20).evaluations.max()) > 0


def reference_full_task(key, predict, landmarks, target, T, max_steps, max_evals, greedy,
                        label, aware):
    """One episode at a time in a Python loop, with the per-episode keys `run_full_task` uses."""
    from ttw_jax.talk_the_walk import env as grid
    lo, hi = (4, 7) if aware else (0, 4)
    checked = 0 if label == "start" else T
    rows = []
    for i in range(len(target)):
        lm, tgt = landmarks[i], int(target[i])
        k_reset, k_steps = jax.random.split(jax.random.fold_in(key, i))
        state = grid.random_reset(lm, k_reset)
        obs = [grid.observe(lm, state, aware)] * (T + 1)
        pos = [np.asarray(state.pos)] * (T + 1)
        acts, evals, row = [0] * T, 0, None
        for t in range(max_steps):
            k_pred, k_move = jax.random.split(jax.random.fold_in(k_steps, t))
            logits = predict(jnp.stack(obs)[None], jnp.asarray(acts, jnp.int32)[None], lm[None])[0]
            pred = int(jnp.argmax(logits) if greedy else jax.random.categorical(k_pred, logits))
            if t >= T and pred == tgt:
                evals += 1
                if pos[checked][0] * 4 + pos[checked][1] == tgt:
                    row = (True, True, t, evals)
                elif evals >= max_evals:
                    row = (False, True, t, evals)
                if row:
                    break
            action = int(jax.random.randint(k_move, (), lo, hi))
            state = grid.step(lm, state, action)
            obs = obs[1:] + [grid.observe(lm, state, aware)]
            pos = pos[1:] + [np.asarray(state.pos)]
            acts = (acts + [action])[1:] if T else []
        rows.append(row or (False, False, max_steps, evals))
    return [np.array(c) for c in zip(*rows)]


@pytest.mark.parametrize("greedy,label,aware,max_evals", [
    (False, "final", False, 3), (True, "start", False, 3), (False, "start", True, 1)])
def test_slots_match_an_episode_by_episode_reference(greedy, label, aware, max_evals):
    # A guide that is often wrong: logits from a fixed random table of the observations and
    # actions, so episodes end after different numbers of steps (and some run out of steps).
    w_obs = jax.random.normal(jax.random.key(7), (20, 16)) * 2
    w_act = jax.random.normal(jax.random.key(8), (7, 16)) * 2

    def predict(obs, actions, landmarks):
        return jnp.sum(w_obs[obs[:, :, 0]], 1) + jnp.sum(w_act[actions], 1)

    ids = jax.random.randint(jax.random.key(9), (10, 4, 4, 2), 0, 12)
    target = jnp.arange(10, dtype=jnp.int32) % 16
    key = jax.random.key(11)
    ref = reference_full_task(key, predict, ids, target, 2, 25, max_evals, greedy, label, aware)
    assert len(set(ref[2].tolist())) > 2 and ref[3].sum() > 0   # episodes end at different steps
    for slots in (1, 4, 10):
        res = jax.jit(lambda k: run_full_task(k, predict, ids, target, T=2, max_steps=25,
                                              max_evals=max_evals, greedy=greedy, label=label,
                                              orientation_aware=aware, slots=slots))(key)
        for got, want in zip((res.success, res.ended, res.steps, res.evaluations), ref):
            np.testing.assert_array_equal(np.asarray(got), want)
