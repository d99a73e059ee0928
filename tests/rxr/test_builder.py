"""TF-free tests of the `rxr` TFDS builder (build to ArrayRecord, read with data_source) and of
`ttw_jax.rxr.dataset`."""
import math
import os
import sys
import types

import ml_dtypes
import numpy as np
import pytest
import tensorflow_datasets as tfds

from tests.conftest import shared_path
from tests.rxr.test_records import (CASE_STEP_VIEWS, CASE_STEP_WORDS, CASE_WORDS, HINDI, rxr_line,
                                    timed, write_case_trace, write_jsonl)
from ttw_datasets.rxr import rxr_dataset_builder as rb
from ttw_jax.rxr import dataset as rxr_data, records as rr
from ttw_jax.rxr.graph import list_scans, load_matterport_graph


def build(data_dir, config, manual_dir=None):
    builder = rb.Builder(config=config, data_dir=str(data_dir), file_format="array_record")
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(manual_dir))
        if manual_dir else None)


def f32(x):
    return float(np.float32(x))


def assert_same_records(got, expected):
    """`got` (loaded) equals `expected` (read from the files) up to float32 and the order."""
    expected = sorted(expected, key=lambda r: (r["instruction_id"], r["annotator"]))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert set(g) == set(rr.RECORD_KEYS)
        for key in ("instruction_id", "path_id", "scan", "path", "instruction", "language",
                    "annotator", "timed_words"):
            assert g[key] == e[key], key
            assert type(g[key]) is type(e[key]), key
        for key in ("heading", "edit_distance", "distance"):
            assert type(g[key]) is float
            assert g[key] == f32(e[key]) or (math.isnan(g[key]) and math.isnan(e[key])), key
        for key in ("step_words", "step_views", "step_subwords", "text_features"):
            if e[key] is None:
                assert g[key] is None, key
            elif key == "text_features":   # stored as bfloat16: its values, rounded
                assert g[key].dtype == ml_dtypes.bfloat16 and g[key].shape == e[key].shape
                np.testing.assert_array_equal(
                    g[key], e[key].astype(ml_dtypes.bfloat16))
            else:
                assert g[key].dtype == e[key].dtype and g[key].shape == e[key].shape, key
                np.testing.assert_array_equal(g[key], e[key])


def test_configs():
    assert rb.Builder.DEFAULT_CONFIG_NAME == "synthetic"
    configs = rb.Builder.builder_configs
    assert set(configs) == {"synthetic", "guide", "follower", "guide_follower", "guide_en",
                            "guide_hi", "guide_te", "r2r", "guide_follower_xlate"}
    summary = {n: (c.source, c.annotators, c.languages, c.cross_translations)
               for n, c in configs.items()}
    assert summary == {
        "synthetic": ("synthetic", ("guide",), (), False), "r2r": ("r2r", ("guide",), (), False),
        "guide": ("rxr", ("guide",), (), False), "follower": ("rxr", ("follower",), (), False),
        "guide_follower": ("rxr", ("guide", "follower"), (), False),
        "guide_follower_xlate": ("rxr", ("guide", "follower"), (), True),
        "guide_en": ("rxr", ("guide",), ("en-IN", "en-US"), False),
        "guide_hi": ("rxr", ("guide",), ("hi-IN",), False),
        "guide_te": ("rxr", ("guide",), ("te-IN",), False)}
    cfg = configs["synthetic"]
    assert cfg.synthetic_sizes == (("train", 3000, 0), ("val_seen", 300, 1), ("val_unseen", 300, 2))
    assert cfg.synthetic_seed == 0
    train, unseen = cfg.synthetic_train_scans, cfg.synthetic_unseen_scans
    assert len(train) == 8 and len(unseen) == 3 and not set(train) & set(unseen)
    assert list(train) == sorted(train) and list(unseen) == sorted(unseen)
    scans = list_scans(shared_path("matterport", "connectivity"))
    assert set(train) | set(unseen) <= set(scans)
    with pytest.raises(ValueError, match="source must be one of"):
        rb.RxrConfig(name="x", source="touchdown").validate()
    with pytest.raises(ValueError, match="annotators must be a non-empty subset"):
        rb.RxrConfig(name="x", source="rxr", annotators=("leader",)).validate()
    with pytest.raises(ValueError, match="unknown language 'fr'"):
        rb.RxrConfig(name="x", languages=("fr",)).validate()
    assert rb.RxrConfig(name="x", languages=("hi", "en-US")).kept_languages() == {"hi-IN",
                                                                                   "en-US"}


@pytest.mark.slow
def test_r2r_builds_and_loads(tmp_path):
    """val_seen and test (train, 14k instructions, is read in test_rxr_records)."""
    manual = tmp_path / "manual"
    manual.mkdir()
    for split in ("val_seen", "test"):
        os.symlink(shared_path("r2r", f"R2R_{split}.json"), manual / f"R2R_{split}.json")
    build(tmp_path / "data", "r2r", manual)
    got = rb.load_rxr(str(tmp_path / "data"), "r2r")
    assert {s: len(v) for s, v in got.items()} == {"val_seen": 1021, "test": 4173}
    for split in got:
        assert_same_records(got[split], rr.read_r2r(str(manual / f"R2R_{split}.json")))
    assert all(math.isnan(r["distance"]) for r in got["test"])
    only = rb.load_rxr(str(tmp_path / "data"), "r2r", splits=["val_seen"])
    assert list(only) == ["val_seen"]
    with pytest.raises(ValueError, match=r"no split\(s\) \['train'\]"):
        rb.load_rxr(str(tmp_path / "data"), "r2r", splits=["train"])


@pytest.fixture
def rxr_manual(tmp_path):
    """A manual directory in the release layout: train guide + follower files, a val_seen guide
    file (plain .jsonl), the release-named test file, one guide and one follower pose trace and
    one text-feature file. Returns (directory, raw guide lines by instruction_id)."""
    manual = tmp_path / "manual"
    manual.mkdir()
    train = [rxr_line(7, "en-US", timed_instruction=CASE_WORDS),
             rxr_line(9, "hi-IN", instruction=HINDI, edit_distance=None,
                      timed_instruction=timed([("सीधे", 0.0, 0.5), ("चलिए", None, 1.2)])),
             rxr_line(8, "te", instruction="నేరుగా నడవండి")]
    write_jsonl(manual / "rxr_train_guide.jsonl.gz", train)
    write_jsonl(manual / "rxr_train_follower.jsonl.gz", [
        {"demonstration_id": 21, "instruction_id": 7, "annotator_id": 5,
         "path": ["vp_a", "vp_b", "vp_c"], "metrics": {"ne": 0.0, "sr": 1.0}},
        {"demonstration_id": 22, "instruction_id": 9, "annotator_id": 6,
         "path": ["vp_a", "vp_d"], "metrics": {"ne": 4.0, "sr": 0.0}}])
    val = [rxr_line(30, "en-IN", split="val_seen"), rxr_line(31, "hi", split="val_seen")]
    write_jsonl(manual / "rxr_val_seen_guide.jsonl", val)
    write_jsonl(manual / "rxr_test_standard_public_guide.jsonl.gz",
                [rxr_line(50, "te-IN", path=["vp_x"], timed_instruction=None)])
    write_case_trace(manual, 7)
    write_case_trace(manual, 21, annotator="follower", audio_time=[0, 1, 2, 3, 4, 5])
    (manual / "text_features").mkdir()
    np.save(manual / "text_features" / "000009.npy", np.arange(10, dtype=np.float32)
            .reshape(5, 2))
    return manual, {r["instruction_id"]: r for r in train + val}


def test_rxr_guide_follower_round_trip(tmp_path, rxr_manual):
    manual, raw = rxr_manual
    build(tmp_path / "data", "guide_follower", manual)
    got = rb.load_rxr(str(tmp_path / "data"), "guide_follower")
    assert {s: [(r["instruction_id"], r["annotator"]) for r in v] for s, v in got.items()} == {
        "train": [(7, "follower"), (7, "guide"), (8, "guide"), (9, "follower"), (9, "guide")],
        "val_seen": [(30, "guide"), (31, "guide")], "test_standard": [(50, "guide")]}
    for split in got:
        assert_same_records(got[split], rr.read_rxr_split(str(manual), split, (
            "guide", "follower") if split == "train" else ("guide",)))
    train = {(r["instruction_id"], r["annotator"]): r for r in got["train"]}
    # hand-computed masks (guide 7, and follower 21 of instruction 7 by audio_time)
    for who in ("guide", "follower"):
        np.testing.assert_array_equal(train[7, who]["step_words"], CASE_STEP_WORDS)
        np.testing.assert_array_equal(train[7, who]["step_views"], CASE_STEP_VIEWS)
    assert train[9, "guide"]["step_words"] is None and train[9, "guide"]["step_views"] is None
    # values as written
    g9, f9 = train[9, "guide"], train[9, "follower"]
    assert g9["instruction"] == f9["instruction"] == HINDI and g9["language"] == "hi-IN"
    assert g9["timed_words"] == ["सीधे", "चलिए"] and math.isnan(g9["edit_distance"])
    assert f9["path"] == ["vp_a", "vp_d"] and g9["path"] == ["vp_a", "vp_b", "vp_c"]
    np.testing.assert_array_equal(g9["text_features"], np.arange(10).reshape(5, 2))
    assert f9["text_features"] is not None   # the instruction's features
    assert train[8, "guide"]["language"] == "te-IN"
    g7 = train[7, "guide"]
    assert (g7["scan"], g7["path_id"], g7["heading"], g7["edit_distance"]) == (
        raw[7]["scan"], 107, f32(1.25), 0.125)
    assert g7["timed_words"] == [w["word"] for w in CASE_WORDS]
    assert got["test_standard"][0]["path"] == ["vp_x"]
    assert got["val_seen"][1]["language"] == "hi-IN"   # "hi" normalised


def test_language_and_annotator_configs(tmp_path, rxr_manual):
    manual, _ = rxr_manual
    expected = {
        "guide": {"train": [7, 8, 9], "val_seen": [30, 31], "test_standard": [50]},
        "guide_en": {"train": [7], "val_seen": [30]},
        "guide_hi": {"train": [9], "val_seen": [31]},
        "guide_te": {"train": [8], "test_standard": [50]},
        "follower": {"train": [7, 9]},
    }
    for config, ids in expected.items():
        build(tmp_path / "data", config, manual)
        got = rb.load_rxr(str(tmp_path / "data"), config)
        assert {s: [r["instruction_id"] for r in v] for s, v in got.items()} == ids, config
        langs = rb.Builder.builder_configs[config].kept_languages()
        assert all(langs is None or r["language"] in langs for v in got.values() for r in v)
    # a language that is absent everywhere
    only_hi = manual.parent / "only_hi"
    only_hi.mkdir()
    write_jsonl(only_hi / "rxr_val_unseen_guide.jsonl.gz", [rxr_line(3, "hi-IN")])
    with pytest.raises(ValueError, match=r"no instruction in languages \['te-IN'\].*"
                                         r"it has \['hi-IN'\]"):
        build(tmp_path / "data2", "guide_te", only_hi)


def test_missing_files_name_the_expected_files(tmp_path):
    manual = tmp_path / "manual"
    manual.mkdir()
    # An empty manual directory: TFDS refuses with our instructions, which name the files.
    with pytest.raises(AssertionError) as e:
        build(tmp_path / "data", "guide", manual)
    for name in ("rxr_{split}_guide.jsonl.gz", "rxr_train_guide.jsonl.gz",
                 "https://github.com/google-research-datasets/RxR", "R2R_train.json",
                 "_connectivity.json"):
        assert name in str(e.value)
    # Something else there, but no annotation file: the builder names every file it looked for.
    (manual / "README.txt").write_text("not an annotation file")
    with pytest.raises(FileNotFoundError) as e:
        build(tmp_path / "data", "guide", manual)
    for name in ("rxr_train_guide.jsonl.gz", "rxr_val_seen_guide.jsonl.gz",
                 "rxr_val_unseen_guide.jsonl.gz", "rxr_test_standard_public_guide.jsonl.gz"):
        assert name in str(e.value)
    assert "https://github.com/google-research-datasets/RxR" in str(e.value)
    with pytest.raises(FileNotFoundError, match="rxr_val_unseen_follower.jsonl.gz"):
        build(tmp_path / "data", "follower", manual)
    with pytest.raises(FileNotFoundError, match="R2R_train.json, R2R_val_seen.json"):
        build(tmp_path / "data", "r2r", manual)
    with pytest.raises(FileNotFoundError, match="not prepared"):
        rb.load_rxr(str(tmp_path / "data"), "guide")


def test_a_malformed_manual_file_names_file_line_and_field(tmp_path, rxr_manual):
    manual, _ = rxr_manual
    bad = manual / "rxr_val_seen_guide.jsonl"
    write_jsonl(bad, [rxr_line(30), rxr_line(31, path="vp_a")])
    with pytest.raises(rr.RecordFormatError, match=f"{bad}:2: field 'path' is not a non-empty "
                                                   "list"):
        build(tmp_path / "data", "guide", manual)
    write_jsonl(bad, [rxr_line(30)])
    trace = write_case_trace(manual, 30, split="val_seen", extrinsic_matrix=None)
    with pytest.raises(rr.PoseTraceError, match=f"{trace}: missing key 'extrinsic_matrix'"):
        build(tmp_path / "data", "guide", manual)
    # nothing was written
    assert not rb.Builder(config="guide", data_dir=str(tmp_path / "data")).is_prepared()
    assert not any(files for _, _, files in os.walk(tmp_path / "data" / "rxr" / "guide"))


def fake_synthetic_module(calls, bad=None):
    """A stand-in for `ttw_jax.rxr.synthetic` that records its arguments and returns a few
    records on real viewpoints of the requested scans."""
    def synthetic_split_records(connectivity_dir, train_scans, unseen_scans, sizes, seed):
        calls.append((connectivity_dir, tuple(train_scans), tuple(unseen_scans),
                      tuple(map(tuple, sizes)), seed))
        graph, nodes, scan_of = load_matterport_graph(connectivity_dir,
                                                      [train_scans[0], unseen_scans[0]])
        nb = np.asarray(graph.neighbors)
        out, iid = {}, 0
        for split, num, _ in sizes:
            scan_index = 1 if "unseen" in split else 0
            start = int(np.nonzero(scan_of == scan_index)[0][0])
            path = [start, int(nb[start, 0])]
            out[split] = []
            for k in range(min(num, 3)):
                lang = ("en-US", "hi-IN")[k % 2]
                out[split].append({
                    "instruction_id": iid, "path_id": iid // 2,
                    "scan": nodes.ids[path[0]].split("/")[0],
                    "path": [nodes.ids[i].split("/")[1] for i in path],
                    "heading": 0.5 * k, "instruction": f"walk {k}" if k % 2 == 0 else HINDI,
                    "language": lang, "annotator": "synthetic", "edit_distance": math.nan,
                    "distance": 2.0 + k, "timed_words": [], "step_words": None,
                    "step_views": None})
                iid += 1
        if bad:
            out[sizes[0][0]][1].update(bad)
        return out
    return types.SimpleNamespace(synthetic_split_records=synthetic_split_records)


def test_synthetic_config_calls_the_generator(tmp_path, monkeypatch):
    conn = shared_path("matterport", "connectivity")
    calls = []
    monkeypatch.setitem(sys.modules, rb.SYNTHETIC_MODULE, fake_synthetic_module(calls))
    # the shared layout: the connectivity files under `connectivity/` of the manual directory
    build(tmp_path / "data", "synthetic", os.path.dirname(conn))
    cfg = rb.Builder.builder_configs["synthetic"]
    assert calls == [(conn, cfg.synthetic_train_scans, cfg.synthetic_unseen_scans,
                      cfg.synthetic_sizes, 0)]
    got = rb.load_rxr(str(tmp_path / "data"))   # the default config
    expected = fake_synthetic_module([]).synthetic_split_records(
        conn, cfg.synthetic_train_scans, cfg.synthetic_unseen_scans, cfg.synthetic_sizes, 0)
    assert list(got) == ["train", "val_seen", "val_unseen"]
    for split in got:
        assert_same_records(got[split], [rr.check_record(r, "x") for r in expected[split]])
    assert got["val_unseen"][0]["scan"] == cfg.synthetic_unseen_scans[0]
    # the language filter applies to synthetic records too
    hi = rb.RxrConfig(name="synthetic_hi", languages=("hi",))
    build(tmp_path / "data", hi, conn)
    got = rb.load_rxr(str(tmp_path / "data"), hi)
    assert {r["language"] for v in got.values() for r in v} == {"hi-IN"}


def test_synthetic_config_checks_the_generated_records(tmp_path, monkeypatch):
    conn = shared_path("matterport", "connectivity")
    monkeypatch.setitem(sys.modules, rb.SYNTHETIC_MODULE, fake_synthetic_module(
        [], bad={"step_words": np.zeros((2, 0), bool)}))
    with pytest.raises(rr.RecordFormatError, match="ttw_jax.rxr.synthetic split 'train' "
                                                   "record 1: fields 'step_words' and "
                                                   "'step_views' must both"):
        build(tmp_path / "data", "synthetic", conn)
    monkeypatch.setitem(sys.modules, rb.SYNTHETIC_MODULE, fake_synthetic_module(
        [], bad={"instruction_id": 0}))
    with pytest.raises(rr.RecordFormatError, match="two records have key '0_synthetic'"):
        build(tmp_path / "data", "synthetic", conn)
    other = tmp_path / "other"
    other.mkdir()
    (other / "17DRP5sb8fy_connectivity.json").write_text("[]")
    with pytest.raises(FileNotFoundError, match="759xd9YjKW5_connectivity.json"):
        build(tmp_path / "data", "synthetic", other)


def test_synthetic_config_with_the_real_generator(tmp_path):
    pytest.importorskip(rb.SYNTHETIC_MODULE)
    conn = shared_path("matterport", "connectivity")
    cfg = rb.RxrConfig(name="synthetic_small", synthetic_train_scans=("17DRP5sb8fy",),
                       synthetic_unseen_scans=("8194nk5LbLH",),
                       synthetic_sizes=(("train", 12, 0), ("val_seen", 4, 1),
                                        ("val_unseen", 4, 2)))
    got = rxr_data.load_split_records(cfg, ["train", "val_seen", "val_unseen"],
                                      tfds_dir=str(tmp_path), manual_dir=conn)
    assert {s: len(v) for s, v in got.items()} == {"train": 12, "val_seen": 4, "val_unseen": 4}
    graph, nodes, _ = load_matterport_graph(conn, ["17DRP5sb8fy", "8194nk5LbLH"])
    nb = np.asarray(graph.neighbors)
    for split, recs in got.items():
        assert {r["scan"] for r in recs} == {"8194nk5LbLH" if split == "val_unseen"
                                             else "17DRP5sb8fy"}
        for r in recs:
            assert r["annotator"] == "synthetic" and r["language"] in ("en-US", "hi-IN")
            ids = nodes.lookup([f"{r['scan']}/{v}" for v in r["path"]])
            assert all(b in nb[a] for a, b in zip(ids[:-1], ids[1:]))


def test_rxr_data_prepares_once_and_names_bad_requests(tmp_path, rxr_manual):
    manual, _ = rxr_manual
    data = str(tmp_path / "data")
    got = rxr_data.load_split_records("guide_hi", ["val_seen"], tfds_dir=data,
                                      manual_dir=str(manual))
    assert list(got) == ["val_seen"] and [r["instruction_id"] for r in got["val_seen"]] == [31]
    # prepared: the manual files are not read again
    os.rename(manual, tmp_path / "gone")
    again = rxr_data.load_split_records("guide_hi", ["train", "val_seen"], tfds_dir=data)
    assert [r["instruction_id"] for r in again["train"]] == [9]
    with pytest.raises(ValueError, match=r"unknown rxr config 'rxr_fr'; choose from"):
        rxr_data.load_split_records("rxr_fr", ["train"], tfds_dir=data)
    with pytest.raises(ValueError, match=r"rxr/guide_hi has no split\(s\) \['val_unseen'\]; "
                                         r"it has \['train', 'val_seen'\]"):
        rxr_data.load_split_records("guide_hi", ["val_unseen"], tfds_dir=data)
