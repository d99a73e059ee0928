"""The jit-over-mesh train step equals a literal `jax.pmap` step (8 fake CPU devices)."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training import train_state

from ttw_jax import maps
from ttw_jax.data import localization
from ttw_jax.losses.emergent import localization_loss
from ttw_jax.models.emergent import Localizer
from ttw_jax.train import data_parallel as dp


def setup(batch_size=32):
    table = jnp.asarray(maps.windows(maps.synthetic_maps(0, ["hellskitchen"]), "train").landmarks)
    model = Localizer(T=2, features=16, num_landmark_ids=maps.NUM_LANDMARK_IDS)
    batches = [localization.sample_batch(jax.random.key(i), table, batch_size, 2) for i in range(3)]
    b = batches[0]
    params = model.init({"params": jax.random.key(0)}, b["obs"], b["actions"], b["landmarks"])["params"]
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-2))
    return state, batches, localization_loss(model.apply, discrete=False)


def test_jit_mesh_step_equals_pmap_step_and_single_device():
    n = jax.device_count()
    assert n == 8, "tests/conftest.py sets 8 fake CPU devices"
    state, batches, loss_fn = setup()
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


def test_batch_must_divide_over_devices():
    import pytest
    with pytest.raises(ValueError, match="not divisible"):
        dp.check_batch_size(12, dp.make_mesh())


def test_simulator_in_the_loop_step_with_consts_equals_pmap_step():
    """The Touchdown imitation step (simulator and feature table passed as replicated consts)."""
    from ttw_jax.data import pano_features, touchdown_nav
    from ttw_jax.data.touchdown_synthetic import synthetic_records
    from ttw_jax.envs import touchdown as td
    from ttw_jax.envs.reference import TouchdownReference
    from ttw_jax.graphs.touchdown import compile_touchdown, synthetic_street_grid
    from ttw_jax.losses.touchdown_nav import imitation_loss
    from ttw_jax.models.touchdown_nav import Navigator

    n = jax.device_count()
    nodes, links = synthetic_street_grid(num_avenues=3, num_streets=3, panos_per_block=3)
    graph, table = compile_touchdown(nodes, links)
    records = synthetic_records(links, 16, seed=0, max_route_len=20)
    vocab = touchdown_nav.Vocabulary.build(r["navigation_text"] for r in records)
    eps = touchdown_nav.episodes(records, table, TouchdownReference(links), vocab, 32, 24, 24)
    batch = {k: eps[k] for k in ("start_pano", "start_heading", "tokens", "token_len", "gold",
                                 "gold_len")}
    consts = (td.compile_sim(graph),
              jnp.asarray(pano_features.synthetic_pano_features(graph, width=8, dim=4)))
    model = Navigator(len(vocab), "ga", text_hidden=8, hidden=8, conv_features=4, action_dim=4)
    params = model.init(jax.random.key(0), jnp.ones((2, 3), jnp.int32), jnp.full((2,), 3),
                        jnp.zeros((2, 2, 3, 4)), jnp.zeros((2, 2), jnp.int32))
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-2))
    loss_fn = imitation_loss(model, crop=3, horizon=24)
    mesh = dp.make_mesh()
    jit_step = dp.make_train_step(loss_fn, mesh, num_consts=2)
    pmap_step = dp.make_pmap_train_step(loss_fn)
    s_jit, m_jit = jit_step(dp.replicate(state, mesh), dp.shard_global(batch, dp.batch_sharded(mesh)),
                            jax.random.key(0), *dp.replicate(consts, mesh))
    stack = lambda tree: jax.tree_util.tree_map(lambda x: jnp.stack([x] * n), tree)
    shards = jax.tree_util.tree_map(lambda x: x.reshape(n, -1, *x.shape[1:]), batch)
    s_pmap, m_pmap = pmap_step(stack(state), shards, jax.random.split(jax.random.key(0), n),
                               *stack(consts))
    np.testing.assert_allclose(m_jit["loss"], np.mean(m_pmap["loss"]), rtol=1e-5)
    for a, p in zip(jax.tree_util.tree_leaves(s_jit.params), jax.tree_util.tree_leaves(s_pmap.params)):
        np.testing.assert_allclose(a, p[0], rtol=2e-5, atol=2e-6)
