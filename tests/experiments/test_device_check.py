"""The prepared accelerator check (`experiments/benchmarks/device_check.py`, run by
`device_check.sh`): every launcher part takes its flags (no unknown config key, valid values,
the inputs its default needs), on a CPU the normal mode stops in seconds with the install line,
missing data is named before anything runs, the CPU smoke mode runs a part of each kind end to
end, and `device_summary` reads a run's folder into the JSON it reports."""
import importlib
import json
import os
import subprocess
import sys
import time

import pytest

from experiments.benchmarks import device_check as dc
from tests.conftest import ROOT, shared_path
from tests.helpers import flag_value, override
from ttw_jax.core.train.workdir import check_common

SCRIPT = os.path.join(ROOT, "experiments", "benchmarks", "device_check.sh")


def config_with(config, flags: list[str]):
    """`config` with the command-line flags `--config.<key>=<value>` applied as absl would."""
    values = {}
    for f in flags:
        key, value = f[len("--config."):].split("=", 1)
        values[key.replace(".", "__")] = flag_value(config[key], value)
    return override(config, **values)


@pytest.mark.parametrize("smoke", [False, True])
def test_every_launcher_part_takes_its_flags(smoke, tmp_path):
    data = os.path.dirname(os.path.dirname(shared_path("matterport", "connectivity")))
    parts = dc.parts(str(tmp_path), data, smoke, dc.DTYPES)
    launchers = [p for p in parts if p.group in ("prepare", "launcher")]
    names = {p.argv[0].split(".")[1] for p in launchers}
    assert names == set(dc.LAUNCHERS) | (set() if smoke else {"ttw_language"})
    # the device rows first (after the data), then the CPU-sized ones, then the launchers
    groups = [p.group for p in parts]
    assert groups == sorted(groups, key=["prepare", "device", "cpu", "launcher"].index)
    for part in launchers:
        name = part.argv[0].split(".")[1]
        config = importlib.import_module(f"experiments.{name}.configs.default").get_config()
        c = config_with(config, [a for a in part.argv if a.startswith("--config.")])
        check_common(c)                               # raises on a bad value
        if name == "ttw_language":
            from experiments.ttw_language import train
            train.check_config(c)
        if name == "rxr":                             # the input its default needs
            assert os.path.isdir(c.data.connectivity_dir), c.data.connectivity_dir
        if part.group == "launcher":
            assert c.dtype in dc.DTYPES and c.profile_steps in ("21,22", "3,4")
    assert all(p.limit_s > 0 for p in parts)


def test_on_a_cpu_it_stops_in_seconds_with_the_install_line(tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    t = time.perf_counter()
    out = subprocess.run(["bash", SCRIPT, str(tmp_path / "out")], capture_output=True,
                         text=True, env=env, check=False)
    assert out.returncode == 2, out.stderr[-2000:]
    assert time.perf_counter() - t < 60
    assert 'pip install -U "jax[cuda12]"' in out.stderr and '"jax[tpu]"' in out.stderr
    assert not (tmp_path / "out").exists()          # nothing ran


def test_missing_data_is_named_before_anything_runs(tmp_path, capsys):
    assert dc.check(str(tmp_path / "out"), str(tmp_path / "no_data"), smoke=True) == 2
    err = capsys.readouterr().err
    assert "touchdown/graph/nodes.txt" in err and "matterport/connectivity" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_smoke_mode_runs_a_device_row_and_a_launcher(tmp_path):
    """`--smoke --parts=...`: one device-row part (the simulators at test size, two subprocess
    benchmarks) and one launcher in bfloat16 with its profile, through the script, then the
    summary with each part's status."""
    data = os.path.dirname(os.path.dirname(shared_path("matterport", "connectivity")))
    out = tmp_path / "out"
    run = subprocess.run(["bash", SCRIPT, str(out), "--smoke", f"--data_dir={data}",
                          "--parts=device_envs,ttw_emergent_bfloat16"],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = json.loads((out / "device_check.json").read_text())
    assert [(p["name"], p["status"]) for p in summary["parts"]] == [
        ("device_envs", "ok"), ("ttw_emergent_bfloat16", "ok")]
    assert summary["smoke"] and summary["backend"] == "cpu"
    rows = [r for r in summary["run_all"] if r["part"] == "device_envs"]
    assert len(rows) == 2 and all(r["ours"].endswith("steps/s") for r in rows)
    launcher = summary["launchers"]["ttw_emergent_bfloat16"]
    assert launcher["steps"] == 4 and launcher["steps_per_second"] > 0 and launcher["profile"]
    assert "\r" not in (out / "logs" / "ttw_emergent_bfloat16.log").read_text()


def test_a_part_past_its_limit_is_reported_as_such(tmp_path, monkeypatch):
    part = dc.Part("sleepy", ["time", "--help"], 0.001, "device")   # any module; killed at once
    status = dc.run_part(part, str(tmp_path), dict(os.environ))
    assert status["status"] == "timeout" and "limit" in status["why"]
    failing = dc.Part("broken", ["experiments.no_such_module"], 60, "device")
    status = dc.run_part(failing, str(tmp_path), dict(os.environ))
    assert status["status"] == "failed" and status["exit"] == 1
    assert "No module named" in status["why"]


def test_the_summary_reads_a_run_folder(tmp_path):
    from experiments.benchmarks.device_summary import summarize
    (tmp_path / "run_all.json").write_text(json.dumps({"device": "cpu", "rows": [{"work": "x"}]}))
    (tmp_path / "rows").mkdir()
    (tmp_path / "rows" / "device_rcm.json").write_text(
        json.dumps({"device": "cpu", "rows": [{"work": "rcm"}]}))
    run = tmp_path / "launchers" / "rxr_bfloat16"
    (run / "profile" / "plugins").mkdir(parents=True)
    (run / "profile" / "plugins" / "h.xplane.pb").write_bytes(b"")
    (run / "metrics.jsonl").write_text(
        json.dumps({"step": 10, "train/steps_per_second": 2.0, "train/data_wait_ms": 1.5}) + "\n"
        + json.dumps({"step": 20, "train/steps_per_second": 4.0, "train/data_wait_ms": 0.5})
        + "\n" + json.dumps({"step": 20, "dev/spl": 0.1}) + "\n")
    (tmp_path / "failures.txt").write_text("arramon float32: exit 124\n")
    out = summarize(str(tmp_path))
    assert out["device"] == "cpu"
    assert out["run_all"] == [{"work": "x"}, {"work": "rcm", "part": "device_rcm"}]
    assert out["launchers"] == {"rxr_bfloat16": {"steps": 20, "steps_per_second": 4.0,
                                                 "data_wait_ms": 0.5, "profile": True}}
    assert out["failures"] == ["arramon float32: exit 124"]
    # a run of stages (the language pipeline): one summary per stage folder
    lang = tmp_path / "launchers" / "ttw_language_float32"
    for stage, rate in (("tourist", 3.0), ("pg_T2", 5.0)):
        (lang / stage).mkdir(parents=True)
        (lang / stage / "metrics.jsonl").write_text(
            json.dumps({"step": 30, "train/steps_per_second": rate}) + "\n")
    (lang / "results.json").write_text("{}")
    stages = summarize(str(tmp_path))["launchers"]["ttw_language_float32"]["stages"]
    assert {k: v["steps_per_second"] for k, v in stages.items()} == {"pg_T2": 5.0, "tourist": 3.0}
