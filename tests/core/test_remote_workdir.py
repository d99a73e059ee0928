"""Workdirs that are not local paths: `file://` URIs and a bucket (`gs://`), through `etils.epath`.

The bucket is a fake: fsspec's `gs` / `gcs` protocols served from a local folder (what `etils.epath`
reads and writes), and orbax's TensorStore kvstore for `gs://` paths pointed at the same folder
(what the checkpoints' arrays go through). Everything the trainers write must land in that folder
under the bucket's path, nothing in a local `gs:` folder, and a run killed and resumed there must
give the results of the same run in a local workdir: the emergent trainer's contract test resumes
in the bucket (`TrainerContract.resume_in_bucket`, tests/talk_the_walk/test_emergent_train.py).
"""
import json
import os
from unittest import mock

import fsspec
import pytest

from tests.conftest import ROOT
from tests.helpers import Crash, bucket  # noqa: F401 (a fixture)
from ttw_jax.core import paths


def test_resolve_takes_local_file_uri_and_bucket_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert str(paths.resolve("run")) == str(tmp_path / "run")
    assert str(paths.resolve(f"file://{tmp_path}/run")) == str(tmp_path / "run")
    assert str(paths.resolve("gs://b/run")) == "gs://b/run"
    assert paths.is_local("run") and paths.is_local("file:///x") and not paths.is_local("gs://b")


def test_atomic_writes_to_a_bucket_and_locally(tmp_path, bucket):
    from ttw_jax.core.vocab import Vocabulary
    from ttw_jax.rxr.predictions import read_predictions, write_predictions
    vocab = Vocabulary.build(["go left"])
    vocab.save("gs://b/run/vocab.json")
    assert Vocabulary.load_or_build("gs://b/run/vocab.json", ["other words"]) == vocab
    rows = [{"instruction_id": 3, "path": ["a", "b"]}]
    write_predictions("gs://b/run/p.jsonl", rows, "rxr")
    assert read_predictions("gs://b/run/p.jsonl") == {3: ["a", "b"]}
    assert sorted(os.listdir(bucket / "b" / "run")) == ["p.jsonl", "vocab.json"]
    paths.write_text("gs://b/x/a.json", "{}")
    paths.write_text(tmp_path / "a.json", "[]")
    assert (bucket / "b" / "x" / "a.json").read_text() == "{}"
    assert (tmp_path / "a.json").read_text() == "[]"
    assert sorted(os.listdir(tmp_path)) == ["a.json", "gcs"]   # no temporary file left


def test_manual_files_in_a_bucket_are_fingerprinted(bucket):
    from ttw_jax.core.tfds import source_fingerprint
    (bucket / "b" / "m" / "sub").mkdir(parents=True)
    (bucket / "b" / "m" / "a.txt").write_text("xy")
    (bucket / "b" / "m" / "sub" / "c.txt").write_text("z")
    (bucket / "b" / "m" / ".hidden").write_text("q")
    fp = source_fingerprint("gs://b/m")
    assert sorted(fp) == ["a.txt", "sub/c.txt"]
    assert [fp["a.txt"][0], fp["sub/c.txt"][0]] == [2, 1]


def test_a_bucket_run_killed_just_after_a_checkpoint_keeps_every_metric_line(bucket):
    """The lines up to a checkpoint are copied to the bucket before the checkpoint is written:
    a run killed right after writing it resumes with the uninterrupted run's whole history."""
    from tests.core.test_loop import run
    from ttw_jax.core.train.checkpoint import Checkpointer
    ev = lambda p: {"err": float(abs(p["w"] - 3.0))}
    real_save = Checkpointer.save

    def save_then_die(self, step, train, meta):
        real_save(self, step, train, meta)
        if step == 20:
            raise Crash(step)

    with mock.patch.object(Checkpointer, "save", save_then_die), pytest.raises(Crash):
        run("gs://b/killed", ev, log_every=2)
    stored = [json.loads(line)["step"] for line in
              (bucket / "b" / "killed" / "metrics.jsonl").read_text().splitlines()]
    run("gs://b/killed", ev, log_every=2)
    run("gs://b/whole", ev, log_every=2)
    lines = lambda name: [{k: v for k, v in json.loads(line).items() if "per_second" not in k}
                          for line in (bucket / "b" / name / "metrics.jsonl").read_text()
                          .splitlines()]
    whole = lines("whole")
    # every line up to the checkpoint at 20 was in the bucket when the run died
    assert stored == [h["step"] for h in whole if h["step"] <= 20] and stored[-1] == 20
    assert lines("killed") == whole and len(whole) == 18    # 15 even steps and 5, 15, 25


def test_the_readers_of_each_release_read_a_bucket(bucket):
    """Data folders on a bucket: each system's release files read from `gs://` as from disk
    (records, graphs, maps, feature maps), and `experiments.validate` checks a release there."""
    import shutil
    import numpy as np
    from tests.conftest import shared_path
    from ttw_jax.arramon.records import read_arramon
    from ttw_jax.rxr import graph as rxr_graph, records as rr
    from ttw_jax.talk_the_walk.maps import load_maps
    from ttw_jax.touchdown.graph import read_graph_files
    from ttw_jax.touchdown.sdr.stream import write_synthetic_release
    from experiments.validate import report
    root = bucket / "rel"
    shutil.copytree(shared_path("ttw", "maps"), root / "maps")
    shutil.copy(shared_path("arramon", "val_seen.json"), root / "val_seen.json")
    shutil.copy(shared_path("r2r", "R2R_val_seen.json"), root / "R2R_val_seen.json")
    scans = sorted({r["scan"] for r in rr.read_r2r(str(root / "R2R_val_seen.json"))})[:2]
    (root / "conn").mkdir()
    for s in scans:
        shutil.copy(shared_path("matterport", "connectivity", f"{s}_connectivity.json"),
                    root / "conn")
    assert [m.name for m in load_maps("gs://rel/maps")] == \
        [m.name for m in load_maps(str(root / "maps"))]
    assert read_arramon("gs://rel/val_seen.json") == read_arramon(str(root / "val_seen.json"))
    assert rr.read_r2r("gs://rel/R2R_val_seen.json", bodies=False)[:5] == \
        rr.read_r2r(str(root / "R2R_val_seen.json"), bodies=False)[:5]
    assert rxr_graph.list_scans("gs://rel/conn") == scans
    remote = rxr_graph.load_matterport_graph("gs://rel/conn", scans)
    local = rxr_graph.load_matterport_graph(str(root / "conn"), scans)
    assert remote[1].ids == local[1].ids
    write_synthetic_release(str(root / "sdr"), 8, seed=0, shape=(10, 56, 2))
    text, bad = report("touchdown", "gs://rel/sdr")
    assert bad == 0 and "touchdown: 11 files checked" in text, text
    from ttw_datasets.touchdown import touchdown_dataset_builder as td_builder
    from ttw_jax.touchdown.records import sdr_examples
    records = td_builder.manual_split_records("gs://rel/sdr", sdr=True)
    views = [v["panoid"] for recs in records.values() for r in recs for v in sdr_examples(r)]
    files = td_builder.feature_files("gs://rel/sdr", views, (10, 56, 2))
    assert sorted(files.values()) == sorted(f"gs://rel/sdr/features/{p}.npy" for p in set(views))
    np.save(next((root / "sdr" / "features").iterdir()), np.full((10, 56, 2), np.nan, np.float16))
    text, bad = report("touchdown", "gs://rel/sdr")
    assert bad == 1 and "gs://rel/sdr/features/" in text and "non-finite" in text, text
    nodes_links = read_graph_files(shared_path("touchdown", "graph"))
    (root / "graph").mkdir()
    for f in ("nodes.txt", "links.txt"):
        shutil.copy(shared_path("touchdown", "graph", f), root / "graph" / f)
    assert read_graph_files("gs://rel/graph") == nodes_links
    assert not os.path.exists("gs:") and not os.path.exists(os.path.join(ROOT, "gs:"))


def test_a_bucket_release_is_fingerprinted_from_one_listing(bucket):
    """On a bucket the fingerprint lists the release once (sizes and times come with the names)
    and, while nothing changed, reads no file and asks for no file's metadata."""
    from ttw_jax.core.tfds import source_fingerprint
    folder = bucket / "b" / "rel"
    for i in range(30):
        (folder / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        (folder / f"d{i % 3}" / f"{i}.npy").write_bytes(bytes([i]) * (i + 1))
    first = source_fingerprint("gs://b/rel")
    fs = fsspec.filesystem("gs")
    calls = {"find": 0, "info": 0, "open": 0}

    def counted(name):
        original = getattr(type(fs), name)

        def wrapper(self, *a, **k):
            calls[name] += 1
            return original(self, *a, **k)
        return wrapper

    with mock.patch.object(type(fs), "find", counted("find")), \
            mock.patch.object(type(fs), "info", counted("info")), \
            mock.patch.object(type(fs), "_open", counted("open")):
        again = source_fingerprint("gs://b/rel", previous=first)
    assert again == first and len(first) == 30
    assert calls == {"find": 1, "info": 0, "open": 0}, calls
