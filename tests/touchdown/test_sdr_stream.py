"""Touchdown SDR streamed from per-panorama feature files (`data.stream`): the synthetic release in
the official layout, each panorama stored once and read when used, and a streaming run killed and
resumed to the numbers of an uninterrupted one (the stream's state is in the checkpoint), reading
its release from a bucket."""
import json
import os
import shutil

import numpy as np
import pytest

from tests.conftest import xla_optimizations
from tests.experiments.contract import crash_after
from tests.experiments.trainers import TRAINERS
from tests.helpers import Crash, bucket  # noqa: F401 (a fixture)
from ttw_datasets.touchdown import touchdown_dataset_builder as td_builder
from ttw_jax.touchdown import records as td_records
from ttw_jax.touchdown.sdr import stream

SHAPE = (10, 56, 8)
SDR = TRAINERS["touchdown_sdr"]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    manual = tmp_path_factory.mktemp("sdr_release")
    counts = stream.write_synthetic_release(str(manual), 100, seed=0, shape=SHAPE)
    return str(manual), counts


def test_the_synthetic_release_reads_as_the_official_one(release):
    manual, counts = release
    assert counts == {"train": 80, "dev": 10, "test": 10}
    records = td_builder.manual_split_records(manual, sdr=True)
    views = {s: [v for r in rs for v in td_records.sdr_examples(r)] for s, rs in records.items()}
    assert {s: len(v) for s, v in views.items()} == counts
    files = td_builder.feature_files(manual, (v["panoid"] for vs in views.values() for v in vs),
                                     SHAPE)
    assert len(files) == 100 and len(os.listdir(os.path.join(manual, "features"))) == 100


def test_views_share_their_panorama_file_and_read_it_when_indexed(tmp_path):
    files = {}
    for p in ("a", "b"):
        files[p] = str(tmp_path / f"{p}.npy")
        np.save(files[p], np.full(SHAPE, ord(p), np.float16))
    view = lambda p, x: {"panoid": p, "center_x": x, "center_y": 0.5, "route_id": 1,
                         "which": "main", "td_location_text": "t"}
    tables, pano_files = stream.view_tables(
        {"train": [view("b", 0.1), view("a", 0.2), view("b", 0.3)]}, files)
    assert pano_files == [files["a"], files["b"]]            # each panorama once
    np.testing.assert_array_equal(tables["train"]["pano"], [1, 0, 1])
    rows = stream.panorama_rows(pano_files, tables["train"]["pano"], SHAPE)
    assert rows.shape == (3, *SHAPE)
    np.testing.assert_array_equal(rows[np.array([2, 1])][:, 0, 0, 0], [ord("b"), ord("a")])
    bad = stream.panorama_rows(pano_files, np.array([0]), (2, 2, 2))
    with pytest.raises(ValueError, match=r"a.npy: shape \(10, 56, 8\), expected \(2, 2, 2\)"):
        bad[0]
    # a NaN or a truncated file is named when its view is read
    x = np.full(SHAPE, 1.0, np.float16)
    x[3, 4, 5] = np.nan
    np.save(files["a"], x)
    with pytest.raises(ValueError, match=r"a.npy: non-finite value nan at index \(3, 4, 5\)"):
        rows[np.array([1])]
    np.save(files["a"], np.ones(SHAPE, np.float16))
    with open(files["a"], "r+b") as f:
        f.truncate(1000)
    with pytest.raises(ValueError, match=r"a.npy: not readable"):
        rows[np.array([1])]


def config(manual, tfds_dir, **overrides):
    return SDR.config(tfds_dir, **{"data__stream": True, "data__manual_dir": manual,
                                   "data__feature_shape": ",".join(map(str, SHAPE)), **overrides})


def test_streaming_needs_the_release_and_a_feature_shape(tmp_path, tfds_dir, release):
    with pytest.raises(ValueError, match="data.stream=True reads the official SDR release"):
        SDR.train.train_and_evaluate(config("", tfds_dir), str(tmp_path / "a"))
    with pytest.raises(ValueError, match="data.feature_shape must be 'H,W,C'"):
        SDR.train.train_and_evaluate(config(release[0], tfds_dir, data__feature_shape="10,56"),
                                     str(tmp_path / "b"))


@pytest.mark.slow
def test_a_killed_streaming_run_resumes_to_the_same_results(tmp_path, tfds_dir, release, bucket):
    """The killed and resumed run reads its release from a (fake) bucket, `gs://rel/sdr`: each
    process reads its rows' feature maps from there, no copy on the host's disk."""
    manual = release[0]
    shutil.copytree(manual, bucket / "rel" / "sdr")
    with xla_optimizations(False):
        expected = SDR.train.train_and_evaluate(config(manual, tfds_dir), str(tmp_path / "one"))
        with pytest.raises(Crash):
            SDR.train.train_and_evaluate(config("gs://rel/sdr", tfds_dir), str(tmp_path / "two"),
                                         hooks=[crash_after(6)])
        meta = tmp_path / "two" / "checkpoints" / "4" / "meta" / "metadata"
        assert json.loads(meta.read_text())["data_state"] == {"next_index": 4}
        resumed = SDR.train.train_and_evaluate(config("gs://rel/sdr", tfds_dir),
                                               str(tmp_path / "two"))
    expected["config"]["data"]["manual_dir"] = "gs://rel/sdr"
    # the provenance names the other folder, but the same files (fingerprints)
    got, want = resumed.pop("provenance"), expected.pop("provenance")
    assert got["data"]["folder"] == "gs://rel/sdr" and want["data"]["folder"] == manual
    for entry in ("data", "perception"):
        assert got[entry]["fingerprint"] == want[entry]["fingerprint"]
    assert resumed == expected
    assert resumed["test"]["examples"] == 10
    assert (tmp_path / "one" / "heatmaps.png").exists()
