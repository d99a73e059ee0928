"""Synthetic RxR instructions on real Matterport scans: schema, determinism, disjoint splits,
landmarks named in order (en-US and hi-IN), valid walks."""
import math

import numpy as np
import pytest

from tests.conftest import shared_path
from ttw_jax.core.vocab import tokenize
from ttw_jax.rxr import synthetic as rs
from ttw_jax.rxr.graph import load_matterport_graph
from ttw_jax.rxr.path_sampling import scan_geodesics

TRAIN = ["17DRP5sb8fy", "1LXtFkjw3qL", "1pXnuDYAj8r", "29hnd4uzFmX"]
UNSEEN = ["2azQ1b91cZZ", "2n8kARJN3HM"]
SIZES = [("train", 600, 1), ("val_seen", 150, 2), ("val_unseen", 150, 3)]
KEYS = {"instruction_id", "path_id", "scan", "path", "heading", "instruction", "language",
        "annotator", "edit_distance", "distance", "timed_words", "step_words", "step_views",
        "text_features"}


@pytest.fixture(scope="module")
def cdir():
    return shared_path("matterport", "connectivity")


@pytest.fixture(scope="module")
def splits(cdir):
    return rs.synthetic_split_records(cdir, TRAIN, UNSEEN, SIZES, seed=0)


@pytest.fixture(scope="module")
def graph(cdir):
    return load_matterport_graph(cdir, TRAIN + UNSEEN)


def landmark_words(text, language):
    vocab = set(rs.LANDMARKS[language])
    return [w for w in tokenize(text) if w in vocab]


def test_landmark_tables():
    en, hi = rs.LANDMARKS["en-US"], rs.LANDMARKS["hi-IN"]
    assert len(en) == len(hi) == 16 and len(set(en)) == len(set(hi)) == 16
    # Every landmark is a single token, so it can be found again in a tokenised instruction.
    for words in (en, hi):
        assert all(tokenize(w) == [w] for w in words)
    assert all("\u0900" <= ch <= "\u097f" for w in hi for ch in w)


def test_node_landmarks_are_stable_hashes():
    ids = ["scan/abc", "abc", "scan/def", "xyz"]
    a = rs.node_landmarks(ids)
    assert a.dtype == np.int32 and a[0] == a[1]
    assert np.array_equal(a, rs.node_landmarks(ids))
    many = [f"{i:032x}" for i in range(2000)]
    lm = rs.node_landmarks(many)
    assert lm.min() >= 0 and lm.max() < 16 and np.bincount(lm, minlength=16).min() > 60
    assert not np.array_equal(lm, rs.node_landmarks(many, seed=1))
    assert rs.node_landmarks(many, num_landmarks=4).max() < 4
    with pytest.raises(ValueError):
        rs.node_landmarks(many, num_landmarks=17)


@pytest.mark.parametrize("language", rs.LANGUAGES)
def test_instruction_names_landmarks_in_order(language):
    rng = np.random.default_rng(0)
    for n in range(1, 8):
        for _ in range(20):
            ids = rng.integers(0, 16, n).tolist()
            text = rs.instruction(ids, language, rng)
            assert landmark_words(text, language) == [rs.LANDMARKS[language][i] for i in ids]
            assert text[-1] in ".।"
            for word in ("left", "right", "turn", "around", "बाएँ", "दाएँ", "मुड़"):
                assert word not in text
    with pytest.raises(ValueError):
        rs.instruction([1], "fr-FR", rng)


def test_schema_and_sizes(splits):
    assert list(splits) == ["train", "val_seen", "val_unseen"]
    assert [len(splits[n]) for n, _, _ in SIZES] == [c for _, c, _ in SIZES]
    for records in splits.values():
        for r in records:
            assert set(r) == KEYS
            assert isinstance(r["instruction_id"], int) and isinstance(r["path_id"], int)
            assert 0 <= r["heading"] < 2 * math.pi
            assert r["language"] in rs.LANGUAGES and r["annotator"] == "synthetic"
            assert math.isnan(r["edit_distance"]) and r["timed_words"] == []
            assert r["step_words"] is None and r["step_views"] is None
            assert r["text_features"] is None
            assert all("/" not in v for v in r["path"]) and 3 <= len(r["path"]) <= 7
    langs = [r["language"] for r in splits["train"]]
    assert 0.35 < langs.count("en-US") / len(langs) < 0.65


def test_ids_and_paths_disjoint(splits):
    all_records = [r for rs_ in splits.values() for r in rs_]
    ids = [r["instruction_id"] for r in all_records]
    assert sorted(ids) == list(range(len(ids)))
    path_of = {}
    for r in all_records:
        assert path_of.setdefault(r["path_id"], (r["scan"], tuple(r["path"]))) == \
            (r["scan"], tuple(r["path"]))
    train_p = {r["path_id"] for r in splits["train"]}
    seen_p = {r["path_id"] for r in splits["val_seen"]}
    unseen_p = {r["path_id"] for r in splits["val_unseen"]}
    assert not train_p & seen_p and not (train_p | seen_p) & unseen_p
    assert not {path_of[p] for p in train_p} & {path_of[p] for p in seen_p}
    assert {r["scan"] for r in splits["train"]} <= set(TRAIN)
    assert {r["scan"] for r in splits["val_seen"]} <= set(TRAIN)
    assert {r["scan"] for r in splits["val_unseen"]} == set(UNSEEN)


def test_paths_are_walks_and_instructions_match(splits, graph):
    g, nodes, scan_of = graph
    nb = np.asarray(g.neighbors)
    landmarks = rs.node_landmarks(nodes.ids)
    pairs, expected = [], []
    for records in splits.values():
        for r in records:
            path = nodes.lookup([f"{r['scan']}/{v}" for v in r["path"]])
            for a, b in zip(path, path[1:]):
                assert b in nb[a]
            words = landmark_words(r["instruction"], r["language"])
            assert words == [rs.LANDMARKS[r["language"]][i] for i in landmarks[path[1:]]]
            pairs.append((path[0], path[-1]))
            expected.append(r["distance"])
    np.testing.assert_allclose(scan_geodesics(g, scan_of, pairs), expected, rtol=1e-6)


def test_small_scans_reuse_paths_in_the_other_language(cdir):
    # 17DRP5sb8fy has 44 viewpoints: far fewer paths than instructions.
    out = rs.synthetic_split_records(cdir, TRAIN[:1], UNSEEN[:1],
                                     [("train", 400, 1), ("val_seen", 100, 2)])
    assert [len(v) for v in out.values()] == [400, 100]
    for records in out.values():
        assert len({r["path_id"] for r in records}) < len(records)
        last = {}
        for r in records:
            if r["path_id"] in last:
                assert r["language"] != last[r["path_id"]]
            last[r["path_id"]] = r["language"]
    assert not ({r["path_id"] for r in out["train"]} & {r["path_id"] for r in out["val_seen"]})


def test_deterministic_given_seeds(cdir, splits):
    again = rs.synthetic_split_records(cdir, TRAIN, UNSEEN, SIZES, seed=0)
    for name in splits:
        a, b = splits[name], again[name]
        assert [{k: v for k, v in r.items() if k != "edit_distance"} for r in a] == \
            [{k: v for k, v in r.items() if k != "edit_distance"} for r in b]
    other = rs.synthetic_split_records(cdir, TRAIN, UNSEEN, [("train", 600, 5)], seed=0)
    assert [r["instruction"] for r in other["train"]] != \
        [r["instruction"] for r in splits["train"]]
    with pytest.raises(ValueError, match="both seen and unseen"):
        rs.synthetic_split_records(cdir, TRAIN, TRAIN[:1], SIZES)
