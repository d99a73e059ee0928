r"""bfloat16 against float32 for every trainer, on the test suite's small configs
(`tests/experiments/trainers.py`, synthetic data): the first step's training loss (the same
initial parameters and batch in both dtypes) and the run's dev / valid metric at its end.

  python -m experiments.benchmarks.precision_check [--names=ttw_emergent,rxr,...] \
      [--out=/tmp/precision_check] [--trace_only]

Prints one Markdown table; each run's workdir stays under `--out`. `--trace_only` trains nothing:
it traces each trainer's (first stage's) train step with `config.dtype=bfloat16` and reports the
share of its dense FLOPs (`experiments.benchmarks.flops`) done on bfloat16 operands, and the
dtypes its `exp`s (the softmaxes') take.
"""
from __future__ import annotations

import os
import time

from absl import app, flags

from tests.experiments.trainers import TRAINERS
from ttw_jax.core.train.logging import HISTORY, read_history

NAMES = ("ttw_emergent", "touchdown_nav", "touchdown_sdr", "rxr", "arramon", "ttw_language")


def histories(workdir: str):
    """The metric histories of a run's folder and its stage folders, in path order."""
    for root, _, files in sorted(os.walk(workdir)):
        if HISTORY in files:
            yield read_history(root)


def first_loss(workdir: str) -> float | None:
    """train/loss of the first logged step (any stage folder's, the first found)."""
    return next((rec["train/loss"] for history in histories(workdir) for rec in history
                 if "train/loss" in rec), None)


def run(name: str, dtype: str, out: str) -> dict:
    trainer = TRAINERS[name]
    config = trainer.config(os.path.join(out, "tfds"))
    config.dtype, config.log_every = dtype, 1
    workdir = os.path.join(out, f"{name}_{dtype}")
    t = time.perf_counter()
    trainer.train.train_and_evaluate(config, workdir)
    metric = config.get("eval", {}).get("metric", "") or "accuracy"   # language: its stages'
    dev = None
    for history in histories(workdir):   # the run's, or its first stage's: its last evaluation
        for rec in history:
            dev = next((v for k, v in rec.items() if k.endswith("/" + metric)), dev)
        if dev is not None:
            break
    return {"loss1": first_loss(workdir), "metric": metric, "dev": dev,
            "seconds": time.perf_counter() - t}


class _Traced(Exception):
    """Carries the FLOPs and the `exp` operations by dtype out of a trainer, in place of
    training."""


def bf16_share(name: str, out: str, tfds_dir: str | None = None
               ) -> tuple[dict[str, float], dict[str, int]]:
    """({dtype: dense FLOPs}, {dtype: number of `exp` equations}) of trainer `name`'s first
    train step with `dtype=bfloat16`, traced (`Run.fit` replaced: nothing trains)."""
    from unittest import mock

    from experiments.benchmarks.flops import flops_by_dtype, primitive_dtypes
    from ttw_jax.core.train.run import Run

    def traced_fit(run, state, step_fn, *args, **kwargs):
        state = run.replicate(state)
        step = lambda s: step_fn(s, 1)
        raise _Traced(flops_by_dtype(step, state), primitive_dtypes(step, state))
    trainer = TRAINERS[name]
    config = trainer.config(tfds_dir or os.path.join(out, "tfds"))
    config.dtype = "bfloat16"
    with mock.patch.object(Run, "fit", traced_fit):
        try:
            trainer.train.train_and_evaluate(config, os.path.join(out, f"{name}_trace"))
        except _Traced as e:
            return e.args
    raise RuntimeError(f"{name}: no train step reached Run.fit")


def main(argv):
    del argv
    F = flags.FLAGS
    if F.trace_only:
        lines = ["| trainer | dense FLOPs per step | on bfloat16 operands | exp ops by dtype |",
                 "| --- | --- | --- | --- |"]
        for name in F.names.split(","):
            by, exps = bf16_share(name, F.out)
            total = sum(by.values())
            lines.append(f"| {name} | {total / 1e9:.3g} GFLOP | "
                         f"{by.get('bfloat16', 0) / total:.1%} | "
                         f"{', '.join(f'{k} {v}' for k, v in sorted(exps.items()))} |")
            print(lines[-1], flush=True)
        print("\n".join(lines))
        return
    lines = ["| trainer | step-1 loss, float32 | bfloat16 | relative difference | last dev "
             "metric, float32 | bfloat16 |", "| --- | --- | --- | --- | --- | --- |"]
    for name in F.names.split(","):
        a, b = run(name, "float32", F.out), run(name, "bfloat16", F.out)
        rel = (abs(b["loss1"] - a["loss1"]) / abs(a["loss1"])
               if a["loss1"] and b["loss1"] is not None else float("nan"))
        six = lambda x: "" if x is None else f"{x:.6g}"
        fmt = lambda x: "" if x is None else f"{x:.4g}"
        lines.append(f"| {name} | {six(a['loss1'])} | {six(b['loss1'])} | {rel:.1e} | "
                     f"{a['metric']} {fmt(a['dev'])} | {fmt(b['dev'])} |")
        print(lines[-1], flush=True)
    print("\n".join(lines))


if __name__ == "__main__":
    flags.DEFINE_string("names", ",".join(NAMES), "Trainers to compare.")
    flags.DEFINE_string("out", "/tmp/precision_check", "Where the runs are kept.")
    flags.DEFINE_bool("trace_only", False, "Only the share of bfloat16 work per train step.")
    app.run(main)
