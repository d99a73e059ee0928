"""Landmark classification (App. F, the released protocol): weighted F1 by hand, the released
weighted BCE, the release's files (resnetfeat.json, text.json, .vec), PCA, the bag-of-embeddings
model and runs of the experiment."""
import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tests.conftest import shared_path
from tests.experiments.contract import TrainerContract
from tests.helpers import ALL_RIGHT, assert_bfloat16_loss_close, override, seeded_key
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.landmarks import features as lf
from ttw_jax.talk_the_walk.landmarks import release
from ttw_jax.talk_the_walk.landmarks.losses import class_weights, weighted_bce
from ttw_jax.talk_the_walk.landmarks.metrics import (all_positive, multilabel_metrics,
                                                     random_positive)
from ttw_jax.talk_the_walk.landmarks.model import BagOfEmbeddings

LABELS = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0]])
PRED = np.array([[1, 1, 0], [0, 1, 0], [0, 1, 1]])


def test_weighted_scores_worked_example():
    # class 0: tp 1 fp 0 fn 1 -> P 1, R 1/2, F1 2/3, support 2
    # class 1: tp 2 fp 1 fn 0 -> P 2/3, R 1, F1 4/5, support 2
    # class 2: tp 0 fp 1 fn 1 -> P 0, R 0, F1 0, support 1
    # weighted by support (2, 2, 1) / 5: P = (2 + 4/3) / 5 = 2/3, R = (1 + 2) / 5 = 3/5,
    # F1 = (4/3 + 8/5) / 5 = 44/75
    m = multilabel_metrics(PRED, LABELS)
    assert m["weighted_precision"] == pytest.approx(2 / 3)
    assert m["weighted_recall"] == pytest.approx(3 / 5)
    assert m["weighted_f1"] == pytest.approx(44 / 75)
    assert m["macro_f1"] == pytest.approx((2 / 3 + 4 / 5) / 3)   # unweighted: differs
    # all positive: class prevalence p gives P = p, R = 1, F1 = 2p / (1 + p):
    # (2/3, 2/3, 1/3) -> F1 (4/5, 4/5, 1/2), weighted (8/5 + 8/5 + 1/2) / 5 = 37/50
    m = multilabel_metrics(all_positive(LABELS.shape), LABELS)
    assert m["weighted_f1"] == pytest.approx(37 / 50)
    assert m["weighted_precision"] == pytest.approx((2 * 2 / 3 + 2 * 2 / 3 + 1 / 3) / 5)
    assert m["weighted_recall"] == 1.0


def test_weighted_scores_ignore_classes_without_positives():
    labels = np.array([[1, 0], [0, 0]])
    m = multilabel_metrics(np.array([[1, 1], [0, 1]]), labels)   # class 1 all false positives
    assert m["weighted_f1"] == 1.0 and m["macro_f1"] == 0.5
    assert multilabel_metrics(np.ones((2, 2)), np.zeros((2, 2)))["weighted_f1"] == 0.0
    r = random_positive((2000, 3), seed=0)
    assert r.dtype == bool and abs(r.mean() - 0.5) < 0.03


def test_class_weights_and_weighted_bce_by_hand():
    train = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0], [1, 0, 0]])   # positives 3, 1, 0 of 4
    w = class_weights(np.array([[1, 1, 1], [0, 0, 0]]), train)
    # present: 1/3, 1/1, (no positive: 0); absent: 1/(4-3), 1/(4-1), 1/4
    np.testing.assert_allclose(w, [[1 / 3, 1, 0], [1, 1 / 3, 1 / 4]], rtol=1e-6)
    # (y=1, z=0, w=2): 2 ln 2; (y=0, z=ln 3, w=5): -5 log(1/4) = 10 ln 2; mean over 2 entries
    loss = weighted_bce(jnp.array([[0.0, math.log(3)]]), jnp.array([[1, 0]]),
                        jnp.array([[2.0, 5.0]]))
    assert float(loss) == pytest.approx(6 * math.log(2), rel=1e-5)


def test_relevant_views_face_the_corner():
    # an even cx is a west corner, an even cy a south corner (the released get_orientation_keys)
    assert release.relevant_views(0, 0) == ("0_0_W1", "0_0_W2", "0_0_S1", "0_0_S2")
    assert release.relevant_views(1, 0) == ("1_0_E1", "1_0_E2", "1_0_S1", "1_0_S2")
    assert release.relevant_views(2, 5) == ("2_5_W1", "2_5_W2", "2_5_N1", "2_5_N2")
    assert release.relevant_views(3, 3) == ("3_3_E1", "3_3_E2", "3_3_N1", "3_3_N2")


def _tiny_map(name="fidi"):
    """fidi's corner grid (8 x 10) with a Bank and a Bar at (0, 0), a Shop at (3, 1)."""
    bx, by = maps.BOUNDARIES[name]
    corners = np.zeros((2 * bx + 4, 2 * by + 4, 2), np.int32)
    corners[..., 0] = maps.EMPTY_ID
    corners[0, 0] = [maps.LANDMARK_TYPES.index("Bank"), maps.LANDMARK_TYPES.index("Bar")]
    corners[3, 1, 0] = maps.LANDMARK_TYPES.index("Shop")
    return maps.NeighborhoodMap(name, (bx, by), corners)


def test_release_files_round_trip_into_corners(tmp_path):
    m = _tiny_map()
    release.write_synthetic_release(str(tmp_path), {m.name: m.corners}, seed=0, dim=8)
    raw = json.loads((tmp_path / "resnetfeat.json").read_text())
    assert set(raw) == {"fidi"} and len(raw["fidi"]) == 8 * 10 * 8   # 8 views per corner
    resnet, text = lf.read_release(str(tmp_path), [m], True, True)
    c = lf.build_corners([m], resnet, text)
    assert len(c) == 80 and c.keys[0] == "fidi_0_0" and c.keys[1] == "fidi_0_1"
    assert c.resnet.shape == (80, 4, 8)
    np.testing.assert_array_equal(c.resnet[0, 2], np.float32(raw["fidi"]["0_0_S1"]))
    i = list(c.keys).index("fidi_3_1")
    np.testing.assert_array_equal(c.resnet[i, 0], np.float32(raw["fidi"]["3_1_E1"]))
    bank, bar, shop, empty = (lf.CLASS_NAMES.index(t) for t in ("Bank", "Bar", "Shop", "Empty"))
    assert np.flatnonzero(c.labels[0]).tolist() == sorted([bank, bar])
    assert np.flatnonzero(c.labels[i]).tolist() == [shop]
    assert c.labels[1, empty] == 1 and c.labels[:, empty].sum() == 78
    raw_text = json.loads((tmp_path / "fidi" / "text.json").read_text())
    assert c.words[0] == [e["lex_recog"] for k in release.relevant_views(0, 0)
                          for e in raw_text.get(k, [])]
    vocab = lf.vocabulary(text)
    ids = lf.token_ids(c.words, vocab)
    assert ids.shape[0] == 80 and (ids[0, :len(c.words[0])] > 0).all()
    assert [vocab[j - 1] for j in ids[0, :len(c.words[0])]] == c.words[0]


@pytest.mark.parametrize("content, match", [
    ([], "top level"),
    ({"fidi": []}, "neighbourhood 'fidi'"),
    ({"fidi": {"0_0": [1.0]}}, r"key '0_0': expected a view key"),
    ({"fidi": {"0_0_X1": [1.0]}}, r"key '0_0_X1'"),
    ({"fidi": {"0_0_W1": ["1"]}}, r"key '0_0_W1': expected a non-empty flat list of numbers"),
    ({"fidi": {"0_0_W1": [1.0, 2.0], "0_0_W2": [1.0]}}, r"key '0_0_W2': expected 2 numbers"),
    ({"fidi": {"0_0_W1": [1e400]}}, r"key '0_0_W1': non-finite"),
])
def test_resnet_file_errors_name_file_and_key(tmp_path, content, match):
    path = tmp_path / "resnetfeat.json"
    path.write_text(json.dumps(content).replace("1e+400", "1e400"))
    with pytest.raises(release.FeatureFormatError, match=match) as e:
        release.read_resnet(str(path))
    assert str(path) in str(e.value)


def test_missing_views_texts_and_files_are_named(tmp_path):
    m = _tiny_map()
    release.write_synthetic_release(str(tmp_path), {m.name: m.corners}, seed=0, dim=4)
    resnet = release.read_resnet(str(tmp_path / "resnetfeat.json"))
    del resnet["fidi"]["3_1_N2"]
    with pytest.raises(release.FeatureFormatError, match=r"no vector for view '3_1_N2' of corner"):
        lf.build_corners([m], resnet, None)
    with pytest.raises(release.FeatureFormatError, match="no neighbourhood 'fidi'"):
        lf.build_corners([m], {"uppereast": {}}, None)
    (tmp_path / "fidi" / "text.json").write_text(json.dumps({"0_0_W1": [{"text": "bank"}]}))
    with pytest.raises(release.FeatureFormatError, match=r"key '0_0_W1', entry 0, field 'lex_recog'"):
        release.read_text(str(tmp_path / "fidi" / "text.json"))
    with pytest.raises(FileNotFoundError, match=r"eastvillage/text.json: not found.*talkthewalk"):
        lf.read_release(str(tmp_path), [_tiny_map("eastvillage")], False, True)


def test_fasttext_vec_reader(tmp_path):
    path = tmp_path / "wiki.vec"
    path.write_text("4 3\nbank 1 2 3\nbar 0 1 0\nBar 5 5 5\nthe 9 9 9\n")
    vectors, dim = release.read_vec(str(path), ["bank", "BAR", "Bar", "pizza"])
    assert dim == 3 and set(vectors) == {"bank", "BAR", "Bar"}   # 'pizza' has no vector
    np.testing.assert_array_equal(vectors["BAR"], [0, 1, 0])    # lower-cased: 'bar'
    np.testing.assert_array_equal(vectors["Bar"], [5, 5, 5])    # as written first
    table, oov = lf.word_table(["BAR", "bank", "pizza"], vectors, dim)
    assert oov == 1 and table.shape == (4, 3)
    np.testing.assert_array_equal(table[[0, 3]], 0)
    np.testing.assert_array_equal(table[2], [1, 2, 3])
    path.write_text("bank 1 2 x\n")
    with pytest.raises(release.FeatureFormatError, match=r"wiki.vec: line 1 \('bank'\)"):
        release.read_vec(str(path), ["bank"])


def test_pca_matches_the_principal_axes():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 6)) @ np.diag([5, 3, 1, 0.5, 0.2, 0.1])
    z = lf.pca(x, 2)
    assert z.shape == (50, 2)
    np.testing.assert_allclose(z.mean(0), 0, atol=1e-5)
    # the variance kept is the top-2 eigenvalues of the covariance, the scores are uncorrelated
    eig = np.sort(np.linalg.eigvalsh(np.cov(x.T)))[::-1]
    np.testing.assert_allclose(np.var(z, 0, ddof=1), eig[:2], rtol=1e-4)
    assert abs(np.corrcoef(z.T)[0, 1]) < 1e-4
    assert (z[np.abs(z).argmax(0), [0, 1]] > 0).all()     # the sign rule
    with pytest.raises(ValueError, match="n_components must be in 1..6"):
        lf.pca(x, 7)


def test_bag_of_embeddings_shapes_pooling_and_padding():
    rng = np.random.default_rng(0)
    batch = {"resnet": jnp.asarray(rng.standard_normal((3, 4, 5)), jnp.float32),
             "text": jnp.array([[1, 2, 0], [3, 0, 0], [0, 0, 0]])}
    model = BagOfEmbeddings(text_vocab=4)
    params = model.init(jax.random.key(0), batch)
    out = model.apply(params, batch)
    assert out.shape == (3, 10)
    # the bag is order-free, padding adds nothing, a corner without text gets only ResNet logits
    perm = {"resnet": batch["resnet"][:, ::-1], "text": jnp.array([[2, 1, 0], [0, 3, 0], [0, 0, 0]])}
    np.testing.assert_allclose(model.apply(params, perm), out, rtol=1e-5, atol=1e-6)
    only = BagOfEmbeddings(text_vocab=4).apply(
        {"params": {"resnet_linear": params["params"]["resnet_linear"]}}, {"resnet": batch["resnet"]})
    np.testing.assert_allclose(out[2], only[2], rtol=1e-5, atol=1e-6)
    # sum pooling without bias = the linear map of the summed (scaled) features
    w = params["params"]["resnet_linear"]["kernel"]
    np.testing.assert_allclose(only, (batch["resnet"].sum(1) / 10) @ w, rtol=1e-4, atol=1e-6)
    mx = BagOfEmbeddings(text_vocab=4, pool="max")
    np.testing.assert_allclose(mx.apply(params, {"text": jnp.zeros((2, 3), int)}), 0.0)
    # fasttext: fixed vectors from the table, a linear map learned
    table = jnp.asarray(rng.standard_normal((4, 7)), jnp.float32).at[0].set(0)
    ft = BagOfEmbeddings()
    p = ft.init(jax.random.key(1), {"fasttext": batch["text"]}, table)
    np.testing.assert_allclose(ft.apply(p, {"fasttext": batch["text"]}, table),
                               table[batch["text"]].sum(1) @ p["params"]["fasttext_linear"]["kernel"],
                               rtol=1e-4, atol=1e-6)
    g = jax.grad(lambda q: model.apply(q, batch).sum())(params)
    assert all(np.isfinite(x).all() for x in jax.tree.leaves(g))


def _config(**kw):
    from experiments.ttw_landmarks.configs import default
    return override(default.get_config(), **kw)


def test_overfits_a_few_corners(learned, learning_seed):
    """Measured over 11 runs (seeds 0-4; 0-2 under --xla_cpu_max_isa=AVX2 and AVX;
    tests/learning_spread.py): weighted F1 1.0 in all."""
    from experiments.ttw_landmarks import train
    c = _config(model__features="resnet,textrecog")
    data = train.load_data(c)
    x = {k: jnp.asarray(v[:16]) for k, v in data["inputs"].items()}
    y = jnp.asarray(data["corners"].labels[:16])
    model = BagOfEmbeddings(text_vocab=data["vocab_size"] + 1)
    params = model.init(seeded_key(0, learning_seed), x)
    tx = optax.adam(0.05)
    state = tx.init(params)
    loss = lambda p: weighted_bce(model.apply(p, x), y, jnp.ones_like(y))

    @jax.jit
    def step(params, state):
        u, state = tx.update(jax.grad(loss)(params), state)
        return optax.apply_updates(params, u), state
    for _ in range(300):
        params, state = step(params, state)
    pred = np.asarray(model.apply(params, x)) >= 0
    learned(weighted_f1=(multilabel_metrics(pred, np.asarray(y))["weighted_f1"], ">=",
                         ALL_RIGHT))


def test_text_recognition_beats_the_baselines_on_the_real_maps(tmp_path, learned, learning_seed):
    """The real maps' labels with synthetic release-layout text; deterministic in the config
    (`seed`: the split, the initialisation, the shuffling). Measured over 11 runs (seeds 0-4; 0-2
    under --xla_cpu_max_isa=AVX2 and AVX; tests/learning_spread.py): valid weighted F1 above
    all-positive's by 0.220-0.304 and above random's by 0.319-0.378 (bounds 0.1)."""
    from experiments.ttw_landmarks import train
    c = _config(model__features="textrecog", seed=learning_seed,
                data__maps_dir=shared_path("ttw", "maps"), data__allow_synthetic_perception=True)
    r = train.train_and_evaluate(c, str(tmp_path))
    v = r["valid"]
    assert r["corners"]["train"] + r["corners"]["valid"] == 460
    f1 = v["model"]["weighted_f1"]
    learned(f1_over_all_positive=(f1 - v["all_positive"]["weighted_f1"], ">", 0.1),
            f1_over_random=(f1 - v["random"]["weighted_f1"], ">", 0.1),
            table18_f1_over_all_positive=(r["table18"]["valid_f1"]
                                          - v["all_positive"]["weighted_f1"], ">", 0))
    # the released per-batch means equal the whole-set scores when valid fits in one batch
    best = r["history"][r["best_epoch"] - 1]
    assert best["valid/loss"] == r["table18"]["valid_loss"]
    assert r["table18"]["valid_f1"] == pytest.approx(v["model"]["weighted_f1"], abs=1e-6)
    assert os.path.exists(tmp_path / "learning_curve.png")


def test_fasttext_and_pca_rows_run(tmp_path):
    from experiments.ttw_landmarks import train
    m = _tiny_map()
    feats = tmp_path / "release"
    release.write_synthetic_release(str(feats), {m.name: m.corners}, seed=0, dim=16)
    words = sorted({w for ws in release.CLASS_WORDS for w in ws} | set(release.NOISE_WORDS))
    rng = np.random.default_rng(0)
    vec = tmp_path / "tiny.vec"
    vec.write_text(f"{len(words) - 1} 12\n" + "".join(
        w + " " + " ".join(f"{x:.4f}" for x in rng.standard_normal(12)) + "\n"
        for w in words[1:]))                          # the first word has no vector
    maps_dir = tmp_path / "maps"
    os.makedirs(maps_dir / "fidi")
    (maps_dir / "fidi" / "map.json").write_text(json.dumps(
        [{"x": 0, "y": 0, "orientation": "SW", "type": "Bank", "name": "b"}]))
    base = dict(num_epochs=3, data__maps_dir=str(maps_dir), data__features_dir=str(feats),
                data__fasttext_vec=str(vec))
    r = train.train_and_evaluate(_config(model__features="fasttext", data__pca_components=5,
                                         **base), str(tmp_path / "ft"))
    assert r["row"] == "fasttext (5 dim)" and r["words_without_vector"] >= 1
    r = train.train_and_evaluate(_config(model__features="resnet", data__pca_components=8,
                                         **base), str(tmp_path / "rn"))
    assert r["row"] == "resnet (8 dim)" and r["table18"]["valid_loss"] > 0
    with pytest.raises(ValueError, match="needs config.data.fasttext_vec"):
        train.train_and_evaluate(_config(model__features="fasttext"), str(tmp_path / "x"))


def test_bfloat16_does_the_dense_work_in_bfloat16_and_keeps_float32_parameters(tmp_path):
    """`dtype=bfloat16`: the traced gradient step does its matmuls on bfloat16 operands while the
    parameters, the logits the loss takes and the gradients stay float32, the loss within
    `BF16_LOSS_RTOL` of float32's; a short run in bfloat16 records its dtype and profiles the
    training batches `profile_steps` names."""
    from experiments.benchmarks.flops import flops_by_dtype
    from experiments.ttw_landmarks import train
    c = _config(model__features="resnet,textrecog", dtype="bfloat16")
    data = train.load_data(c)
    x = {k: jnp.asarray(v[:32]) for k, v in data["inputs"].items()}
    y = jnp.asarray(data["corners"].labels[:32])
    models = {d: train.build_model(override(_config(model__features="resnet,textrecog"), dtype=d),
                                   data["vocab_size"]) for d in ("float32", "bfloat16")}
    params = jax.jit(models["bfloat16"].init)(jax.random.key(0), x)["params"]
    loss = {d: (lambda p, m=m: (weighted_bce(m.apply({"params": p}, x), y, jnp.ones_like(y)), {}))
            for d, m in models.items()}
    by = flops_by_dtype(jax.grad(lambda p: loss["bfloat16"](p)[0]), params)
    assert by.get("bfloat16", 0) >= 0.99 * sum(by.values()) > 0, by
    logits, grads = jax.eval_shape(lambda p: (models["bfloat16"].apply({"params": p}, x),
                                              jax.grad(lambda q: loss["bfloat16"](q)[0])(p)),
                                   params)
    assert {a.dtype for a in jax.tree.leaves((params, logits, grads))} == {jnp.dtype(jnp.float32)}
    assert_bfloat16_loss_close(loss["float32"], loss["bfloat16"], params)

    r = train.train_and_evaluate(_config(num_epochs=1, dtype="bfloat16", profile_steps="1,2"),
                                 str(tmp_path))
    assert r["provenance"]["dtype"] == "bfloat16" and r["table18"]["valid_loss"] > 0
    assert [f for _, _, files in os.walk(tmp_path / "profile") for f in files
            if f.endswith(".xplane.pb")]


class TestTrainer(TrainerContract):
    name = "ttw_landmarks"

    def test_tiny_run_reports_table18(self, trained):
        _, r = trained(self.name)
        assert set(r["table18"]) == {"train_loss", "valid_loss", "train_f1", "valid_f1",
                                     "valid_precision", "valid_recall"}
        assert set(r["valid"]["model"]["per_class"]) == set(lf.CLASS_NAMES)
        assert r["valid"]["all_positive"]["weighted_recall"] == 1.0
        assert 1 <= r["best_epoch"] <= r["num_epochs"]
