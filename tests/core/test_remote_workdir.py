"""Workdirs that are not local paths: `file://` URIs and a bucket (`gs://`), through `etils.epath`.

The bucket is a fake: fsspec's `gs` / `gcs` protocols served from a local folder (what `etils.epath`
reads and writes), and orbax's TensorStore kvstore for `gs://` paths pointed at the same folder
(what the checkpoints' arrays go through). Everything the trainers write must land in that folder
under the bucket's path, nothing in a local `gs:` folder, and a run killed and resumed there must
give the results of the same run in a local workdir.
"""
import json
import os
from unittest import mock

import fsspec
import pytest
from fsspec.implementations.dirfs import DirFileSystem
from fsspec.implementations.local import LocalFileSystem

from tests.conftest import ROOT, xla_optimizations
from tests.experiments.contract import crash_after
from tests.experiments.trainers import TRAINERS, run_dir
from tests.helpers import Crash
from ttw_jax.core import paths


@pytest.fixture
def bucket(tmp_path):
    """A fake `gs://` served from `tmp_path / "gcs"`; yields that folder."""
    from orbax.checkpoint._src.path import gcs_utils
    root = tmp_path / "gcs"
    root.mkdir()

    class FakeGCS(DirFileSystem):
        protocol = ("gs", "gcs")
        root_marker = ""

        def __init__(self, *args, finalize_on_close=False, **kwargs):
            super().__init__(path=str(root), fs=LocalFileSystem(auto_mkdir=True), **kwargs)

        @classmethod
        def _strip_protocol(cls, path):
            path = fsspec.utils.stringify_path(path)
            for prefix in ("gs://", "gcs://"):
                path = path.removeprefix(prefix)
            return path.rstrip("/")

    def kvstore(path):
        name, rest = gcs_utils.parse_gcs_path(path, add_trailing_slash=False)
        return {"driver": "file", "path": str(root / name / rest)}

    from etils.epath import backend
    from fsspec.registry import _registry
    saved = {p: _registry.get(p) for p in FakeGCS.protocol}
    backend.fsspec_backend._get_filesystem.cache_clear()
    for p in FakeGCS.protocol:
        fsspec.register_implementation(p, FakeGCS, clobber=True)
    try:
        with mock.patch.object(gcs_utils, "get_kvstore_for_gcs", kvstore), \
                mock.patch.object(gcs_utils, "is_hierarchical_namespace_enabled",
                                  lambda path: False):
            yield root
    finally:
        backend.fsspec_backend._get_filesystem.cache_clear()
        for p, cls in saved.items():
            _registry.pop(p, None)
            if cls is not None:
                _registry[p] = cls


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


@pytest.mark.slow
def test_a_run_killed_and_resumed_in_a_bucket_matches_a_local_run(trained, tfds_dir, bucket,
                                                                  tmp_path):
    trainer = TRAINERS["ttw_emergent"]
    _, expected = trained("ttw_emergent")
    workdir = "gs://ttw-runs/exp"
    with xla_optimizations(trainer.xla_optimized):
        with pytest.raises(Crash):
            trainer.train.train_and_evaluate(trainer.config(tfds_dir), workdir,
                                             hooks=[crash_after(trainer.crash_after)])
        local = bucket / "ttw-runs" / "exp"
        assert sorted(os.listdir(os.path.join(run_dir(str(local), trainer), "checkpoints"))) \
            == list(trainer.checkpoints_at_crash)
        resumed = trainer.train.train_and_evaluate(trainer.config(tfds_dir), workdir)
    assert resumed == expected
    for output in trainer.outputs:
        assert (local / output).exists(), output
    assert json.loads((local / "results.json").read_text()) == json.loads(json.dumps(expected))
    assert os.listdir(local / "tensorboard")
    steps = [json.loads(line)["step"] for line in (local / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(steps) and len(steps) == len(set(steps))
    assert not os.path.exists(os.path.join(ROOT, "gs:")) and not os.path.exists("gs:")


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
