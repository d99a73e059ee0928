"""Landmark classification: metrics, weighted BCE, feature files, splits, model and a tiny run."""
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.experiments.contract import TrainerContract
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.landmarks import features as lf
from ttw_jax.talk_the_walk.landmarks.losses import pos_weights, weighted_bce
from ttw_jax.talk_the_walk.landmarks.metrics import (all_positive, multilabel_metrics,
                                                     random_positive)
from ttw_jax.talk_the_walk.landmarks.model import LandmarkClassifier

LABELS = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 0]])
PRED = np.array([[1, 0, 0], [0, 1, 1], [1, 0, 0], [1, 0, 0]])


def test_metrics_worked_example():
    # class 0: tp 2 fp 1 fn 0 -> P 2/3 R 1 F1 4/5; class 1: tp 1 fp 0 fn 1 -> P 1 R 1/2 F1 2/3;
    # class 2: tp 0 fp 1 fn 1 -> P 0 R 0 F1 0 (0/0); micro: tp 3 fp 2 fn 2 -> P = R = F1 = 3/5.
    m = multilabel_metrics(PRED, LABELS)
    np.testing.assert_allclose(m["precision"], [2 / 3, 1, 0])
    np.testing.assert_allclose(m["recall"], [1, 1 / 2, 0])
    np.testing.assert_allclose(m["f1"], [4 / 5, 2 / 3, 0])
    np.testing.assert_array_equal(m["support"], [2, 2, 1])
    for k in ("micro_precision", "micro_recall", "micro_f1"):
        assert m[k] == pytest.approx(3 / 5)
    assert m["macro_precision"] == pytest.approx(5 / 9)
    assert m["macro_recall"] == pytest.approx(1 / 2)
    assert m["macro_f1"] == pytest.approx(22 / 45)  # mean of per-class F1, not F1(macro P, macro R)


def test_metrics_zero_division_is_zero():
    labels = np.array([[1, 0], [0, 0]])
    m = multilabel_metrics(np.zeros_like(labels), labels)  # nothing predicted; class 1 never positive
    for k in ("micro_precision", "micro_recall", "micro_f1", "macro_precision", "macro_recall",
              "macro_f1"):
        assert m[k] == 0.0
    m = multilabel_metrics(np.array([[1, 0], [0, 0]]), labels)  # class 0 perfect, class 1 all 0/0
    np.testing.assert_array_equal(m["f1"], [1, 0])
    assert m["micro_f1"] == 1.0 and m["macro_f1"] == 0.5
    # all-positive baseline on LABELS: P = prevalence 5/12, R = 1.
    m = multilabel_metrics(all_positive(LABELS.shape), LABELS)
    assert m["micro_precision"] == pytest.approx(5 / 12) and m["micro_recall"] == 1.0
    assert m["micro_f1"] == pytest.approx(2 * (5 / 12) / (1 + 5 / 12))
    r = random_positive((2000, 3), seed=0)
    assert r.dtype == bool and abs(r.mean() - 0.5) < 0.03


def test_pos_weights_and_weighted_bce_by_hand():
    labels = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0], [1, 0, 0]])  # n_c = 3, 1, 0 of N = 4
    np.testing.assert_allclose(pos_weights(labels), [1 / 3, 3, 100], rtol=1e-6)
    np.testing.assert_allclose(pos_weights(labels, max_weight=2.0), [0.5, 2, 2])
    # (y=1, z=0, w=2): -2 log(1/2) = 2 ln 2; (y=0, z=ln 3): -log(1 - 3/4) = 2 ln 2.
    loss = weighted_bce(jnp.array([[0.0, math.log(3)]]), jnp.array([[1, 0]]), jnp.array([2.0, 5.0]))
    assert float(loss) == pytest.approx(2 * math.log(2), rel=1e-5)
    # (y=1, z=ln 3, w=5): -5 log(3/4); (y=0, z=0, w=1): ln 2; mean of the two.
    loss = weighted_bce(jnp.array([[math.log(3), 0.0]]), jnp.array([[1, 0]]), jnp.array([5.0, 1.0]))
    assert float(loss) == pytest.approx((5 * math.log(4 / 3) + math.log(2)) / 2, rel=1e-5)


def test_feature_files_round_trip(tmp_path):
    feats = {"fidi_0_3": np.arange(8, dtype=np.float32).reshape(4, 2),
             "hellskitchen_9_1": -np.ones((4, 2), np.float32)}
    for ext in ("npz", "json"):
        path = str(tmp_path / f"f.{ext}")
        lf.save_features(path, feats)
        loaded = lf.load_features(path)
        assert sorted(loaded) == sorted(feats)
        for k in feats:
            np.testing.assert_array_equal(loaded[k], feats[k])
            assert loaded[k].dtype == np.float32
    out = lf.gather_features(loaded, ["hellskitchen_9_1", "fidi_0_3"])
    assert out.shape == (2, 4, 2)
    with pytest.raises(KeyError, match=r"f\.json.*'fidi_1_1'"):
        lf.gather_features(loaded, ["fidi_0_3", "fidi_1_1"], source=path)


@pytest.mark.parametrize("content, match", [
    ([1, 2], r"top level: expected an object"),
    ({"fidi-0-3": [[0.0]] * 4}, r"key 'fidi-0-3': expected a corner key"),
    ({"fidi_0_3": [[0.0]] * 3}, r"key 'fidi_0_3': expected a list of 4 views, got 3 items"),
    ({"fidi_0_3": [[0.0], [0.0], [0.0], 5]}, r"key 'fidi_0_3', view 3: expected a list"),
    ({"fidi_0_3": [[0.0, 1.0]] * 3 + [[0.0, "x"]]}, r"key 'fidi_0_3', view 3, element 1"),
    ({"fidi_0_3": [[0.0, 1.0]] * 3 + [[0.0, True]]}, r"key 'fidi_0_3', view 3, element 1"),
    # non-finite values are rejected (`ttw_jax.core.records.is_number`; they used to pass)
    ({"fidi_0_3": [[0.0, float("nan")]] * 4},
     r"key 'fidi_0_3', view 0, element 1: expected a finite number, got nan"),
    ({"fidi_0_3": [[0.0, 1.0]] * 3 + [[float("-inf"), 1.0]]},
     r"key 'fidi_0_3', view 3, element 0: expected a finite number, got -inf"),
    ({"fidi_0_3": [[0.0, 1.0]] * 4, "fidi_0_4": [[0.0]] * 4},
     r"key 'fidi_0_4', view 0: expected 2 numbers"),
])
def test_json_errors_name_file_key_field(tmp_path, content, match):
    path = tmp_path / "feat.json"
    path.write_text(json.dumps(content))
    with pytest.raises(lf.FeatureFormatError, match=r"feat\.json: " + match):
        lf.load_features(str(path))


def test_npz_errors_and_missing_file(tmp_path):
    path = str(tmp_path / "feat.npz")
    np.savez(path, keys=np.array(["fidi_0_3"]))
    with pytest.raises(lf.FeatureFormatError, match=r"feat\.npz: array 'features': missing"):
        lf.load_features(path)
    np.savez(path, keys=np.array(["fidi_0_3"]), features=np.zeros((1, 3, 2)))
    with pytest.raises(lf.FeatureFormatError, match=r"array 'features': expected shape \(1, 4, D\)"):
        lf.load_features(path)
    np.savez(path, keys=np.array(["fidi_0_3"], dtype=object), features=np.zeros((1, 4, 2)))
    with pytest.raises(lf.FeatureFormatError, match=r"array 'keys': must be a string array"):
        lf.load_features(path)
    np.savez(path, keys=np.array(["fidi_0_3", "bad"]), features=np.zeros((2, 4, 2)))
    with pytest.raises(lf.FeatureFormatError, match=r"array 'keys', entry 1: .*'bad'"):
        lf.load_features(path)
    missing = str(tmp_path / "resnetfeat.json")
    with pytest.raises(FileNotFoundError, match=r"resnetfeat\.json.*facebookresearch/talkthewalk"):
        lf.load_features(missing)


def test_labels_splits_and_synthetic_features():
    corners = np.zeros((8, 10, 2), np.int32)
    corners[:, :, 0] = maps.EMPTY_ID
    corners[1, 2] = [maps.LANDMARK_TYPES.index("Bank"), maps.LANDMARK_TYPES.index("Shop")]
    corners[7, 9] = [maps.LANDMARK_TYPES.index("Hotel"), 0]
    nmap = maps.NeighborhoodMap("fidi", maps.BOUNDARIES["fidi"], corners)
    labels = lf.corner_labels(nmap)
    assert labels.shape == (80, 9) and labels.sum() == 3
    keys = lf.corner_keys(nmap).tolist()
    assert labels[keys.index("fidi_1_2")].tolist() == [0, 1, 0, 1, 0, 0, 0, 0, 0]  # Shop, Bank
    assert labels[keys.index("fidi_7_9"), lf.CLASS_NAMES.index("Hotel")] == 1

    # fidi (boundary 2, 3): test windows cover cx 0-5, cy 6-9 (24 corners); valid windows the rest
    # of cx 0-7, cy 4-9 (24); every other corner (32) is train.
    splits = lf.corner_splits(nmap).reshape(8, 10)
    assert (splits[:6, 6:] == "test").all() and (splits == "test").sum() == 24
    assert (splits == "valid").sum() == 24 and (splits[:, :4] == "train").all()
    sets = lf.split_corners(maps.synthetic_maps(0))
    all_keys = np.concatenate([s.keys for s in sets.values()])
    assert len(set(all_keys)) == len(all_keys) == sum(
        m.corners.shape[0] * m.corners.shape[1] for m in maps.synthetic_maps(0))

    f = lf.synthetic_features([nmap], dim=16, seed=1, noise=0.0, visibility=1.0)
    assert len(f) == 80 and f["fidi_0_0"].shape == (4, 16)
    np.testing.assert_array_equal(f["fidi_0_0"], 0)  # no landmarks, no noise
    assert np.allclose(np.linalg.norm(f["fidi_7_9"], axis=1), 1)  # one unit prototype per view
    g = lf.synthetic_features([nmap], dim=16, seed=1, noise=0.3)
    np.testing.assert_array_equal(g["fidi_1_2"], lf.synthetic_features([nmap], 16, 1, 0.3)["fidi_1_2"])


def test_model_shapes_and_view_permutation_invariance():
    x = jax.random.normal(jax.random.key(0), (3, 4, 5))
    for pool in ("max", "mean"):
        model = LandmarkClassifier(hidden=8, num_classes=9, pool=pool, dropout=0.5)
        params = model.init(jax.random.key(1), x)
        out = model.apply(params, x)
        assert out.shape == (3, 9)
        np.testing.assert_allclose(model.apply(params, x[:, ::-1]), out, rtol=1e-5, atol=1e-6)


class TestTrainer(TrainerContract):
    name = "ttw_landmarks"

    def test_tiny_training_beats_baselines(self, trained):
        _, results = trained(self.name)
        valid = results["valid"]
        for metric in ("micro_f1", "macro_f1"):
            assert valid["model"][metric] > valid["all_positive"][metric]
            assert valid["model"][metric] > valid["random"][metric]
        assert valid["model"]["micro_f1"] > 0.4
        assert set(results["test"]["model"]["per_class"]) == set(lf.CLASS_NAMES)
