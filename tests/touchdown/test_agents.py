"""Touchdown navigation models (GA, RConcat), data arrays and evaluation: shapes, gradients,
overfitting a tiny batch through the simulator's scan, and baselines with hand-checked values."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tests.helpers import ALL_RIGHT, assert_bfloat16_loss_close, seeded_key
from ttw_jax.core import vocab as vocab_lib
from ttw_jax.core.env import replay_policy
from ttw_jax.core.train.precision import with_dtype
from ttw_jax.core.vocab import Vocabulary
from ttw_jax.touchdown import (env as td, episodes as nav_episodes, evaluation as nav_eval,
                               features as pano_features)
from ttw_jax.touchdown.agents import Navigator, navigator_policy, official_cnn_min_size
from ttw_jax.touchdown.graph import compile_touchdown, synthetic_street_grid
from ttw_jax.touchdown.losses import imitation_loss
from ttw_jax.touchdown.reference import TouchdownReference
from ttw_jax.touchdown.synthetic import synthetic_records

pytestmark = pytest.mark.usefixtures("fast_compile_unless_slow")  # tiny models


@pytest.fixture(scope="module")
def world():
    nodes, links = synthetic_street_grid(num_avenues=4, num_streets=4, panos_per_block=4)
    graph, table = compile_touchdown(nodes, links)
    records = synthetic_records(links, 24, seed=0, max_route_len=30)
    vocab = Vocabulary.build(r["navigation_text"] for r in records)
    eps = nav_episodes.episodes(records, table, TouchdownReference(links), vocab, 48, 40, 40)
    features = pano_features.synthetic_pano_features(graph, width=8, dim=6, seed=0)
    return dict(graph=graph, table=table, records=records, vocab=vocab, eps=eps,
                sim=td.compile_sim(graph), features=jnp.asarray(features), links=links)


def init(model, crop=3, dim=6, seed=0):
    return jax.jit(model.init)(seeded_key(0, seed), jnp.ones((2, 5), jnp.int32), jnp.full((2,), 5),
                               jnp.zeros((2, 3, crop, dim)), jnp.zeros((2, 3), jnp.int32))


def test_a_route_longer_than_max_route_is_refused_by_route_id(world):
    longest = max(len(r["route_panoids"]) for r in world["records"])
    rec = next(r for r in world["records"] if len(r["route_panoids"]) == longest)
    with pytest.raises(ValueError, match=f"route_id {rec['route_id']}: route of {longest} "
                                         f"panoramas exceeds data.max_route={longest - 1}"):
        nav_episodes.episodes([rec], world["table"], TouchdownReference(world["links"]),
                              world["vocab"], 48, longest - 1, 40)
    with pytest.raises(ValueError, match=f"^train.json:7: route_id {rec['route_id']}: route"):
        nav_episodes.episodes([rec], world["table"], TouchdownReference(world["links"]),
                              world["vocab"], 48, longest - 1, 40, locate=lambda r: "train.json:7")


def test_a_route_that_jumps_between_unlinked_panoramas_is_refused(world):
    rec = dict(max(world["records"], key=lambda r: len(r["route_panoids"])))
    route = rec["route_panoids"]
    rec["route_panoids"] = [route[0], route[2]] + route[3:]    # skips a panorama
    with pytest.raises(ValueError, match=rf"^train.json:3: route_id {rec['route_id']}: field "
                                         rf"'route_panoids': consecutive panoramas {route[0]} -> "
                                         rf"{route[2]} are not linked"):
        nav_episodes.episodes([rec], world["table"], TouchdownReference(world["links"]),
                              world["vocab"], 48, 80, 80, locate=lambda r: "train.json:3")


def test_vocabulary_and_episode_arrays(world):
    vocab, eps, records = world["vocab"], world["eps"], world["records"]
    assert vocab.words[:2] == ("<pad>", "<unk>")
    ids, lengths = vocab.encode(["Turn around. Zebra."], 8)
    assert lengths[0] == 5 and ids[0, 2] == ids[0, 4] == vocab.index["."]
    assert ids[0, 3] == vocab_lib.UNK and (ids[0, 5:] == vocab_lib.PAD).all()
    r0 = records[0]
    assert eps["route_len"][0] == len(r0["route_panoids"])
    assert [world["table"].ids[i] for i in eps["route"][0, :eps["route_len"][0]]] == \
        r0["route_panoids"]
    assert (eps["route"][0, eps["route_len"][0]:] == -1).all()
    gold = TouchdownReference(world["links"]).gold_actions(r0["route_panoids"],
                                                          round(r0["start_heading"]))
    assert eps["gold"][0, :eps["gold_len"][0]].tolist() == gold and gold[-1] == td.STOP


def test_crop_looks_along_the_heading():
    # Width 8 around yaw 90: column 0 starts at -90 (= 270); heading 90 is column 4.
    table = jnp.arange(8, dtype=jnp.float32)[None, :, None]
    crop = pano_features.crop_to_heading(table, jnp.asarray([90.0]), jnp.asarray([0]),
                                         jnp.asarray([90]), 3)
    assert crop[0, :, 0].tolist() == [3, 4, 5]
    crop = pano_features.crop_to_heading(table, jnp.asarray([90.0]), jnp.asarray([0]),
                                         jnp.asarray([280]), 3)   # column 0, wraps around
    assert crop[0, :, 0].tolist() == [7, 0, 1]


@pytest.mark.parametrize("kind", ["ga", "rconcat"])
def test_shapes_and_gradients(kind, world):
    model = Navigator(len(world["vocab"]), kind, text_hidden=16, hidden=16, conv_features=8)
    params = init(model)
    logits = model.apply(params, jnp.ones((2, 5), jnp.int32), jnp.full((2,), 5),
                         jnp.ones((2, 4, 3, 6)), jnp.zeros((2, 4), jnp.int32))
    assert logits.shape == (2, 4, 4)
    eps = world["eps"]
    batch = {k: jnp.asarray(eps[k][:4]) for k in ("start_pano", "start_heading", "tokens",
                                                   "token_len", "gold", "gold_len")}
    loss_fn = imitation_loss(model, crop=3, horizon=40)
    (loss, _), grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(
        params, batch, jax.random.key(1), world["sim"], world["features"])
    assert np.isfinite(float(loss))
    norms = {jax.tree_util.keystr(p): float(jnp.linalg.norm(g))
             for p, g in jax.tree_util.tree_leaves_with_path(grads)}
    assert all(v > 0 for v in norms.values()), norms
    if kind == "ga":   # the text reaches GA's decisions only through the gate
        assert norms["['params']['gate']['kernel']"] > 0


@pytest.mark.parametrize("kind", ["ga", "rconcat"])
def test_ablations_remove_one_modality(kind, world):
    # NO-TEXT: the logits ignore the words; NO-IMAGE: they ignore the features; the full agent
    # reads both. Same parameters for all three (the ablations keep the architecture).
    rng = np.random.default_rng(0)
    tokens = jnp.asarray(rng.integers(1, len(world["vocab"]), (2, 5)), jnp.int32)
    images = jnp.asarray(rng.normal(size=(2, 4, 3, 6)), jnp.float32)
    prev = jnp.zeros((2, 4), jnp.int32)
    other_tokens, other_images = (tokens % 3) + 1, images[::-1]
    params = init(Navigator(len(world["vocab"]), kind, text_hidden=16, hidden=16,
                            conv_features=8))
    # GA's text only gates the image's feature maps: with no image (and the zero conv biases of
    # a fresh init) nothing is left for it to gate.
    for ablation, text_matters, image_matters in (("none", True, True),
                                                  ("no_text", False, True),
                                                  ("no_image", kind == "rconcat", False)):
        model = Navigator(len(world["vocab"]), kind, text_hidden=16, hidden=16, conv_features=8,
                          ablation=ablation)
        apply = jax.jit(model.apply)
        base = apply(params, tokens, jnp.full((2,), 5), images, prev)
        by_text = apply(params, other_tokens, jnp.full((2,), 5), images, prev)
        by_image = apply(params, tokens, jnp.full((2,), 5), other_images, prev)
        assert (not np.allclose(base, by_text, atol=1e-6)) == text_matters, ablation
        assert (not np.allclose(base, by_image, atol=1e-6)) == image_matters, ablation
    with pytest.raises(ValueError, match="unknown ablation"):
        init(Navigator(len(world["vocab"]), kind, ablation="no_sound"))


def test_official_cnns_have_the_published_layer_sizes():
    # At the official crop (100 rows x 100 columns of the single-channel maps): RConcat's
    # 64 x 6 x 6 = 2,304 and GA's 64 x 11 x 11 = 7,744 flattened features, mapped to 256 / 64.
    want = {"rconcat": [(8, 8, 1, 32), (4, 4, 32, 64), (2304, 256)],
            "ga": [(8, 8, 1, 128), (4, 4, 128, 64), (7744, 64)]}
    for kind, shapes in want.items():
        assert official_cnn_min_size(kind) == 20
        model = Navigator(50, kind, text_hidden=16, hidden=16, image_encoder="official")
        params = jax.eval_shape(model.init, jax.random.key(0), jnp.ones((2, 5), jnp.int32),
                                jnp.full((2,), 5), jnp.zeros((2, 3, 100, 100, 1)),
                                jnp.zeros((2, 3), jnp.int32))["params"]
        got = [params["convs_0"]["kernel"].shape, params["convs_1"]["kernel"].shape,
               params["image_vec"]["kernel"].shape]
        assert got == shapes, kind
        assert ("gate" in params) == (kind == "ga")
        assert ("conv1" not in params) and ("image_proj" in params) == (kind == "ga")


@pytest.mark.parametrize("kind", ["ga", "rconcat"])
def test_official_encoder_trains_through_the_scan_on_feature_maps(kind, world):
    images = jnp.asarray(pano_features.synthetic_pano_images(world["graph"], 20, 32, 2, seed=0))
    model = Navigator(len(world["vocab"]), kind, text_hidden=16, hidden=16,
                      image_encoder="official")
    params = jax.jit(model.init)(jax.random.key(0), jnp.ones((2, 5), jnp.int32),
                                 jnp.full((2,), 5), jnp.zeros((2, 3, 20, 20, 2)),
                                 jnp.zeros((2, 3), jnp.int32))
    eps = world["eps"]
    batch = {k: jnp.asarray(eps[k][:4]) for k in ("start_pano", "start_heading", "tokens",
                                                   "token_len", "gold", "gold_len")}
    loss_fn = imitation_loss(model, crop=20, horizon=40)
    (loss, _), grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(
        params, batch, jax.random.key(1), world["sim"], images)
    assert np.isfinite(float(loss))
    norms = {jax.tree_util.keystr(p): float(jnp.linalg.norm(g))
             for p, g in jax.tree_util.tree_leaves_with_path(grads)}
    assert all(v > 0 for v in norms.values()), norms
    with pytest.raises(ValueError, match=r"official image encoder takes views \[B, H, W, C\]"):
        model.apply(params, jnp.ones((2, 5), jnp.int32), jnp.full((2,), 5),
                    jnp.zeros((2, 3, 20, 2)), jnp.zeros((2, 3), jnp.int32))


def test_synthetic_images_show_streets_below_and_junctions_above(world):
    graph = world["graph"]
    images = pano_features.synthetic_pano_images(graph, 8, 64, 3, noise=0.0, seed=1)
    assert images.shape == (graph.num_nodes, 8, 64, 3) and images.dtype == np.float16
    degree = np.asarray(graph.degree)
    assert (degree >= 3).any() and (degree < 3).any()
    for n in (int(np.argmax(degree >= 3)), int(np.argmin(degree >= 3))):
        street_cols = np.abs(images[n, 4:]).sum((0, 2)) > 0
        # one band of width // 32 = 2 columns per out-edge, at the edge's heading
        assert street_cols.sum() == 2 * degree[n]
        assert (np.abs(images[n, :4]).sum() > 0) == (degree[n] >= 3)


def test_uniform_init_draws_every_kernel_and_embedding_from_the_papers_interval(world):
    model = Navigator(len(world["vocab"]), "rconcat", text_hidden=16, hidden=16, conv_features=8,
                      init_scale=0.1)
    params = init(model)
    kernels = {jax.tree_util.keystr(p): x for p, x in jax.tree_util.tree_leaves_with_path(params)
               if "bias" not in jax.tree_util.keystr(p)}
    assert len(kernels) >= 12        # embeddings, both LSTMs' kernels, convs, denses, head
    for name, x in kernels.items():
        assert 0.05 < float(jnp.max(jnp.abs(x))) <= 0.1, name
    default = init(Navigator(len(world["vocab"]), "rconcat", text_hidden=16, hidden=16,
                             conv_features=8))
    assert max(float(jnp.max(jnp.abs(x))) for x in jax.tree.leaves(default)) > 0.1


@pytest.mark.slow
@pytest.mark.parametrize("kind,dtype", [("ga", "float32"), ("rconcat", "float32"),
                                        ("rconcat", "bfloat16")])
def test_overfits_a_tiny_batch_through_the_scan(kind, dtype, world, learned, learning_seed):
    """Measured over 11 runs (seeds 0-4; 0-2 under --xla_cpu_max_isa=AVX2 and AVX;
    tests/learning_spread.py): loss 4.9e-5-3.7e-4 (bound 0.05), every action right, TC 1.0, SPD 0 in
    all."""
    model = with_dtype(Navigator(len(world["vocab"]), kind, text_hidden=32, hidden=32,
                                 conv_features=8), dtype)
    params = init(model, seed=learning_seed)
    eps = world["eps"]
    batch = {k: jnp.asarray(eps[k][:4]) for k in ("start_pano", "start_heading", "tokens",
                                                   "token_len", "gold", "gold_len")}
    loss_fn = imitation_loss(model, crop=3, horizon=40)
    if dtype == "bfloat16":
        assert_bfloat16_loss_close(imitation_loss(model.module, crop=3, horizon=40), loss_fn,
                                   params, batch, jax.random.key(1), world["sim"],
                                   world["features"])
    tx = optax.adam(1e-2)
    opt = tx.init(params)

    @jax.jit
    def step(params, opt):
        (loss, m), g = jax.value_and_grad(loss_fn, has_aux=True)(
            params, batch, jax.random.key(1), world["sim"], world["features"])
        updates, opt = tx.update(g, opt)
        return optax.apply_updates(params, updates), opt, m
    for _ in range(150):
        params, opt, m = step(params, opt)
    final = dict(loss=(m["loss"], "<", 0.05),
                 action_accuracy=(m["action_accuracy"], ">=", ALL_RIGHT))
    # Greedy decoding of the memorised episodes reaches every goal.
    def factory(sim, consts, b):
        text = model.apply(consts, b["tokens"], b["token_len"], method=Navigator.encode)
        return navigator_policy(model, consts, world["features"], sim.graph.yaw, 3, text)
    sub = {k: v[:4] for k, v in eps.items()}
    hops = nav_episodes.hops_to_goal(world["graph"], sub["goal"])
    res = nav_eval.evaluate(nav_eval.make_rollout(factory, 40), world["sim"], params, sub, hops,
                            jax.random.key(0), batch_size=4)
    learned(**final, tc=(res["tc"], ">=", ALL_RIGHT), spd=(res["spd"], "==", 0.0))


def test_baselines_and_gold_replay(world):
    eps, graph, sim = world["eps"], world["graph"], world["sim"]
    hops = nav_episodes.hops_to_goal(graph, eps["goal"])
    key = jax.random.key(0)
    stop = nav_eval.evaluate(nav_eval.make_rollout(nav_eval.baseline_factory("stop"), 50), sim,
                             None, eps, hops, key, batch_size=16)
    # Stop never moves: SPD is the start's hop distance to the goal, TC whether it is adjacent.
    start_hops = hops[np.arange(len(eps["goal"])), eps["start_pano"]]
    assert stop["spd"] == pytest.approx(start_hops.mean())
    assert stop["tc"] == pytest.approx(np.mean(start_hops <= 1))
    gold = nav_eval.evaluate(nav_eval.make_rollout(lambda s, c, b: (replay_policy, b["gold"]), 40),
                             sim, None, eps, hops, key, batch_size=16)
    assert gold["tc"] == 1.0 and gold["spd"] == 0.0 and gold["sed"] == 1.0
    rand = nav_eval.evaluate(nav_eval.make_rollout(nav_eval.baseline_factory("random"), 50), sim,
                             None, eps, hops, key, batch_size=16)
    assert (rand["episodes"]["num_steps"] == 50).all()   # Random never stops
    with pytest.raises(ValueError, match="unknown baseline"):
        nav_eval.baseline_factory("teleport")


def test_random_policy_is_uniform_over_moves():
    state = td.TouchdownState(*(jnp.zeros(200_000, jnp.int32),) * 2, jnp.zeros(200_000, jnp.int32),
                              jnp.zeros((200_000, 3), jnp.int32), jnp.zeros(200_000, bool),
                              jnp.zeros(200_000, jnp.int32))
    _, actions, _ = td.random_policy(None, state, 0, jax.random.key(3))
    freq = np.bincount(np.asarray(actions), minlength=4) / 200_000
    np.testing.assert_allclose(freq, [1 / 3, 1 / 3, 1 / 3, 0], atol=0.005)
