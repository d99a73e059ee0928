"""Collects `device_check`'s results into one JSON object (printed):

  python -m experiments.benchmarks.device_summary --out=/tmp/device_check

{"device", "run_all": the rows of every `run_all` part (OUT/rows/*.json, or an older check's
OUT/run_all.json), "launchers": {"<name>_<dtype>": {"steps_per_second", "data_wait_ms", "steps",
"profile": whether a trace was written}}, "failures": [lines of an older check's failures.txt]};
a run of stages (the language pipeline) has no top-level rate but {"stages": {"<stage>": the
same}}. The steps per second are those of the last logged interval (compilation excluded).
"""
from __future__ import annotations

import json
import os

from absl import app, flags

from ttw_jax.core.train.logging import HISTORY, read_history


def launcher_summary(workdir: str) -> dict:
    """The last training line of `<workdir>/metrics.jsonl` (rate and data wait), and whether
    `<workdir>/profile` holds a trace."""
    lines = read_history(workdir)
    train = [x for x in lines if "train/steps_per_second" in x]
    last = train[-1] if train else {}
    traces = [f for _, _, fs in os.walk(os.path.join(workdir, "profile")) for f in fs
              if f.endswith(".xplane.pb")]
    out = {"steps": last.get("step"), "steps_per_second": last.get("train/steps_per_second"),
           "data_wait_ms": last.get("train/data_wait_ms"), "profile": bool(traces)}
    stages = {name: launcher_summary(os.path.join(workdir, name))
              for name in sorted(os.listdir(workdir)) if not lines
              and os.path.isfile(os.path.join(workdir, name, HISTORY))}
    return {"stages": stages} if stages else out


def summarize(out: str) -> dict:
    result = {"device": None, "run_all": None, "launchers": {}, "failures": []}
    stored_runs = [os.path.join(out, "run_all.json")]
    rows_dir = os.path.join(out, "rows")
    if os.path.isdir(rows_dir):
        stored_runs += [os.path.join(rows_dir, f) for f in sorted(os.listdir(rows_dir))
                        if f.endswith(".json")]
    for path in stored_runs:
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                stored = json.load(f)
            result["device"] = result["device"] or stored.get("device")
            part = os.path.splitext(os.path.basename(path))[0]
            result["run_all"] = (result["run_all"] or []) + [
                dict(r, part=part) if part != "run_all" else r for r in stored.get("rows", [])]
    folder = os.path.join(out, "launchers")
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if os.path.isdir(os.path.join(folder, name)):
            result["launchers"][name] = launcher_summary(os.path.join(folder, name))
    failures = os.path.join(out, "failures.txt")
    if os.path.isfile(failures):
        with open(failures, encoding="utf-8") as f:
            result["failures"] = [x.strip() for x in f if x.strip()]
    return result


def main(argv):
    del argv
    print(json.dumps(summarize(flags.FLAGS.out), indent=1))


if __name__ == "__main__":
    flags.DEFINE_string("out", "/tmp/device_check", "device_check.sh's output folder.")
    app.run(main)
