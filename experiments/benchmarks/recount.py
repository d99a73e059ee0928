r"""Recomputes the fraction-of-peak cells of a stored `run_all` run (`--json`) with the traced FLOP
count (`experiments.benchmarks.flops`), for runs whose counts came from their backend's cost
analysis: on a GPU that left out the convolutions XLA hands to cuDNN.

  python -m experiments.benchmarks.recount \
      --results=experiments/benchmarks/results/nvidia_h200.json [--write]

The rows recounted are the dense models' steps at the sizes the stored rows name (the CPU's, as
`run_all` ran them then): the LingUNet train step at the paper's shape (both rows) and the MASC
train step. Their programs are traced here (nothing runs, so any machine does), and the count is
divided by the stored time and the stored peak (the run's measured float32 matmul peak at JAX's
default precision: TF32 on NVIDIA tensor cores). `--write` stores the new cells (the old ones kept
as `peak_backend_count`).
"""
from __future__ import annotations

import json
import re

from absl import app, flags

from experiments.benchmarks.flops import program_flops
from experiments.benchmarks.measure import pct, sig
from experiments.benchmarks.sdr_rows import PAPER, sdr_step
from experiments.benchmarks.ttw_rows import masc_step, ttw_tables


def seconds(cell: str) -> float:
    """Seconds per step from a row's `ours` cell ("0.0327 s/step", "1.24 ms/step")."""
    m = re.match(r"([\d,.]+) (ms|s)/step", cell)
    if m is None:
        raise ValueError(f"no time per step in {cell!r}")
    return float(m.group(1).replace(",", "")) * (1e-3 if m.group(2) == "ms" else 1.0)


def counts() -> dict[tuple[str, int], float]:
    """{(bench, index): traced FLOPs per step} of the recounted rows."""
    lingunet = program_flops(*sdr_step("lingunet", (100, 464, 128), 10, **PAPER))
    masc = program_flops(*masc_step(ttw_tables()[0], 128))
    return {("lingunet", 0): lingunet, ("lingunet", 1): lingunet, ("masc", 0): masc}


def recount(results: dict) -> list[str]:
    """Updates `results["rows"]` in place; returns a line per recounted row."""
    peak = float(results["rows"][0]["ours"].split()[0].replace(",", ""))
    lines = []
    for key, flops in counts().items():
        row = next(r for r in results["rows"] if (r["bench"], r["index"]) == key)
        secs = seconds(row["ours"])
        old = row.get("peak_backend_count", row["peak"])
        row["peak_backend_count"] = old
        row["peak"] = (pct(flops / secs / 1e9, peak)
                       + f" ({sig(flops / 1e9)} GFLOP/step, traced)")
        lines.append(f"{row['work']}: {old} -> {row['peak']}")
    results["recounted"] = ("fraction-of-peak cells of the dense steps recomputed with the traced "
                            "FLOP count (experiments.benchmarks.recount); peak: the run's float32 "
                            "matmul peak at JAX's default precision (TF32 on NVIDIA)")
    return lines


def main(argv):
    del argv
    F = flags.FLAGS
    with open(F.results, encoding="utf-8") as f:
        results = json.load(f)
    for line in recount(results):
        print(line)
    if F.write:
        with open(F.results, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    flags.DEFINE_string("results", None, "A `run_all --json` file.")
    flags.DEFINE_bool("write", False, "Store the recomputed cells in the file.")
    flags.mark_flags_as_required(["results"])
    app.run(main)
