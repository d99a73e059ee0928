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


def test_every_launcher_of_the_script_takes_its_flags():
    text = open(SCRIPT, encoding="utf-8").read()
    steps = re.search(r'STEPS="([^"]*)"', text).group(1).split()
    names = re.search(r"for name in ([^;]*);", text).group(1).split()
    dtypes = re.search(r"for dtype in ([^;]*);", text).group(1).split()
    assert dtypes == ["float32", "bfloat16"] and len(names) >= 5
    for name in names:
        config = importlib.import_module(f"experiments.{name}.configs.default").get_config()
        for dtype in dtypes:
            flags = {f.split("=")[0][len("--config."):]: f.split("=", 1)[1] for f in steps}
            flags["dtype"] = dtype
            c = override(config, **{k.replace(".", "__"): type(config[k])(v) if not isinstance(
                config[k], str) else v for k, v in flags.items()})
            check_common(c)          # raises on a bad value
            assert c.dtype == dtype and c.profile_steps == "21,22"


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
