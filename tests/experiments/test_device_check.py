"""The prepared accelerator check (`experiments/benchmarks/device_check.sh`): every launcher it
runs takes its flags (no unknown config key, valid values), and `device_summary` reads a run's
folder into the JSON it reports."""
import importlib
import json
import os
import re

from tests.conftest import ROOT
from tests.helpers import override
from ttw_jax.core.train.workdir import check_common

SCRIPT = os.path.join(ROOT, "experiments", "benchmarks", "device_check.sh")


def config_with(config, flags: list[str]):
    """`config` with the command-line flags `--config.<key>=<value>` applied as absl would."""
    values = {}
    for f in flags:
        key, value = f[len("--config."):].split("=", 1)
        like = config[key]
        values[key.replace(".", "__")] = (value == "True" if isinstance(like, bool) else
                                          value if isinstance(like, str) else type(like)(value))
    return override(config, **values)


def test_every_launcher_of_the_script_takes_its_flags():
    text = open(SCRIPT, encoding="utf-8").read()
    steps = re.search(r'STEPS="([^"]*)"', text).group(1).split()
    names = re.search(r"for name in ([^;]*);", text).group(1).split()
    dtypes = re.search(r"for dtype in ([^;]*);", text).group(1).split()
    assert dtypes == ["float32", "bfloat16"] and len(names) >= 5
    for name in names:
        config = importlib.import_module(f"experiments.{name}.configs.default").get_config()
        for dtype in dtypes:
            c = config_with(config, steps + [f"--config.dtype={dtype}"])
            check_common(c)          # raises on a bad value
            assert c.dtype == dtype and c.profile_steps == "21,22"


def test_the_language_pipeline_of_the_script_takes_its_flags():
    """Every stage bounded to the script's steps, and the trainer's own config check passes."""
    from experiments.ttw_language import train
    text = open(SCRIPT, encoding="utf-8").read()
    flags = re.search(r'LANGUAGE="([^"]*)"', text).group(1).split()
    stage_flags = re.search(r'STAGE="([^"]*)"', text).group(1).split()
    stages = re.search(r"for stage in ([^;]*);", text).group(1).split()
    flags += [f"--config.{s}.{kv}" for s in stages for kv in stage_flags]
    config = importlib.import_module("experiments.ttw_language.configs.default").get_config()
    c = config_with(config, flags + ["--config.dtype=bfloat16"])
    check_common(c)
    train.check_config(c)
    assert {stage: c[stage].num_steps for stage in stages} == dict.fromkeys(stages, 30)
    assert c.profile_steps == "21,22" and not c.compare_masc and c.contexts == "1"
    # every stage's `fit` gets the profile window (its trace goes to <stage>/profile)
    assert {train.stage_config(c, c[s]).profile_steps for s in stages} == {"21,22"}


def test_the_summary_reads_a_run_folder(tmp_path):
    from experiments.benchmarks.device_summary import summarize
    (tmp_path / "run_all.json").write_text(json.dumps({"device": "cpu", "rows": [{"work": "x"}]}))
    run = tmp_path / "launchers" / "rxr_bfloat16"
    (run / "profile" / "plugins").mkdir(parents=True)
    (run / "profile" / "plugins" / "h.xplane.pb").write_bytes(b"")
    (run / "metrics.jsonl").write_text(
        json.dumps({"step": 10, "train/steps_per_second": 2.0, "train/data_wait_ms": 1.5}) + "\n"
        + json.dumps({"step": 20, "train/steps_per_second": 4.0, "train/data_wait_ms": 0.5})
        + "\n" + json.dumps({"step": 20, "dev/spl": 0.1}) + "\n")
    (tmp_path / "failures.txt").write_text("arramon float32: exit 124\n")
    out = summarize(str(tmp_path))
    assert out["device"] == "cpu" and out["run_all"] == [{"work": "x"}]
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
