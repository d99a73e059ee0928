"""Runs on a real object store (`tests/gcs_emulator.py`: fake-gcs-server, the real `gcsfs`, orbax's
TensorStore `gcs` driver), where `test_remote_workdir.py` has a local-disk fake: renames that are a
copy and a delete, objects that cannot be appended to, a launcher with its workdir, `tfds_dir` and
release folder on the bucket, a run killed after a checkpoint and resumed there, and two
processes sharing one bucket workdir."""
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import warnings

import fsspec
import numpy as np
import pytest

from tests.conftest import ROOT
from tests.core.test_multihost import free_port
from tests.gcs_emulator import gcs_bucket, gcs_server  # noqa: F401 (fixtures)
from ttw_datasets.touchdown import touchdown_dataset_builder as td_builder
from ttw_jax.core import paths
from ttw_jax.core.train.checkpoint import Checkpointer
from ttw_jax.core.train.logging import MetricWriter
from ttw_jax.touchdown.graph import write_graph_files


def objects(url: str) -> list[str]:
    """The names of the objects under `url` (`gs://bucket/prefix`), relative to it."""
    root = url.removeprefix("gs://").rstrip("/")
    fs = fsspec.filesystem("gs")
    fs.invalidate_cache()
    return sorted(name[len(root) + 1:] for name in fs.find(root))


def test_renames_copy_then_delete_and_nothing_appends(gcs_bucket, tmp_path, monkeypatch):
    """What a bucket does differently from a disk, met through the library's own writers:
    `paths.write_text` is one upload (no temporary object beside it); a rename leaves one object
    under the new name (gcsfs copies, then deletes), a folder's objects each, and a folder exists
    only while an object lies below it; append mode is not supported (gcsfs overwrites, with a
    warning), so a remote run's history is rewritten whole (`MetricWriter`) and loses no line
    across flushes, and its local staging folder goes, also when a run drops the writer."""
    (tmp_path / "cwd").mkdir()
    (tmp_path / "tmp").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    paths.write_text(f"{gcs_bucket}/a/x.json", "{}")
    paths.write_bytes(f"{gcs_bucket}/a/y.bin", b"\0\1")
    assert objects(gcs_bucket) == ["a/x.json", "a/y.bin"]
    paths.resolve(f"{gcs_bucket}/a/x.json").rename(paths.resolve(f"{gcs_bucket}/a/z.json"))
    paths.resolve(f"{gcs_bucket}/a").rename(paths.resolve(f"{gcs_bucket}/c"))
    assert objects(gcs_bucket) == ["c/y.bin", "c/z.json"]
    assert paths.resolve(f"{gcs_bucket}/c/z.json").read_text() == "{}"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        paths.resolve(f"{gcs_bucket}/c/z.json").rename(paths.resolve(f"{gcs_bucket}/new/z.json"))
    fs = fsspec.filesystem("gs")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with fs.open(f"{gcs_bucket}/c/z.json", "a") as f:
            f.write("more")
    assert fs.cat(f"{gcs_bucket}/c/z.json") == b"more"     # replaced, not appended
    assert any("Append mode" in str(w.message) for w in caught)

    writer = MetricWriter(f"{gcs_bucket}/run")
    writer.write(1, {"train/loss": 2.0})
    writer.flush()
    writer.write(2, {"train/loss": 1.0})
    writer.flush()
    writer.write(3, {"train/loss": 0.5})
    writer.close()
    history = paths.resolve(f"{gcs_bucket}/run/metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in history] == [1, 2, 3]
    assert [o for o in objects(f"{gcs_bucket}/run") if not o.startswith("tensorboard/")] \
        == ["metrics.jsonl"]
    assert len(objects(f"{gcs_bucket}/run/tensorboard")) == 3   # one event file per session
    dropped = MetricWriter(f"{gcs_bucket}/dropped")     # as a run that raised leaves it
    dropped.write(1, {"train/loss": 2.0})
    assert len(os.listdir(tmp_path / "tmp")) == 1
    del dropped
    gc.collect()
    assert os.listdir(tmp_path / "tmp") == [] and os.listdir(tmp_path / "cwd") == []


def test_checkpoints_go_through_tensorstore_to_the_bucket(gcs_bucket, tmp_path, monkeypatch):
    """orbax writes a step's arrays with TensorStore's `gcs` kvstore and its metadata with
    gcsfs, marks it committed with an object (no folder rename on a bucket), keeps
    `max_to_keep` steps and restores the newest; a step whose commit marker is missing (a
    kill mid-write) is not a step."""
    monkeypatch.chdir(tmp_path)
    directory = f"{gcs_bucket}/run/checkpoints"
    tree = {"state": {"w": np.arange(4.0, dtype=np.float32)},
            "best_params": {"w": np.ones(3, np.float32)}}
    ckpt = Checkpointer(directory, max_to_keep=2)
    for step in (1, 2, 3):
        ckpt.save(step, {"state": {"w": tree["state"]["w"] + step},
                         "best_params": tree["best_params"]}, {"step": step})
    ckpt.close()
    names = objects(directory)
    assert sorted({n.split("/")[0] for n in names}) == ["2", "3"]
    assert "3/commit_success.txt" in names
    assert any(n.startswith("3/train/ocdbt.process_0/d/") for n in names)   # TensorStore's
    fsspec.filesystem("gs").rm(f"{directory.removeprefix('gs://')}/3/commit_success.txt")
    again = Checkpointer(directory, read_only=True)
    restored, meta = again.restore_latest(tree)
    again.close()
    assert meta["step"] == 2
    np.testing.assert_array_equal(restored["state"]["w"], tree["state"]["w"] + 2)
    assert os.listdir(tmp_path) == []


def write_nav_release(url: str, local) -> None:
    """A Touchdown navigation release in the official layout (`{train,dev,test}.json` of
    synthetic routes, 32 / 8 / 8, and their grid as `graph/nodes.txt`, `graph/links.txt`),
    written by the builder's synthetic generator and uploaded to `url`."""
    cfg = td_builder.Builder.builder_configs["synthetic_navigation"]
    records = td_builder.synthetic_split_records(cfg)
    local.mkdir()
    for split, n in (("train", 32), ("dev", 8), ("test", 8)):
        (local / f"{split}.json").write_text("".join(json.dumps(r) + "\n"
                                                     for r in records[split][:n]))
    write_graph_files(str(local / "graph"), *cfg.grid())
    fsspec.filesystem("gs").put(f"{local}/", url.removeprefix("gs://") + "/", recursive=True)


def nav_flags(bucket: str, workdir: str) -> list[str]:
    """The Touchdown navigation launcher's flags for a 4-step run (checkpoints at 2 and 4) with
    the workdir, the release and `tfds_dir` on the bucket."""
    return [f"--workdir={workdir}", "--config.data.tfds_config=navigation",
            f"--config.data.manual_dir={bucket}/release",
            f"--config.data.graph_dir={bucket}/release/graph",
            f"--config.data.tfds_dir={bucket}/tfds", "--config.data.max_tokens=0",
            "--config.data.allow_synthetic_perception=True", "--config.data.eval_splits=test",
            "--config.num_steps=4", "--config.eval_every=2", "--config.log_every=1",
            "--config.batch_size=8", "--config.train_horizon=8", "--config.eval.horizon=4",
            "--config.model.text_hidden=16", "--config.model.hidden=16",
            "--config.model.conv_features=8", "--config.eval.baselines=",
            "--config.eval.num_figures=1", "--config.num_devices=1"]


def start(args: list[str], cwd, tmp, script: str | None = None, **env) -> subprocess.Popen:
    """The navigation launcher (or `script`, run with `-c`) in a subprocess, with `cwd` and
    `tmp` (its TMPDIR) as its working and temporary folders, XLA's optimisations off (tiny runs:
    compilation dominates) and `env` added; the emulator's variables inherited."""
    os.makedirs(cwd, exist_ok=True)
    os.makedirs(tmp, exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp), "JAX_PLATFORMS": "cpu",
           "JAX_DISABLE_MOST_OPTIMIZATIONS": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p),
           **env}
    command = ["-c", script] if script else ["-m", "experiments.touchdown_nav.main"]
    return subprocess.Popen([sys.executable, *command, *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def launch(args: list[str], cwd, tmp, script: str | None = None) -> subprocess.CompletedProcess:
    """`start`, waited for (its output in `stdout`)."""
    process = start(args, cwd, tmp, script)
    out, _ = process.communicate(timeout=300)
    return subprocess.CompletedProcess(process.args, process.returncode, out, "")


def leftovers(folder) -> list[str]:
    """What a run left in `folder` (its working or temporary folder), less the empty folders
    TFDS makes for every builder of a dataset not yet prepared and never removes
    (`DatasetInfo.initialize_from_bucket`'s `mkdtemp("tfds")`)."""
    return sorted(n for n in os.listdir(folder)
                  if not (n.endswith("tfds") and not os.listdir(os.path.join(folder, n))))


@pytest.fixture(scope="module")
def nav_run(gcs_server, tmp_path_factory):
    """(bucket, results) of one uninterrupted launcher run (`nav_flags`, workdir
    `<bucket>/run`) on a bucket of the module, its release written there first; the run's working
    and temporary folders are checked to be left empty."""
    tmp = tmp_path_factory.mktemp("nav_run")
    bucket = f"gs://nav-run-{os.getpid()}"
    fsspec.filesystem("gs").mkdir(bucket.removeprefix("gs://"))
    write_nav_release(f"{bucket}/release", tmp / "release")
    out = launch(nav_flags(bucket, f"{bucket}/run"), tmp / "cwd", tmp / "tmp")
    assert out.returncode == 0, out.stdout[-4000:]
    assert os.listdir(tmp / "cwd") == [] and leftovers(tmp / "tmp") == [], \
        (os.listdir(tmp / "cwd"), os.listdir(tmp / "tmp"))
    return bucket, json.loads(paths.resolve(f"{bucket}/run/results.json").read_text())


@pytest.mark.slow
def test_a_launcher_runs_end_to_end_on_the_bucket(nav_run):
    """`python -m experiments.touchdown_nav.main` with its workdir, `data.tfds_dir` and release
    folder on the bucket: the dataset is built from the release there and uploaded, the run
    finishes, its results, history, event files, figures and checkpoints are objects in the
    bucket, and nothing is left in its working or temporary folder (`nav_run`)."""
    bucket, results = nav_run
    run = objects(f"{bucket}/run")
    for name in ("results.json", "config.json", "metrics.jsonl", "vocab.json",
                 "trajectories.png"):
        assert name in run, run
    assert sorted({n.split("/")[1] for n in run if n.startswith("checkpoints/")}) == ["2", "4"]
    assert "checkpoints/4/commit_success.txt" in run
    assert any(n.startswith("tensorboard/") for n in run)
    steps = [json.loads(line)["step"] for line in
             paths.resolve(f"{bucket}/run/metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
    built = objects(f"{bucket}/tfds")
    assert "touchdown/navigation/1.0.0/dataset_info.json" in built
    assert "touchdown/navigation/1.0.0/ttw_sources.json" in built
    assert any(".array_record-" in n for n in built) and not any("incomplete" in n for n in built)
    assert results["best_step"] in (2, 4) and results["test"]
    assert results["provenance"]["data"]["folder"] == f"{bucket}/release"
    assert not os.path.exists(os.path.join(ROOT, "gs:"))


# The launcher, killed (SIGKILL: no handler, no clean-up runs) right after training step 3, once
# the checkpoint of step 2 is in the bucket.
KILLED_AFTER_STEP_3 = """
import os, signal
from experiments.touchdown_nav import train
from experiments.touchdown_nav.configs import default
from ttw_jax.core.train.launch import launch

def killed_after_step_3(config, workdir):
    def hook(step):
        if step == 3:
            os.kill(os.getpid(), signal.SIGKILL)
    return train.train_and_evaluate(config, workdir, hooks=[hook])

launch(killed_after_step_3, default)
"""


@pytest.mark.slow
def test_a_run_killed_after_a_checkpoint_resumes_on_the_bucket(nav_run, gcs_bucket, tmp_path):
    """The same launch into a fresh bucket (the release and the prepared dataset read from the
    first), killed after step 3: the bucket holds the complete checkpoint of step 2 and the
    history up to it; the same command then resumes from it and ends with the uninterrupted
    run's results."""
    data, expected = nav_run
    workdir = f"{gcs_bucket}/run"
    killed = launch(nav_flags(data, workdir), tmp_path / "cwd", tmp_path / "tmp1",
                    script=KILLED_AFTER_STEP_3)
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-4000:]
    assert sorted({n.split("/")[0] for n in objects(f"{workdir}/checkpoints")}) == ["2"]
    assert "2/commit_success.txt" in objects(f"{workdir}/checkpoints")
    steps = [json.loads(line)["step"] for line in
             paths.resolve(f"{workdir}/metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2]
    resumed = launch(nav_flags(data, workdir), tmp_path / "cwd", tmp_path / "tmp2")
    assert resumed.returncode == 0, resumed.stdout[-4000:]
    assert "Resumed from step 2" in resumed.stdout
    results = json.loads(paths.resolve(f"{workdir}/results.json").read_text())
    assert {k: v for k, v in results.items() if k != "provenance"} == \
        {k: v for k, v in expected.items() if k != "provenance"}
    assert results["provenance"] == expected["provenance"]
    steps = [json.loads(line)["step"] for line in
             paths.resolve(f"{workdir}/metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
    assert os.listdir(tmp_path / "cwd") == [] and leftovers(tmp_path / "tmp2") == []


def two_process_worker() -> None:
    """One of the two processes of `test_two_processes_share_one_bucket_workdir` (argv:
    coordinator address, process id, bucket): `jax.distributed` over gloo, then what the library
    does in a multi-host run on `<bucket>`: the navigation dataset prepared into `<bucket>/tfds`
    (by process 0, process 1 waiting), three checkpoints saved jointly into `<bucket>/run`, the
    newest restored, a history written; prints what it read as one JSON line."""
    import jax
    from ttw_jax.core import tfds as ttw_tfds
    from ttw_jax.touchdown.dataset import prepare
    address, process_id, bucket = sys.argv[1:4]
    jax.distributed.initialize(address, num_processes=2, process_id=int(process_id))
    prepare("navigation", f"{bucket}/tfds", f"{bucket}/release")
    sizes = {split: len(source) for split, source in ttw_tfds.prepared_sources(
        "touchdown", "navigation", f"{bucket}/tfds").items()}
    ckpt = Checkpointer(f"{bucket}/run/checkpoints", max_to_keep=2)
    for step in (1, 2, 3):
        w = np.full(3, step, np.float32)
        ckpt.save(step, {"state": {"w": w}, "best_params": {"w": -w}}, {"step": step})
    ckpt.close()
    restored, meta = Checkpointer(f"{bucket}/run/checkpoints", read_only=True).restore_latest(
        {"state": {"w": np.zeros(3, np.float32)}, "best_params": {"w": np.zeros(3, np.float32)}})
    writer = MetricWriter(f"{bucket}/run")
    for step in (1, 2, 3):
        writer.write(step, {"train/loss": 1.0 / step})
        writer.flush()
    writer.close()
    print("RESULT " + json.dumps({"sizes": sizes, "step": meta["step"],
                                  "w": restored["state"]["w"].tolist()}), flush=True)


@pytest.mark.slow
def test_two_processes_share_one_bucket_workdir(gcs_bucket, tmp_path):
    """Two `jax.distributed` processes on one bucket, as a multi-host run shares it (BUILD.md,
    multi-host): process 0 alone builds the dataset into the shared `tfds_dir` while process 1
    waits, both read it; the checkpoints are written once (no object of process 1's), both
    restore the newest; process 0 alone writes the history; nothing is left locally."""
    write_nav_release(f"{gcs_bucket}/release", tmp_path / "release")
    address = f"localhost:{free_port()}"
    worker = "from tests.core.test_gcs_emulator import two_process_worker; two_process_worker()"
    procs = [start([address, str(i), gcs_bucket], tmp_path / f"cwd{i}", tmp_path / f"tmp{i}",
                   script=worker, XLA_FLAGS="--xla_force_host_platform_device_count=1",
                   JAX_CPU_COLLECTIVES_IMPLEMENTATION="gloo") for i in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[-3000:] for o in outs]
    results = [json.loads(next(line for line in o.splitlines()
                               if line.startswith("RESULT "))[len("RESULT "):]) for o in outs]
    assert results[0] == results[1] and results[0]["step"] == 3 and results[0]["w"] == [3.0] * 3
    assert results[0]["sizes"] == {"train": 32, "dev": 8, "test": 8}
    assert "downloaded and prepared" in outs[0] and "downloaded and prepared" not in outs[1]
    checkpoints = objects(f"{gcs_bucket}/run/checkpoints")
    assert sorted({n.split("/")[0] for n in checkpoints}) == ["2", "3"]
    assert not any("process_1" in n for n in checkpoints), checkpoints
    steps = [json.loads(line)["step"] for line in
             paths.resolve(f"{gcs_bucket}/run/metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
    for i in range(2):
        assert os.listdir(tmp_path / f"cwd{i}") == [] and leftovers(tmp_path / f"tmp{i}") == []
