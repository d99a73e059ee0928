"""Timing, FLOP and table-row helpers shared by the benchmarks (no system imports)."""
from __future__ import annotations

import math
import os
import time

import jax
import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(REPO, "..", "shared", "data")
# Recorded anchors (not run here); see `run_all`'s docstring.
ANCHORS = {"lingunet_official_s": 36.0, "ttw_full_task_official_s": 0.52, "ttw_bound_reference_s": 114.0}


# The CPU features that decide XLA:CPU's float32 and bfloat16 matmul kernels (Linux flag names).
CPU_FEATURES = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx512_fp16")


def cpu_info() -> dict:
    """{model, features}: the CPU's model name and which of `CPU_FEATURES` it has (from
    /proc/cpuinfo; the platform's processor name and no features elsewhere)."""
    import platform
    info = {"model": platform.processor() or platform.machine(), "features": []}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return info
    for line in lines:
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            info["model"] = value.strip()
        elif key.strip() == "flags":
            info["features"] = [c for c in CPU_FEATURES if c in value.split()]
            break
    return info


def xla_cpu_isa(xla_flags: str) -> str:
    """The ISA cap of `--xla_cpu_max_isa=` in an XLA_FLAGS string, or 'default' (none)."""
    return next((f.split("=", 1)[1] for f in xla_flags.split()
                 if f.startswith("--xla_cpu_max_isa=")), "default")


def cpu_description() -> str:
    """'Intel(R) Xeon(R) Processor (avx2, avx512f, avx512_bf16, amx_bf16), XLA ISA AVX2': the CPU,
    its matmul-relevant features, and XLA's `--xla_cpu_max_isa` cap when one is set."""
    info, isa = cpu_info(), xla_cpu_isa(os.environ.get("XLA_FLAGS", ""))
    features = ", ".join(info["features"]) or "none of " + ", ".join(CPU_FEATURES)
    return (f"{info['model']} ({features})"
            + (f", XLA ISA capped at {isa}" if isa != "default" else ""))


def timeit(fn, *args, repeats: int = 3) -> float:
    """Median seconds of `repeats` calls after one warm-up call."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def peak_sizes(quick: bool) -> tuple[int, ...]:
    """Square matmul sizes for `matmul_peak`: up to 3,072 on CPU, 8,192 on an accelerator."""
    sizes = (1024, 2048) if quick else (1024, 2048, 3072)
    return sizes if jax.default_backend() == "cpu" else sizes + (4096, 8192)


def matmul_peak(quick: bool, dtype: str = "float32") -> float:
    """Best GFLOP/s of square matmuls of `dtype` at JAX's default precision (`peak_sizes`):
    for float32 that is true float32 on a CPU, TF32 on NVIDIA tensor cores, bfloat16 passes on a
    TPU."""
    f = jax.jit(lambda x, y: x @ y)
    best = 0.0
    for n in peak_sizes(quick):
        a = jax.random.normal(jax.random.key(0), (n, n)).astype(dtype)
        best = max(best, 2 * n ** 3 / timeit(f, a, a, repeats=3 if quick else 5) / 1e9)
    return best


def row(work, ours, reference="", ratio="", peak=""):
    return {"work": work, "ours": ours, "reference": reference, "ratio": ratio, "peak": peak}


def sig(x: float, digits: int = 3) -> str:
    """`x` to `digits` significant figures (all integer digits kept), with thousands commas, so
    one format serves a 2-core CPU and a GPU: 32.1, 0.0871, 1,670."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    if abs(x) < 10 ** (digits - 1):
        x = float(f"{x:.{digits}g}")   # rounded first: 99.96 -> 100, not 100.0
    return f"{x:,.{max(0, digits - 1 - math.floor(math.log10(abs(x))))}f}"


def peak_name(dtype: str = "float32") -> str:
    """What a matmul peak of `dtype` measures on this backend (see `matmul_peak`)."""
    if dtype != "float32":
        return dtype
    kind = jax.devices()[0].device_kind.lower()
    backend = jax.default_backend()
    return ("float32" if backend == "cpu" else "TF32" if "nvidia" in kind or backend == "gpu"
            else "bfloat16 passes" if backend == "tpu" else "float32 (default precision)")


def pct(gflops: float, peak: float) -> str:
    return f"{gflops:,.0f} GFLOP/s = {sig(100 * gflops / peak, 2)}%"
