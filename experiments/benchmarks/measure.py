"""Timing, FLOP and table-row helpers shared by the benchmarks (no system imports)."""
from __future__ import annotations

import os
import time

import jax
import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(REPO, "..", "shared", "data")
# Recorded anchors (not run here); see `run_all`'s docstring.
ANCHORS = {"lingunet_official_s": 36.0, "ttw_full_task_official_s": 0.52, "ttw_bound_reference_s": 114.0}


def timeit(fn, *args, repeats: int = 3) -> float:
    """Median seconds of `repeats` calls after one warm-up call."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def xla_flops(jitted, *args) -> float:
    cost = jitted.lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float(cost["flops"])


def matmul_peak(quick: bool) -> float:
    """Best GFLOP/s of square f32 matmuls (1,024-3,072)."""
    f = jax.jit(lambda x, y: x @ y)
    best = 0.0
    for n in (1024, 2048) if quick else (1024, 2048, 3072):
        a = jax.random.normal(jax.random.key(0), (n, n))
        best = max(best, 2 * n ** 3 / timeit(f, a, a, repeats=3 if quick else 5) / 1e9)
    return best


def row(work, ours, reference="", ratio="", peak=""):
    return {"work": work, "ours": ours, "reference": reference, "ratio": ratio, "peak": peak}


def pct(gflops: float, peak: float) -> str:
    return f"{gflops:,.0f} GFLOP/s = {100 * gflops / peak:.0f}%"
