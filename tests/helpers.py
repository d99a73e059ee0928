"""Shared test utilities: config overrides by path, simulated crashes, and the jit == pmap check
of a data-parallel train step."""
import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.core.train import data_parallel as dp


class Crash(Exception):
    """Raised by a `crash_at` hook to simulate a killed training run."""


def crash_at(step_to_crash: int):
    """A train_and_evaluate hook that raises `Crash` after step `step_to_crash`."""
    def hook(step):
        if step == step_to_crash:
            raise Crash(step)
    return hook


def override(config, **overrides):
    """Sets config fields; nested keys use '__' (`model__name="ga"` sets config.model.name)."""
    for key, value in overrides.items():
        target = config
        *path, last = key.split("__")
        for p in path:
            target = target[p]
        target[last] = value
    return config


def assert_jit_step_equals_pmap_step(state, batches, loss_fn) -> None:
    """Runs `batches` through the jit-over-mesh train step, a literal `jax.pmap` step and a
    single-device step from `state`: equal losses and parameters, and the parameters moved."""
    n = jax.device_count()
    assert n == 8, "tests/conftest.py sets 8 fake CPU devices"
    mesh = dp.make_mesh()
    jit_step = dp.make_train_step(loss_fn, mesh)
    pmap_step = dp.make_pmap_train_step(loss_fn)
    single_step = dp.make_train_step(loss_fn, dp.make_mesh(jax.devices()[:1]), donate=False)

    s_jit = dp.replicate(state, mesh)
    s_pmap = jax.tree_util.tree_map(lambda x: jnp.stack([x] * n), state)
    s_single = state
    for b in batches:
        s_jit, m_jit = jit_step(s_jit, jax.device_put(b, dp.batch_sharded(mesh)), jax.random.key(0))
        shards = jax.tree_util.tree_map(lambda x: x.reshape(n, -1, *x.shape[1:]), b)
        s_pmap, m_pmap = pmap_step(s_pmap, shards, jax.random.split(jax.random.key(0), n))
        s_single, _ = single_step(s_single, b, jax.random.key(0))
        np.testing.assert_allclose(m_jit["loss"], m_pmap["loss"][0], rtol=1e-5)
    for a, p, s in zip(jax.tree_util.tree_leaves(s_jit.params), jax.tree_util.tree_leaves(s_pmap.params),
                       jax.tree_util.tree_leaves(s_single.params)):
        np.testing.assert_allclose(a, p[0], rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(a, s, rtol=2e-5, atol=2e-6)
    # The step really changed the parameters.
    moved = [float(jnp.abs(a - b).max()) for a, b in zip(jax.tree_util.tree_leaves(s_jit.params),
                                                         jax.tree_util.tree_leaves(state.params))]
    assert max(moved) > 1e-3
