"""The Touchdown imitation step with the simulator inside the loss: jit over the 8-device mesh
equals a literal `jax.pmap` step (the simulator and feature table passed as replicated consts)."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training import train_state

from ttw_jax.core.train import data_parallel as dp
from ttw_jax.core.vocab import Vocabulary
from ttw_jax.touchdown import env as td, episodes as nav_episodes, features as pano_features
from ttw_jax.touchdown.agents import Navigator
from ttw_jax.touchdown.graph import compile_touchdown, synthetic_street_grid
from ttw_jax.touchdown.losses import imitation_loss
from ttw_jax.touchdown.reference import TouchdownReference
from ttw_jax.touchdown.synthetic import synthetic_records

pytestmark = pytest.mark.usefixtures("fast_compile_unless_slow")  # tiny models


@pytest.mark.slow   # a full system train step, compiled three ways for 8 devices
@pytest.mark.fast_compile
def test_simulator_in_the_loop_step_with_consts_equals_pmap_step():
    """The Touchdown imitation step (simulator and feature table passed as replicated consts)."""
    n = jax.device_count()
    nodes, links = synthetic_street_grid(num_avenues=3, num_streets=3, panos_per_block=3)
    graph, table = compile_touchdown(nodes, links)
    records = synthetic_records(links, 16, seed=0, max_route_len=20)
    vocab = Vocabulary.build(r["navigation_text"] for r in records)
    eps = nav_episodes.episodes(records, table, TouchdownReference(links), vocab, 32, 24, 24)
    batch = {k: eps[k] for k in ("start_pano", "start_heading", "tokens", "token_len", "gold",
                                 "gold_len")}
    consts = (td.compile_sim(graph),
              jnp.asarray(pano_features.synthetic_pano_features(graph, width=8, dim=4)))
    model = Navigator(len(vocab), "ga", text_hidden=8, hidden=8, conv_features=4, action_dim=4)
    params = jax.jit(model.init)(jax.random.key(0), jnp.ones((2, 3), jnp.int32), jnp.full((2,), 3),
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
