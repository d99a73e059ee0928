"""Timing, FLOP and table-row helpers shared by the benchmarks (no system imports)."""
from __future__ import annotations

import math
import os
import re
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


def timeit(fn, *args, repeats: int = 3, warmup: int = 1) -> float:
    """Median seconds of `repeats` calls after `warmup` warm-up calls."""
    for _ in range(warmup):
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
    TPU. On an accelerator each size is warmed up (clocks and autotuning settle) and timed as
    the median of 20 calls, so that the figure is stable from run to run."""
    f = jax.jit(lambda x, y: x @ y)
    accelerator = jax.default_backend() != "cpu"
    repeats = 20 if accelerator else (3 if quick else 5)
    best = 0.0
    for n in peak_sizes(quick):
        a = jax.random.normal(jax.random.key(0), (n, n)).astype(dtype)
        secs = timeit(f, a, a, repeats=repeats, warmup=5 if accelerator else 1)
        best = max(best, 2 * n ** 3 / secs / 1e9)
    return best


# Dense (no sparsity) matmul peaks of the vendors' datasheets, TFLOP/s per chip, by the
# `device_kind` JAX reports (first match wins, so the variants come before the family):
# float32 on CUDA cores, TF32 and bfloat16 on tensor cores (NVIDIA); bfloat16 on the MXUs
# (TPU, where float32 at JAX's default precision is one bfloat16 pass: the same figure).
DATASHEET = (
    (r"H200 NVL", "NVIDIA H200 NVL", {"float32": 60.0, "TF32": 417.5, "bfloat16": 835.5}),
    (r"H200", "NVIDIA H200 SXM", {"float32": 67.0, "TF32": 494.5, "bfloat16": 989.5}),
    (r"H100.*PCIe", "NVIDIA H100 PCIe", {"float32": 51.0, "TF32": 378.0, "bfloat16": 756.0}),
    (r"H100 NVL", "NVIDIA H100 NVL", {"float32": 60.0, "TF32": 417.5, "bfloat16": 835.5}),
    (r"H100", "NVIDIA H100 SXM", {"float32": 67.0, "TF32": 494.5, "bfloat16": 989.5}),
    (r"A100", "NVIDIA A100", {"float32": 19.5, "TF32": 156.0, "bfloat16": 312.0}),
    (r"TPU v4", "TPU v4", {"bfloat16": 275.0}),
    (r"TPU v5 ?(lite|e)", "TPU v5e", {"bfloat16": 197.0}),
    (r"TPU v5", "TPU v5p", {"bfloat16": 459.0}),
    (r"TPU v6 ?(lite|e)", "TPU v6e", {"bfloat16": 918.0}),
)


def datasheet_peak(device_kind: str, dtype: str = "float32", precision: str = "default"
                   ) -> tuple[float, str] | None:
    """(GFLOP/s, 'NVIDIA H200 SXM dense TF32') of the datasheet peak that a matmul of `dtype`
    at JAX's `precision` runs at on `device_kind` (float32 at the default precision: TF32 on
    NVIDIA, one bfloat16 pass on a TPU; at "highest" true float32 on NVIDIA), or None for a
    device the table does not hold (every CPU)."""
    for pattern, name, peaks in DATASHEET:
        if re.search(pattern, device_kind, re.I):
            if dtype != "float32" or name.startswith("TPU"):
                kind = "bfloat16"
            else:
                kind = "float32" if precision == "highest" else "TF32"
            if kind in peaks:
                return peaks[kind] * 1e3, f"{name} dense {kind}"
            return None
    return None


def datasheet_cell(peak_cell: str, work: str, device_kind: str) -> str:
    """The fraction of the datasheet dense peak of a row whose measured-peak cell is
    `peak_cell` ("66,904 GFLOP/s = 18% ..."): the row's dtype is bfloat16 if its `work` says so,
    else float32 at JAX's default precision. '' where the row has no FLOP rate or the device
    no datasheet figure."""
    m = re.match(r"\s*([\d,]+(?:\.\d+)?) GFLOP/s", peak_cell or "")
    found = datasheet_peak(device_kind, "bfloat16" if "bfloat16" in work else "float32")
    if m is None or found is None:
        return ""
    gflops, (peak, label) = float(m.group(1).replace(",", "")), found
    return f"{sig(100 * gflops / peak, 2)}% of {peak / 1e3:g} TFLOP/s ({label})"


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
