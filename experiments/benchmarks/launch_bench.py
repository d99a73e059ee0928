r"""What the persistent compilation cache saves a launch: each trainer's default config for one
step, launched twice in fresh processes on one new cache folder (the first launch compiles and
fills it, the second finds its programs there).

    python -m experiments.benchmarks.launch_bench --markdown=/tmp/launch.md

Per launch it reports the first train step (the launchers' "First step of this process
(compilation included)" log lines; `touchdown_full` has two, its stages') and the whole launch's
wall time, data preparation and final evaluation included.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from ttw_jax.core.train.loop import FIRST_STEP_LOG

FIRST_STEP = re.compile(re.escape(FIRST_STEP_LOG).replace(re.escape("%.2f"), r"([\d.]+)"))

# (trainer, extra flags); every launch also gets --workdir and --compilation_cache_dir.
TRAINERS = (
    ("ttw_emergent", ["--config.num_steps=1"]),
    ("touchdown_nav", ["--config.num_steps=1"]),
    ("touchdown_sdr", ["--config.num_steps=1"]),
    ("touchdown_full", ["--config.nav.num_steps=1", "--config.sdr.num_steps=1"]),
    ("rxr", ["--config.num_steps=1", "--config.eval_every=1",
             "--config.data.connectivity_dir=../shared/data/matterport/connectivity"]),
    ("arramon", ["--config.num_steps=1"]),
    ("ttw_landmarks", ["--config.num_epochs=1"]),
    ("ttw_language", ["--config.contexts=1", "--config.compare_masc=False",
                      *(f"--config.{stage}.{key}=1"
                        for stage in ("tourist", "guide", "generated", "pg")
                        for key in ("num_steps", "eval_every"))]),
)

F = flags.FLAGS


def launch(name: str, extra: list[str], workdir: str, cache: str) -> tuple[list[float], float]:
    """One launch in a fresh process: (its first-step times in seconds, its wall time)."""
    cmd = [sys.executable, "-m", f"experiments.{name}.main", f"--workdir={workdir}",
           f"--compilation_cache_dir={cache}", *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=F.timeout)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return [float(t) for t in FIRST_STEP.findall(proc.stderr + proc.stdout)], wall


def _steps(times: list[float]) -> str:
    return " + ".join(f"{t:.2f} s" for t in times) or "(no first-step line)"


def main(argv):
    del argv
    wanted = F.names.split(",")
    unknown = set(wanted) - {n for n, _ in TRAINERS}
    if unknown:
        raise app.UsageError(f"unknown trainers {sorted(unknown)}; known: "
                             f"{[n for n, _ in TRAINERS]}")
    rows = ["| trainer (`experiments/<name>/main.py`) | flags | first step, empty cache"
            " | first step, warm cache | whole launch, empty cache | whole launch, warm cache |",
            "| --- | --- | --- | --- | --- | --- |"]
    for name, extra in TRAINERS:
        if name not in wanted:
            continue
        root = tempfile.mkdtemp(prefix=f"launch_bench_{name}_")
        try:
            cache = os.path.join(root, "cache")
            cold = launch(name, extra, os.path.join(root, "cold"), cache)
            warm = launch(name, extra, os.path.join(root, "warm"), cache)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        rows.append(f"| `{name}` | `{' '.join(extra)}` | {_steps(cold[0])} | {_steps(warm[0])}"
                    f" | {cold[1]:.1f} s | {warm[1]:.1f} s |")
        print(rows[-1], flush=True)
    table = "\n".join(rows) + "\n"
    print(table)
    if F.markdown:
        with open(F.markdown, "w", encoding="utf-8") as f:
            f.write(table)


if __name__ == "__main__":   # flags here: tests import FIRST_STEP from this module
    flags.DEFINE_string("names", ",".join(n for n, _ in TRAINERS[:-1]),
                        "Trainers to launch (ttw_language, whose stages' final evaluations take"
                        " minutes, only when named).")
    flags.DEFINE_string("markdown", "", "Also write the table to this file.")
    flags.DEFINE_integer("timeout", 900, "Seconds one launch may take.")
    app.run(main)
