"""TF-free tests of the `touchdown` TFDS builder (build to ArrayRecord, read with data_source)."""
import importlib.util
import inspect
import json
import os
import sys

import numpy as np
import pytest
import tensorflow_datasets as tfds

from tests.conftest import ROOT, shared_path
from ttw_jax.data import touchdown_records as tr
from ttw_jax.graphs.touchdown import synthetic_street_grid


def _import_builder_module():
    """`ttw_datasets.touchdown.touchdown_dataset_builder` if installed, else the file by path
    (registered once per session under a top-level name, which TFDS maps to `touchdown`)."""
    try:
        from ttw_datasets.touchdown import touchdown_dataset_builder
        return touchdown_dataset_builder
    except ModuleNotFoundError:
        pass
    name = "touchdown_dataset_builder"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(ROOT, "datasets", "touchdown", "touchdown_dataset_builder.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


td = _import_builder_module()


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
    build(tmp_path, "synthetic_sdr")
    got = td.load_sdr(str(tmp_path))
    # Synthetic routes show Touchdown in all three views.
    assert {s: len(v) for s, v in got.items()} == {"train": 6000, "dev": 600, "test": 600}
    first = got["dev"][:3]
    assert [e["which"] for e in first] == ["main", "pre", "post"]
    assert {e["route_id"] for e in first} == {2000}
    assert all(0 <= e["center_x"] <= 1 and 0 <= e["center_y"] <= 1 for e in got["test"])


def test_navigation_from_the_manual_sample(tmp_path, manual_sample_dir):
    manual, raw = manual_sample_dir
    build(tmp_path / "data", "navigation", manual)
    got = td.load_navigation(str(tmp_path / "data"), "navigation")
    assert list(got) == ["dev_sample"]
    assert_same_navigation(got["dev_sample"], [tr.navigation_example(r) for r in raw])


def test_sdr_from_the_manual_sample(tmp_path, manual_sample_dir):
    manual, raw = manual_sample_dir
    build(tmp_path / "data", "sdr", manual)
    got = td.load_sdr(str(tmp_path / "data"), "sdr")
    visible = sum(json.loads(r[f"{v}_static_center"]) != {"x": -1, "y": -1}
                  for r in raw for v in ("main", "pre", "post"))
    assert list(got) == ["dev_sample"] and len(got["dev_sample"]) == visible
    expected = sorted((e for r in raw for e in tr.sdr_examples(r)),
                      key=lambda e: (e["route_id"], ("main", "pre", "post").index(e["which"])))
    for g, e in zip(got["dev_sample"], expected):
        assert (g["route_id"], g["which"], g["panoid"], g["td_location_text"]) == (
            e["route_id"], e["which"], e["panoid"], e["td_location_text"])
        np.testing.assert_array_equal([g["heading"], g["center_x"], g["center_y"]],
                                      np.float32([e["heading"], e["center_x"], e["center_y"]]))


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
