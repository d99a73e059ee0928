"""RCM agent, its mixed BC + policy-gradient loss and the R2R baselines: worked examples on a
hand-made corridor, shapes / gradients / overfitting on real R2R episodes, pmap equivalence."""
import functools
import json
import math

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from tests.conftest import shared_path
from tests.helpers import ALL_RIGHT, assert_bfloat16_loss_close, seeded_key
from ttw_jax.core.env import batched, rollout
from ttw_jax.core.pano_graph import build_graph
from ttw_jax.core.train import data_parallel as dp
from ttw_jax.core.train.precision import with_dtype
from ttw_jax.core.vocab import Vocabulary
from ttw_jax.rxr import env as mp, evaluation as r2r_eval
from ttw_jax.rxr.episodes import episodes
from ttw_jax.rxr.graph import geodesic_table, load_matterport_graph
from ttw_jax.rxr.losses import discounted_returns, grounding_loss, mixed_loss, rewards
from ttw_jax.rxr.rcm import RCMAgent, rcm_policy
from ttw_jax.rxr.views import empty_view_features, synthetic_view_features

pytestmark = pytest.mark.usefixtures("fast_compile_unless_slow")  # tiny models
observe = jax.vmap(mp.observe, in_axes=(None, 0, None))   # a batch of episodes


def corridor(n=5):
    """Nodes 0..n-1 one metre apart along +y, linked both ways (north = heading 0)."""
    src = [i for i in range(n - 1)] + [i + 1 for i in range(n - 1)]
    dst = [i + 1 for i in range(n - 1)] + [i for i in range(n - 1)]
    head = [0.0] * (n - 1) + [math.pi] * (n - 1)
    pos = np.stack([np.zeros(n), np.arange(n), np.zeros(n)], 1)
    return build_graph(n, np.asarray(src), np.asarray(dst), np.asarray(head, np.float32),
                       np.ones(len(src)), pos, elevations=np.zeros(len(src), np.float32))


def line_dist(a, b):
    return jnp.abs(a - b).astype(jnp.float32)


def test_rewards_worked_example():
    # path 0 -> 1 -> 2 then STOP, reference [0, 1, 2]; d(i, j) = |i - j| metres, radius 3.
    nodes = jnp.asarray([[0], [1], [2], [2]])
    actions = jnp.asarray([[1], [1], [0]])
    done = jnp.zeros((3, 1), bool)
    r = rewards(nodes, actions, done, jnp.asarray([[0, 1, 2]]), jnp.asarray([3]), line_dist,
                stop_reward=2.0)
    # nDTW of prefixes: [0] -> DTW 0+1+2 = 3; [0,1] -> 0+0+1 = 1; [0,1,2] -> 0 (|ref| = 3)
    nd = [math.exp(-3 / 9), math.exp(-1 / 9), 1.0]
    expect = [nd[1] - nd[0], nd[2] - nd[1], 2.0 * (1 - 0 / 3)]
    np.testing.assert_allclose(np.asarray(r)[:, 0], expect, rtol=1e-5)


def test_rewards_end_term_at_horizon_and_nothing_after_done():
    # moves 0 -> 1 (ref [0, 3]); horizon ends without STOP: NE = 2 m -> 1 * (1 - 2/3) at the end
    nodes = jnp.asarray([[0], [1], [1]])
    r = rewards(nodes, jnp.asarray([[1], [3]]), jnp.asarray([[False], [False]]),
                jnp.asarray([[0, 3]]), jnp.asarray([2]), line_dist)
    # DTW([0],[0,3]) = 3, DTW([0,1],[0,3]) = 0 + 2 = 2; |ref| = 2
    np.testing.assert_allclose(np.asarray(r)[:, 0],
                               [math.exp(-2 / 6) - math.exp(-3 / 6), 1 - 2 / 3], rtol=1e-5)
    # STOP at once (ref [0, 2]: NE = 2 m); the step after the episode ended earns nothing
    r = rewards(jnp.zeros((3, 1), jnp.int32), jnp.asarray([[0], [1]]),
                jnp.asarray([[False], [True]]), jnp.asarray([[0, 2]]), jnp.asarray([2]), line_dist)
    np.testing.assert_allclose(np.asarray(r)[:, 0], [1 - 2 / 3, 0.0], atol=1e-6)


def test_discounted_returns_and_grounding_loss():
    g = discounted_returns(jnp.asarray([[1.0], [0.0], [2.0]]), 0.5)
    np.testing.assert_allclose(np.asarray(g)[:, 0], [1.5, 1.0, 2.0])
    z = jnp.log(jnp.asarray([[1.0, 3.0], [1.0, 3.0], [1.0, 3.0]]))
    m = jnp.asarray([[False, True], [True, True], [False, False]])
    out = grounding_loss(z, m, jnp.asarray([True, True, True]))
    np.testing.assert_allclose(np.asarray(out), [math.log(4 / 3), 0.0, 0.0], atol=1e-6)
    assert float(grounding_loss(z, m, jnp.asarray([False] * 3)).sum()) == 0.0


def test_baselines_on_a_corridor():
    host = corridor(6)
    graph = jax.device_put(host)
    geo = jax.device_put(geodesic_table(host, np.zeros(6, np.int32)))
    batch = {"start": jnp.asarray([1, 4]), "heading": jnp.asarray([0.0, 0.0]),
             "path": jnp.asarray([[1, 2, 3], [4, 3, -1]]), "path_len": jnp.asarray([3, 2]),
             "gold": jnp.asarray([[1, 1, 0], [2, 0, 0]])}
    # first_step: episode 0 goes north twice (1 -> 3); episode 1 takes its gold first step
    # (action 2 = slot 1 of node 4, the edge heading pi to node 3), then keeps south: 3 -> 2.
    run = r2r_eval.make_rollout(r2r_eval.baseline_factory("first_step", 2), 5)
    out = jax.device_get(run(graph, geo, None, batch, jax.random.key(0)))
    assert list(out["final"]) == [3, 2]
    assert list(out["num_steps"]) == [3, 3]          # two moves then STOP
    np.testing.assert_allclose(out["ne"], [0.0, 1.0])
    np.testing.assert_allclose(out["sr"], [1.0, 1.0])
    np.testing.assert_allclose(out["pl"], [2.0, 2.0])
    # random walk from the end of the corridor with 1 step can only go to the one neighbour
    run = r2r_eval.make_rollout(r2r_eval.baseline_factory("random_walk", 1), 5)
    batch0 = dict(batch, start=jnp.asarray([0, 5]))
    assert list(jax.device_get(run(graph, geo, None, batch0, jax.random.key(1)))["final"]) \
        == [1, 4]
    # random heading then straight, 3 moves from node 2 ("nearest": north 3, 4, 5; south 1, 0
    # and then the only (closest) neighbour of the dead end, back to 1; "forward": only a
    # heading within 37.6 degrees of the corridor moves at all, and the dead end stops it)
    for straight, want in (("nearest", {1, 5}), ("fixed", {1, 5}), ("forward", {0, 2, 5})):
        run = r2r_eval.make_rollout(r2r_eval.baseline_factory("random_heading", 3, straight), 5)
        finals = {int(f) for s in range(32) for f in jax.device_get(run(
            graph, geo, None, dict(batch, start=jnp.asarray([2, 2])),
            jax.random.key(s)))["final"]}
        assert finals == want, straight
    with pytest.raises(ValueError, match="unknown baseline"):
        r2r_eval.baseline_factory("teleport", 3)
    with pytest.raises(ValueError, match="unknown 'go straight' reading"):
        r2r_eval.baseline_factory("first_step", 3, "diagonal")


def test_the_three_readings_of_go_straight_part_at_a_corner():
    # 0 (0,0) - 1 (0,1) - 2 (1,1) - 3 (2,1), and 4 (1,2) north of 2: the correct first step
    # goes north 0 -> 1. "forward" then sees nothing within 37.6 degrees of north and stops at
    # 1; "fixed" keeps north: east to 2 (90 degrees off beats 180), then north to 4;
    # "nearest" turns east at 1 and keeps east: 2, then 3.
    pos = np.asarray([[0, 0, 0], [0, 1, 0], [1, 1, 0], [2, 1, 0], [1, 2, 0]], float)
    links = [(0, 1), (1, 2), (2, 3), (2, 4)]
    src = [a for a, b in links] + [b for a, b in links]
    dst = [b for a, b in links] + [a for a, b in links]
    delta = pos[dst] - pos[src]
    host = build_graph(5, np.asarray(src), np.asarray(dst),
                       np.mod(np.arctan2(delta[:, 0], delta[:, 1]), 2 * math.pi).astype(
                           np.float32), np.linalg.norm(delta, axis=1), pos,
                       elevations=np.zeros(len(src), np.float32))
    graph = jax.device_put(host)
    geo = jax.device_put(geodesic_table(host, np.zeros(5, np.int32)))
    north = int(np.nonzero(np.asarray(host.neighbors)[0] == 1)[0][0]) + 1
    batch = {"start": jnp.asarray([0]), "heading": jnp.asarray([2.0]),
             "path": jnp.asarray([[0, 1, 2]]), "path_len": jnp.asarray([3]),
             "gold": jnp.asarray([[north, 0, 0]])}
    for straight, want in (("forward", 1), ("fixed", 4), ("nearest", 3)):
        run = r2r_eval.make_rollout(r2r_eval.baseline_factory("first_step", 3, straight), 6)
        assert int(jax.device_get(run(graph, geo, None, batch,
                                      jax.random.key(0)))["final"][0]) == want, straight


@pytest.fixture(scope="module")
def real():
    """Three real scans with the R2R val_seen instructions that live in them."""
    conn = shared_path("matterport", "connectivity")
    with open(shared_path("r2r", "R2R_val_seen.json")) as f:
        entries = json.load(f)
    scans = sorted({e["scan"] for e in entries})[:3]
    recs = [dict(instruction_id=e["path_id"] * 10 + k, path_id=e["path_id"], scan=e["scan"],
                 path=e["path"], heading=e["heading"], instruction=text, language="en",
                 annotator="r2r")
            for e in entries if e["scan"] in scans for k, text in enumerate(e["instructions"])]
    graph, nodes, scan_of = load_matterport_graph(conn, scans)
    vocab = Vocabulary.build(r["instruction"] for r in recs)
    eps = episodes(recs, nodes, graph, vocab, ["en"], 60, 8)
    landmarks = np.arange(len(nodes)) % 7
    return dict(graph=graph, geo=geodesic_table(graph, scan_of), eps=eps, vocab=vocab,
                feats=synthetic_view_features(graph, landmarks, 7, 8, 0.1))


def small_model(vocab_size, **kw):
    return RCMAgent(vocab_size, embed_dim=16, hidden=32, **kw)


def init(model, graph, feat_dim, seed=0):
    k, f = graph.max_degree, feat_dim + 4
    return jax.jit(model.init)(seeded_key(0, seed), jnp.ones((2, 3), jnp.int32), jnp.full((2,), 3),
                               jnp.zeros((2, 36, f)), jnp.zeros((2, k, f + 2)),
                               jnp.ones((2, k), bool))


def loss_config(**kw):
    c = dict(horizon=8, bc_every=2, gamma=0.9, stop_reward=1.0, entropy_weight=0.01,
             visual_grounding=0.0, textual_grounding=0.0, grounding_steps="cloned",
             success_radius=3.0)
    c.update(kw)
    return ml_collections.ConfigDict(c)


def batch_of(eps, idx):
    keys = ("start", "heading", "path", "path_len", "gold", "tokens", "token_len")
    return {k: jnp.asarray(eps[k][idx]) for k in keys}


def test_step_shapes_and_padded_directions_masked(real):
    g = jax.device_put(real["graph"])
    model = small_model(len(real["vocab"]))
    params = init(model, g, 8)
    batch = batch_of(real["eps"], np.arange(4))
    ctx, mask = model.apply(params, batch["tokens"], batch["token_len"], method=RCMAgent.encode)
    assert ctx.shape == (4, 60, 32) and mask.shape == (4, 60)
    obs = observe(g, batched(mp.reset)(g, batch["start"], batch["heading"]),
                  jnp.asarray(real["feats"]))
    assert obs["views"].shape == (4, 36, 12) and obs["cands"].shape == (4, g.max_degree, 14)
    carry = model.apply(params, 4, method=RCMAgent.initial_carry)
    _, out = model.apply(params, carry, ctx, mask, obs["views"], obs["cands"], obs["cand_mask"],
                         method=RCMAgent.step)
    assert out["logits"].shape == (4, g.max_degree + 1)
    assert out["vis_logits"].shape == (4, 36) and out["txt_logits"].shape == (4, 60)
    probs = jax.nn.softmax(out["logits"])
    absent = ~np.concatenate([np.ones((4, 1), bool), np.asarray(obs["cand_mask"])], 1)
    assert absent.any() and float(jnp.max(jnp.where(absent, probs, 0.0))) < 1e-6
    # the paper's agent: no structural features (edge length, degree) of the directions
    plain = small_model(len(real["vocab"]), use_structure=False)
    p2 = init(plain, g, 8)
    assert p2["params"]["cand_proj"]["kernel"].shape[0] == \
        params["params"]["cand_proj"]["kernel"].shape[0] - 2 == 12
    structure = obs["cands"].at[..., -2:].set(123.0)
    a = plain.apply(p2, carry, ctx, mask, obs["views"], obs["cands"], obs["cand_mask"],
                    method=RCMAgent.step)[1]["logits"]
    b = plain.apply(p2, carry, ctx, mask, obs["views"], structure, obs["cand_mask"],
                    method=RCMAgent.step)[1]["logits"]
    np.testing.assert_array_equal(a, b)


def test_gold_actions_replay_the_reference_paths(real):
    g = jax.device_put(real["graph"])
    eps = real["eps"]
    policy = lambda carry, state, t, key: (carry, batch["gold"][:, t], None)  # noqa: E731
    batch = batch_of(eps, np.arange(len(eps["start"])))
    final, _, traj = rollout(mp.step, g, batched(mp.reset)(g, batch["start"], batch["heading"]),
                             policy, None, jax.random.key(0), 8)
    path, length = mp.path_of(traj, final)
    np.testing.assert_array_equal(np.asarray(length), eps["path_len"])
    np.testing.assert_array_equal(np.where(np.arange(9)[None] < eps["path_len"][:, None],
                                           np.asarray(path), -1)[:, :8], eps["path"])


def test_loss_gradients_reach_every_parameter(real):
    g = jax.device_put(real["graph"])
    model = small_model(len(real["vocab"]))
    params = init(model, g, 8)
    loss_fn = mixed_loss(model, loss_config())
    (loss, metrics), grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(
        params, batch_of(real["eps"], np.arange(8)), jax.random.key(0), g,
        jnp.asarray(real["feats"]), jax.device_put(real["geo"]))
    assert np.isfinite(float(loss))
    for name, leaf in jax.tree_util.tree_leaves_with_path(grads):
        assert float(jnp.abs(leaf).max()) > 0, jax.tree_util.keystr(name)
    assert set(metrics) >= {"loss", "bc_loss", "pg_return", "action_accuracy"}


def test_chunked_attention_is_the_same_agent(real):
    """Both attentions `chunk` rows at a time (issue 22; 8 = 2 chunks of 3 + a remainder of 2)
    give the outputs and loss gradients of the whole-batch computation (chunk=0) to 1e-5, from
    the same parameters, and both give the attention logits, action logits and action features
    of the code before it (whole-batch einsums; the LSTM's new state taken from the step)."""
    g = jax.device_put(real["graph"])
    whole, chunked = small_model(len(real["vocab"]), chunk=0), small_model(len(real["vocab"]),
                                                                          chunk=3)
    params = init(whole, g, 8)
    close = functools.partial(np.testing.assert_allclose, rtol=1e-5, atol=1e-5)
    jax.tree.map(np.testing.assert_array_equal, init(chunked, g, 8), params)
    batch = batch_of(real["eps"], np.arange(8))
    obs = observe(g, batched(mp.reset)(g, batch["start"], batch["heading"]),
                  jnp.asarray(real["feats"]))
    ctx, mask = whole.apply(params, batch["tokens"], batch["token_len"], method=RCMAgent.encode)
    carry = (jax.random.normal(jax.random.key(1), (8, 32)),) * 3
    outs = [model.apply(params, carry, ctx, mask, obs["views"], obs["cands"], obs["cand_mask"],
                        method=RCMAgent.step) for model in (whole, chunked)]
    jax.tree.map(close, outs[1], outs[0])
    p = params["params"]
    dense = lambda name, x: x @ p[name]["kernel"] + p[name].get("bias", 0.0)   # noqa: E731
    scale = 1 / jnp.sqrt(32.0)
    v = jnp.tanh(dense("view_proj", obs["views"]))
    zv = jnp.einsum("bvh,bh->bv", v, dense("vis_query", carry[1])) * scale
    vbar = jnp.einsum("bv,bvh->bh", jax.nn.softmax(zv, -1), v)
    for (_, h), out in outs:
        zt = jnp.where(mask, jnp.einsum("blh,bh->bl", ctx, dense("txt_query", h)) * scale,
                       -1e9)
        tbar = jnp.einsum("bl,blh->bh", jax.nn.softmax(zt, -1), ctx)
        ht = jnp.tanh(dense("mix", jnp.concatenate([h, tbar, vbar], -1)))
        acts = jnp.concatenate([jnp.broadcast_to(p["stop"], (8, 1, 32)),
                                jnp.tanh(dense("cand_proj", obs["cands"]))], 1)
        logits = jnp.einsum("bkh,bh->bk", acts, dense("act_query", ht))
        valid = jnp.concatenate([jnp.ones((8, 1), bool), obs["cand_mask"]], 1)
        close(out["vis_logits"], zv)
        close(out["txt_logits"], zt)
        close(out["action_features"], acts)
        close(out["logits"], jnp.where(valid, logits, -1e9))
    consts = (batch, jax.random.key(0), g, jnp.asarray(real["feats"]),
              jax.device_put(real["geo"]))
    grads = [jax.jit(jax.grad(mixed_loss(m, loss_config()), has_aux=True))(params, *consts)[0]
             for m in (whole, chunked)]
    jax.tree.map(close, grads[1], grads[0])


def test_vision_only_agent_ignores_the_instruction(real):
    model = small_model(len(real["vocab"]), use_language=False)
    params = init(model, real["graph"], 8)
    b = batch_of(real["eps"], np.arange(2))
    a = model.apply(params, b["tokens"], b["token_len"], method=RCMAgent.encode)
    c = model.apply(params, b["tokens"][::-1], b["token_len"][::-1], method=RCMAgent.encode)
    np.testing.assert_array_equal(np.asarray(a[0]), np.asarray(c[0]))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_behavioural_cloning_overfits_a_tiny_batch(dtype, real, learned, learning_seed):
    """Measured over 11 runs (seeds 0-4; 0-2 under --xla_cpu_max_isa=AVX2 and AVX;
    tests/learning_spread.py): every action right and nDTW 1.0 when decoded in all, BC loss
    4.4e-4-8.2e-4 (bound 0.05)."""
    g = jax.device_put(real["graph"])
    model = with_dtype(small_model(len(real["vocab"])), dtype)
    params = init(model, g, 8, seed=learning_seed)
    loss_fn = mixed_loss(model, loss_config(bc_every=1))
    consts = (g, jnp.asarray(real["feats"]), jax.device_put(real["geo"]))
    batch = batch_of(real["eps"], np.arange(0, 24, 3))
    if dtype == "bfloat16":
        assert_bfloat16_loss_close(mixed_loss(model.module, loss_config(bc_every=1)), loss_fn,
                                   params, batch, jax.random.key(0), *consts)
    tx = optax.adam(1e-2)

    @jax.jit
    def step(params, opt, key):
        (_, m), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch, key, *consts)
        updates, opt = tx.update(grads, opt, params)
        return optax.apply_updates(params, updates), opt, m
    opt = tx.init(params)
    for i in range(120):
        params, opt, m = step(params, opt, seeded_key(i, learning_seed))
    # greedy decoding now walks every reference path exactly
    run = r2r_eval.make_rollout(lambda graph, consts, b: rcm_policy(
        model, consts[0], graph, consts[1], *model.apply(
            consts[0], b["tokens"], b["token_len"], method=RCMAgent.encode)), 8)
    out = jax.device_get(run(g, consts[2], (params, consts[1]), batch, jax.random.key(0)))
    learned(action_accuracy=(m["action_accuracy"], ">=", ALL_RIGHT),
            bc_loss=(m["bc_loss"], "<", 0.05),
            min_ndtw=(np.min(out["ndtw"]), ">=", ALL_RIGHT))


@pytest.mark.slow   # a full system train step, compiled three ways for 8 devices
@pytest.mark.fast_compile
def test_mesh_step_equals_pmap_step(real):
    """Behavioural cloning only (policy-gradient rows share a batch-mean baseline, which is
    global in the jit step and per device under pmap)."""
    g = real["graph"]
    model = small_model(len(real["vocab"]))
    params = init(model, g, 8)
    loss_fn = mixed_loss(model, loss_config(bc_every=1))
    tx = optax.adam(1e-3)
    from flax.training import train_state
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)
    batch = {k: np.asarray(v) for k, v in batch_of(real["eps"], np.arange(16)).items()}
    consts = (g, real["feats"], real["geo"])
    mesh = dp.make_mesh()
    n = mesh.size
    jit_step = dp.make_train_step(loss_fn, mesh, donate=False, num_consts=3)
    new, metrics = jit_step(dp.replicate(state, mesh), dp.shard_global(batch, dp.batch_sharded(
        mesh)), jax.random.key(0), *dp.replicate(consts, mesh))
    pstep = dp.make_pmap_train_step(loss_fn)
    stack = lambda tree: jax.tree_util.tree_map(lambda x: np.stack([x] * n), tree)  # noqa: E731
    pnew, _ = pstep(stack(state), jax.tree_util.tree_map(
        lambda x: x.reshape((n, -1) + x.shape[1:]), batch),
        jax.random.split(jax.random.key(0), n), *stack(consts))
    for a, b in zip(jax.tree_util.tree_leaves(new.params), jax.tree_util.tree_leaves(pnew.params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b)[0], rtol=2e-4, atol=2e-6)
    assert np.isfinite(float(metrics["loss"]))


def test_observation_angles_and_features(real):
    g = real["graph"]
    node = int(np.argmax(np.asarray(g.degree)))
    state = batched(mp.reset)(g, jnp.asarray([node]), jnp.asarray([0.5]))
    feats = jnp.asarray(real["feats"])
    obs = jax.device_get(observe(jax.device_put(g), state, feats))
    k = int(g.degree[node])
    rel = np.mod(np.asarray(g.headings[node, :k]) - 0.5 + np.pi, 2 * np.pi) - np.pi
    np.testing.assert_allclose(obs["cands"][0, :k, 8], np.sin(rel), atol=1e-5)
    np.testing.assert_allclose(obs["cands"][0, :k, 9], np.cos(rel), atol=1e-5)
    empty = jax.device_get(observe(jax.device_put(g), state, jnp.asarray(
        empty_view_features(g.num_nodes))))
    assert empty["views"].shape[-1] == 4 and empty["cands"].shape[-1] == 6
    np.testing.assert_allclose(obs["cands"][0, :k, 12], np.asarray(g.lengths[node, :k]) / 5,
                               rtol=1e-6)
    np.testing.assert_allclose(obs["cands"][0, :k, 13],
                               np.asarray(g.degree)[np.asarray(g.neighbors[node, :k])] / 10)


def test_step_embedding_depends_on_the_clamped_step_number(real):
    g = jax.device_put(real["graph"])
    model = small_model(len(real["vocab"]), step_embedding=4)
    params = init(model, g, 8)
    b = batch_of(real["eps"], np.arange(2))
    ctx, mask = model.apply(params, b["tokens"], b["token_len"], method=RCMAgent.encode)
    obs = observe(g, batched(mp.reset)(g, b["start"], b["heading"]), jnp.asarray(real["feats"]))
    carry = model.apply(params, 2, method=RCMAgent.initial_carry)

    step = jax.jit(functools.partial(model.apply, method=RCMAgent.step))

    def logits(t):
        return np.asarray(step(params, carry, ctx, mask, obs["views"], obs["cands"],
                               obs["cand_mask"], t)[1]["logits"])
    assert not np.allclose(logits(0), logits(1))
    np.testing.assert_array_equal(logits(3), logits(9))     # clamped to the last embedding
