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
