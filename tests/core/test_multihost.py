"""Multi-host training with real processes: two `jax.distributed` processes on localhost (2 fake
CPU devices each, gloo collectives), launched with BUILD.md's commands (`MULTIHOST_COMMAND`, which
BUILD.md quotes), against one process with 4 devices: results identical, process 0 alone
reporting, checkpoints written once, and an exact resume after one process is killed with
SIGKILL; and a fresh TFDS dir prepared once by process 0 while process 1 waits."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT

# BUILD.md, "Multi-host": the command each of the N processes runs (localhost here).
MULTIHOST_COMMAND = ("python -m experiments.{experiment}.main --multihost "
                     "--coordinator_address={address} --num_processes={n} --process_id={i} "
                     "--workdir={workdir}")

EMERGENT = ["--config.T=1", "--config.model.features=16", "--config.batch_size=16",
            "--config.num_steps=20", "--config.eval_every=10", "--config.log_every=5",
            "--config.full_task.repeats=1", "--config.full_task.max_steps=20",
            "--config.write_plots=False"]
SDR = ["--config.model.channels=8", "--config.model.mlp_hidden=8", "--config.model.hidden=8",
       "--config.model.embed_dim=16", "--config.batch_size=16", "--config.num_steps=4",
       "--config.eval_every=4", "--config.log_every=4", "--config.data.eval_splits=test",
       "--config.write_plots=False"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def env(devices: int) -> dict:
    # XLA's optimisations off in every run (compilation dominates these tiny runs): the same
    # programs in one process and in two
    return {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
            "JAX_PLATFORMS": "cpu", "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo",
            "JAX_DISABLE_MOST_OPTIMIZATIONS": "1"}


def single(experiment: str, workdir, flags, log):
    """One process with 4 devices; the workdir as a file:// URI. (This module's 4 tests, alone
    on 2 cores: 105 s with 2 processes of 4 devices against one of 8, 76 s with 2 and 4.)"""
    return subprocess.Popen([sys.executable, "-m", f"experiments.{experiment}.main",
                             f"--workdir=file://{workdir}", *flags], cwd=ROOT, env=env(4),
                            stdout=log, stderr=subprocess.STDOUT, text=True)


def multihost(experiment: str, workdir, flags, logs) -> list[subprocess.Popen]:
    """BUILD.md's command on 2 local processes with 2 devices each."""
    address = f"localhost:{free_port()}"
    return [subprocess.Popen(
        MULTIHOST_COMMAND.format(experiment=experiment, address=address, n=2, i=i,
                                 workdir=workdir).replace("python", sys.executable, 1).split()
        + flags, cwd=ROOT, env=env(2), stdout=log, stderr=subprocess.STDOUT, text=True)
        for i, log in enumerate(logs)]


def wait_all(procs, logs, timeout=600):
    for p in procs:
        assert p.wait(timeout=timeout) == 0, [open(f.name).read()[-3000:] for f in logs]


def logs_in(tmp_path, *names):
    return [open(tmp_path / f"{n}.log", "w") for n in names]


def test_build_md_quotes_the_tested_command():
    text = open(os.path.join(ROOT, "BUILD.md"), encoding="utf-8").read()
    assert MULTIHOST_COMMAND.format(experiment="ttw_emergent", address="localhost:12345", n=2,
                                    i=0, workdir="/tmp/ttw_2proc") in text
    assert MULTIHOST_COMMAND.format(experiment="ttw_emergent", address="localhost:12345", n=2,
                                    i=1, workdir="/tmp/ttw_2proc") in text


@pytest.mark.slow
def test_two_processes_killed_and_resumed_match_one_process(tmp_path):
    """Process 1 is SIGKILLed once the step-10 checkpoint exists; the restarted pair resumes
    from it and ends with the uninterrupted single-process numbers."""
    one_log, = logs_in(tmp_path, "single")
    one = single("ttw_emergent", tmp_path / "single", EMERGENT, one_log)
    logs = logs_in(tmp_path, "p0", "p1")
    procs = multihost("ttw_emergent", tmp_path / "multi", EMERGENT, logs)
    ckpt = tmp_path / "multi" / "checkpoints"
    deadline = time.time() + 600
    while not (ckpt / "10").is_dir():
        assert time.time() < deadline and all(p.poll() is None for p in procs), \
            [open(f.name).read()[-3000:] for f in logs]
        time.sleep(0.2)
    procs[1].send_signal(signal.SIGKILL)
    procs[0].send_signal(signal.SIGKILL)   # the job is restarted as a whole, as a scheduler does
    for p in procs:
        p.wait(timeout=60)
    assert not (ckpt / "20").exists()
    logs = logs_in(tmp_path, "r0", "r1")
    wait_all(multihost("ttw_emergent", tmp_path / "multi", EMERGENT, logs) + [one], logs)
    multi = json.loads((tmp_path / "multi" / "results.json").read_text())
    ref = json.loads((tmp_path / "single" / "results.json").read_text())
    for split in ("train", "valid", "test"):
        assert multi[split] == ref[split]
    assert multi["best_step"] == ref["best_step"]
    out = [(tmp_path / f"r{i}.log").read_text() for i in range(2)]
    assert "Resumed from step 10" in out[0]
    # Process 0 alone reports; the checkpoints are written jointly, once.
    assert "split   accuracy" in out[0] and "split   accuracy" not in out[1]
    assert sorted(os.listdir(ckpt)) == ["10", "20"]
    steps = [json.loads(line)["step"]
             for line in (tmp_path / "multi" / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)) and steps[-1] == 20


@pytest.mark.slow
def test_two_processes_prepare_a_fresh_tfds_dir_once(tmp_path):
    """Touchdown SDR (synthetic TFDS data): both processes share a fresh data dir, which
    process 0 builds while process 1 waits; the run ends with process 0's results and one set
    of checkpoints. (Two processes equal to one: the test above.)"""
    logs = logs_in(tmp_path, "p0", "p1")
    procs = multihost("touchdown_sdr", tmp_path / "multi",
                      SDR + [f"--config.data.tfds_dir={tmp_path / 'tfds_shared'}"], logs)
    wait_all(procs, logs)
    multi = json.loads((tmp_path / "multi" / "results.json").read_text())
    assert multi["best_step"] == 4 and multi["test"]["examples"] > 0
    built = [d for d in os.listdir(tmp_path / "tfds_shared") if not d.startswith(".")]
    assert built and not any(d.startswith("incomplete") for d in built)
    out = [(tmp_path / f"p{i}.log").read_text() for i in range(2)]
    assert "Generating" in out[0] and "Generating" not in out[1]
    assert sorted(os.listdir(tmp_path / "multi" / "checkpoints")) == ["4"]


def test_a_partial_multihost_setting_is_refused_by_name(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    out = subprocess.run([sys.executable, "-m", "experiments.ttw_emergent.main", "--multihost",
                          f"--workdir={tmp_path}", "--coordinator_address=localhost:1"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "missing: --num_processes / JAX_NUM_PROCESSES" in out.stderr
