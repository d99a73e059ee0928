"""TF-free tests of the `touchdown` TFDS builder (build to ArrayRecord, read with data_source)."""
import inspect
import json
import os
import shutil
import zlib

import numpy as np
import pytest
import tensorflow_datasets as tfds

from tests.conftest import shared_path
from ttw_datasets.touchdown import touchdown_dataset_builder as td
from ttw_jax.touchdown import records as tr
from ttw_jax.touchdown.graph import synthetic_street_grid
from ttw_jax.touchdown.sdr.synthetic import synthetic_sdr_examples


def build(data_dir, config, manual_dir=None):
    builder = td.Builder(config=config, data_dir=str(data_dir), file_format="array_record")
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(manual_dir))
        if manual_dir else None)


def f32(x):
    return float(np.float32(x))


def assert_same_navigation(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, sorted(expected, key=lambda e: e["route_id"])):
        assert g.keys() == e.keys()
        assert (g["route_id"], g["navigation_text"], g["route_panoids"]) == (
            e["route_id"], e["navigation_text"], e["route_panoids"])
        assert (g["start_heading"], g["end_heading"]) == (f32(e["start_heading"]),
                                                          f32(e["end_heading"]))


@pytest.fixture
def manual_sample_dir(tmp_path):
    """A manual directory holding the first 40 lines of the shared sample."""
    with open(shared_path("touchdown", "touchdown_unseen_dev_sample.json")) as f:
        lines = [next(f) for _ in range(40)]
    manual = tmp_path / "manual"
    manual.mkdir()
    (manual / "touchdown_unseen_dev_sample.json").write_text("".join(lines))
    return manual, [json.loads(line) for line in lines]


def test_config_grid_defaults_are_the_generators():
    params = inspect.signature(synthetic_street_grid).parameters
    defaults = {k: p.default for k, p in params.items()}
    cfg = td.TouchdownConfig(name="x")
    assert {k: getattr(cfg, "grid_seed" if k == "seed" else k) for k in defaults} == defaults
    assert cfg.synthetic_splits == (("train", 2000, 0), ("dev", 200, 1), ("test", 200, 2))
    assert cfg.synthetic_sdr_splits == (("train", 1000, 0), ("dev", 150, 1), ("test", 150, 2))
    assert cfg.feature_shape == (100, 464, 128) and cfg.synthetic_sdr_shape == (25, 116, 12)
    assert td.Builder.DEFAULT_CONFIG_NAME == "synthetic_navigation"
    assert {c.name for c in td.Builder.BUILDER_CONFIGS} == {
        "synthetic_navigation", "synthetic_sdr", "navigation", "sdr"}


def test_synthetic_navigation_builds_and_loads(tmp_path):
    build(tmp_path, "synthetic_navigation")
    got = td.load_navigation(str(tmp_path))
    assert {s: len(v) for s, v in got.items()} == {"train": 2000, "dev": 200, "test": 200}
    ids = {s: {e["route_id"] for e in v} for s, v in got.items()}
    assert sum(map(len, ids.values())) == 2400   # unique, and disjoint across splits
    nodes, _ = synthetic_street_grid()
    known = {n[0] for n in nodes}
    assert all(p in known for v in got.values() for e in v for p in e["route_panoids"])
    expected = td.synthetic_split_records(td.Builder.builder_configs["synthetic_navigation"])
    for split in got:
        assert_same_navigation(got[split], [tr.navigation_example(r) for r in expected[split]])


def test_synthetic_sdr_builds_and_loads(tmp_path):
    # The default config's shapes and sizes, without building its ~190 MB.
    default = td.Builder(config="synthetic_sdr", data_dir=str(tmp_path))
    assert default.info.features["features"].shape == (25, 116, 12)
    assert td.synthetic_sdr_split_sizes(default.builder_config) == {
        "train": (1000, 0, 0), "dev": (150, 1, 1000), "test": (150, 2, 1150)}
    # A small config of the same kind, built and read back.
    cfg = td.TouchdownConfig(name="synthetic_sdr_small", task="sdr",
                             synthetic_sdr_splits=(("train", 12, 0), ("dev", 4, 1),
                                                   ("test", 5, 2)),
                             synthetic_sdr_shape=(12, 60, 3))
    build(tmp_path, cfg)
    got = td.load_sdr(str(tmp_path), cfg)
    assert list(got) == ["train", "dev", "test"]
    assert [len(set(got[s]["route_id"])) for s in got] == [12, 4, 5]
    assert set(got["dev"]["route_id"]) == {12, 13, 14, 15}     # disjoint route ids
    for split, (num, seed, first) in td.synthetic_sdr_split_sizes(cfg).items():
        expected = synthetic_sdr_examples(num, seed, 12, 60, 3, first_route_id=first)
        g = got[split]
        assert len(g["text"]) == len(expected) == g["features"].shape[0]
        assert g["features"].shape[1:] == (12, 60, 3) and g["features"].dtype == np.float16
        np.testing.assert_array_equal(g["features"], np.stack([e["features"] for e in expected]))
        np.testing.assert_array_equal(g["center"], np.float32(
            [[e["center_x"], e["center_y"]] for e in expected]))
        assert list(g["which"]) == [e["which"] for e in expected]
        assert list(g["panoid"]) == [e["panoid"] for e in expected]
        assert g["text"] == [e["td_location_text"] for e in expected]
        np.testing.assert_array_equal(g["heading"], np.float32([e["heading"] for e in expected]))
    # by name too (read back from the files), one split only
    only = td.load_sdr(str(tmp_path), "synthetic_sdr_small", splits=["test"])
    assert list(only) == ["test"]
    np.testing.assert_array_equal(only["test"]["features"], got["test"]["features"])
    with pytest.raises(ValueError, match=r"no split\(s\) \['validation'\]"):
        td.load_sdr(str(tmp_path), cfg, splits=["validation"])


def panoid_features(panoid, shape):
    """The fake feature map of a panorama: its values tell the panoid apart (exact in float16)."""
    base = zlib.crc32(panoid.encode()) % 1000
    return (base + np.arange(np.prod(shape)).reshape(shape)).astype(np.float16)


def write_features(manual, panoids, shape=(2, 4, 3)):
    """Fake `.npy` feature maps: even ones under features/, odd ones at the top level."""
    (manual / "features").mkdir(exist_ok=True)
    for i, p in enumerate(sorted(panoids)):
        folder = manual / "features" if i % 2 == 0 else manual
        np.save(folder / f"{p}.npy", panoid_features(p, shape))


def visible_views(raw):
    """(route_id, which, panoid) of every view with Touchdown visible, read from the raw JSON."""
    return [(r["route_id"], v, r[f"{v}_pano"]) for r in raw for v in ("main", "pre", "post")
            if json.loads(r[f"{v}_static_center"]) != {"x": -1, "y": -1}]


def small_sdr_config(shape=(2, 4, 3)):
    return td.TouchdownConfig(name="sdr_small", task="sdr", synthetic=False,
                              feature_shape=shape)


def test_navigation_from_the_manual_sample(tmp_path, manual_sample_dir):
    manual, raw = manual_sample_dir
    build(tmp_path / "data", "navigation", manual)
    got = td.load_navigation(str(tmp_path / "data"), "navigation")
    assert list(got) == ["dev_sample"]
    assert_same_navigation(got["dev_sample"], [tr.navigation_example(r) for r in raw])


def test_sdr_from_the_manual_sample(tmp_path, manual_sample_dir):
    manual, raw = manual_sample_dir
    views = visible_views(raw)
    write_features(manual, {p for _, _, p in views})
    build(tmp_path / "data", small_sdr_config(), manual)
    got = td.load_sdr(str(tmp_path / "data"), "sdr_small")
    assert list(got) == ["dev_sample"]
    g = got["dev_sample"]
    assert len(g["text"]) == len(views) == len(g["route_id"]) == len(g["features"])
    expected = sorted((e for r in raw for e in tr.sdr_examples(r)),
                      key=lambda e: (e["route_id"], ("main", "pre", "post").index(e["which"])))
    assert [e["route_id"] for e in expected] == list(g["route_id"])
    assert [e["which"] for e in expected] == list(g["which"])
    assert [e["panoid"] for e in expected] == list(g["panoid"])
    assert [e["td_location_text"] for e in expected] == g["text"]
    np.testing.assert_array_equal(g["heading"], np.float32([e["heading"] for e in expected]))
    np.testing.assert_array_equal(g["center"], np.float32(
        [[e["center_x"], e["center_y"]] for e in expected]))
    np.testing.assert_array_equal(g["features"], np.stack(
        [panoid_features(e["panoid"], (2, 4, 3)) for e in expected]))
    assert (g["route_id"].dtype, g["center"].dtype, g["heading"].dtype, g["features"].dtype) == (
        np.int64, np.float32, np.float32, np.float16)


@pytest.mark.slow
def test_sdr_acceptance_on_the_800_shared_records(tmp_path):
    """The whole shared sample with (2, 4, 3) feature maps: 2,237 visible views."""
    manual = tmp_path / "manual"
    manual.mkdir()
    src = shared_path("touchdown", "touchdown_unseen_dev_sample.json")
    shutil.copy(src, manual / "touchdown_unseen_dev_sample.json")
    with open(src) as f:
        raw = [json.loads(line) for line in f if line.strip()]
    views = visible_views(raw)
    assert len(raw) == 800 and len(views) == 2237
    panoids = {p for _, _, p in views}
    write_features(manual, panoids)
    # a panorama with files in both places: features/ wins
    both = sorted(panoids)[1]   # odd index: at the top level
    np.save(manual / "features" / f"{both}.npy", -panoid_features(both, (2, 4, 3)))
    build(tmp_path / "data", small_sdr_config(), manual)
    got = td.load_sdr(str(tmp_path / "data"), small_sdr_config())["dev_sample"]
    assert got["features"].shape == (2237, 2, 4, 3)
    assert sorted(zip(got["route_id"].tolist(), got["which"], got["panoid"])) == sorted(views)
    rank = {"main": 0, "pre": 1, "post": 2}
    keys = [(int(r), rank[w]) for r, w in zip(got["route_id"], got["which"])]
    assert keys == sorted(keys)
    rows = {(int(r), w): i for i, (r, w) in enumerate(zip(got["route_id"], got["which"]))}
    by_id = {r["route_id"]: r for r in raw}
    for rid, which, panoid in views[::250] + [v for v in views if v[2] == both][:1]:
        i = rows[rid, which]
        assert got["panoid"][i] == panoid
        sign = -1 if panoid == both else 1
        np.testing.assert_array_equal(got["features"][i], sign * panoid_features(panoid,
                                                                                 (2, 4, 3)))
        c = json.loads(by_id[rid][f"{which}_static_center"])
        np.testing.assert_array_equal(got["center"][i], np.float32([c["x"], c["y"]]))
        assert got["text"][i] == by_id[rid]["td_location_text"]


def test_sdr_missing_feature_files_are_listed(tmp_path, manual_sample_dir):
    manual, raw = manual_sample_dir
    views = visible_views(raw)
    order = list(dict.fromkeys(p for _, _, p in views))   # first appearance
    # the default config (100, 464, 128) with no feature file at all
    with pytest.raises(FileNotFoundError) as e:
        build(tmp_path / "data", "sdr", manual)
    msg = str(e.value)
    assert f"{len(order)} of {len(order)} panorama feature files missing" in msg
    assert ", ".join(order[:5]) + ", ..." in msg and order[5] not in msg
    assert os.path.join(str(manual), "features", "<panoid>.npy") in msg
    assert "(100, 464, 128)" in msg
    # some present: only the others are named
    write_features(manual, order)
    gone = [order[3], order[10], order[-1]]
    for p in gone:
        for path in (manual / "features" / f"{p}.npy", manual / f"{p}.npy"):
            if path.exists():
                path.unlink()
    with pytest.raises(FileNotFoundError, match=f"3 of {len(order)} panorama feature files "
                                                f"missing \\(first: {', '.join(gone)}\\)"):
        build(tmp_path / "data", small_sdr_config(), manual)
    # nothing was written
    assert not td.Builder(config=small_sdr_config(), data_dir=str(tmp_path / "data")
                          ).is_prepared()
    assert not any(files for _, _, files in os.walk(tmp_path / "data" / "touchdown" / "sdr_small"))


def test_sdr_feature_file_of_the_wrong_shape_is_named(tmp_path, manual_sample_dir):
    manual, raw = manual_sample_dir
    panoids = sorted({p for _, _, p in visible_views(raw)})
    write_features(manual, panoids)
    bad = manual / "features" / f"{panoids[4]}.npy"
    np.save(bad, np.zeros((2, 4, 4), np.float16))
    with pytest.raises(ValueError) as e:
        build(tmp_path / "data", small_sdr_config(), manual)
    assert str(bad) in str(e.value) and "(2, 4, 4)" in str(e.value)
    assert "(2, 4, 3)" in str(e.value)
    bad.write_bytes(b"not an npy file")
    with pytest.raises(ValueError, match=f"{bad}: not readable"):
        build(tmp_path / "data", small_sdr_config(), manual)
    np.save(bad, np.zeros((2, 4, 3), np.float16))       # the right header, half the data
    bad.write_bytes(bad.read_bytes()[:-10])
    with pytest.raises(ValueError, match=rf"{bad}: truncated: \d+ bytes, the header announces"):
        build(tmp_path / "data", small_sdr_config(), manual)
    assert not any(files for _, _, files in os.walk(tmp_path / "data" / "touchdown" / "sdr_small"))


def test_manual_configs_name_the_expected_files(tmp_path):
    manual = tmp_path / "manual"
    manual.mkdir()
    # An empty manual directory: TFDS refuses with our instructions, which name the files.
    with pytest.raises(AssertionError, match="train.json"):
        build(tmp_path / "data", "navigation", manual)
    # Something else there, but no record file: the builder names every file it looked for.
    (manual / "README.txt").write_text("not a record file")
    with pytest.raises(FileNotFoundError) as e:
        build(tmp_path / "data", "navigation", manual)
    for name in ("train.json", "dev.json", "test.json", "touchdown_unseen_dev_sample.json",
                 "github.com/lil-lab/touchdown"):
        assert name in str(e.value)
    with pytest.raises(FileNotFoundError, match="not prepared"):
        td.load_navigation(str(tmp_path / "data"), "navigation")


def test_a_malformed_manual_file_names_file_and_line(tmp_path, manual_sample_dir):
    manual, raw = manual_sample_dir
    bad = dict(raw[1], main_static_center="not json")
    path = manual / "dev.json"
    path.write_text("\n".join(json.dumps(r) for r in [raw[0], bad]) + "\n")
    build(tmp_path / "nav", "navigation", manual)   # the navigation fields are fine
    assert {s: len(v) for s, v in td.load_navigation(str(tmp_path / "nav"), "navigation").items()
            } == {"dev": 2, "dev_sample": 40}
    with pytest.raises(tr.RecordFormatError, match=f"{path}:2: field 'main_static_center'"):
        build(tmp_path / "sdr", "sdr", manual)
