"""Multi-host training with real processes: two `jax.distributed` processes on localhost (4 fake
CPU devices each, gloo collectives), launched exactly as BUILD.md documents, against one process
with 8 devices."""
import json
import os
import socket
import subprocess
import sys

import pytest

from tests.conftest import ROOT

TINY = ["--config.T=1", "--config.model.features=16", "--config.batch_size=16",
        "--config.num_steps=20", "--config.eval_every=10", "--config.full_task.repeats=1",
        "--config.full_task.max_steps=20", "--config.write_plots=False"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def launch(workdir, devices: int, extra=(), log=None):
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
           "JAX_PLATFORMS": "cpu", "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo"}
    return subprocess.Popen([sys.executable, "-m", "experiments.ttw_emergent.main",
                             f"--workdir={workdir}", *TINY, *extra], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
def test_two_processes_match_one_with_the_same_devices(tmp_path):
    port = free_port()
    logs = [open(tmp_path / f"p{i}.log", "w") for i in range(2)]
    procs = [launch(tmp_path / "multi", 4, ["--multihost", f"--coordinator_address=localhost:{port}",
                                            "--num_processes=2", f"--process_id={i}"], logs[i])
             for i in range(2)]
    single = launch(tmp_path / "single", 8, log=subprocess.DEVNULL)
    for p in procs + [single]:
        assert p.wait(timeout=600) == 0, [open(tmp_path / f"p{i}.log").read()[-3000:]
                                           for i in range(2)]
    multi = json.loads((tmp_path / "multi" / "results.json").read_text())
    one = json.loads((tmp_path / "single" / "results.json").read_text())
    for split in ("train", "valid", "test"):
        assert multi[split] == one[split]
    assert multi["best_step"] == one["best_step"]
    # Process 0 alone reports; the checkpoints are written jointly, once.
    out = [(tmp_path / f"p{i}.log").read_text() for i in range(2)]
    assert "split   accuracy" in out[0] and "split   accuracy" not in out[1]
    assert sorted(os.listdir(tmp_path / "multi" / "checkpoints")) == ["10", "20"]


def test_a_partial_multihost_setting_is_refused_by_name(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    out = subprocess.run([sys.executable, "-m", "experiments.ttw_emergent.main", "--multihost",
                          f"--workdir={tmp_path}", "--coordinator_address=localhost:1"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "missing: --num_processes / JAX_NUM_PROCESSES" in out.stderr
