r"""Every benchmark side by side in one run, as one Markdown table.

  python -m experiments.benchmarks.run_all [--quick] [--out=/tmp/benchmarks.md]

Rows: the work, this project's figure, what it is compared with (measured in the same run, or a
recorded anchor, labelled as such), the ratio, and the fraction of this machine's f32 matmul
peak (measured first, in the same run) that the work's XLA FLOP count reaches. `--quick` shrinks
every measurement (under 3 minutes on 2 CPU cores); its figures are for smoke-testing, not for
the README. The simulators and the RCM rollouts run their own scripts in subprocesses
(`touchdown_env_bench`, `arramon_env_bench`, `rxr_rollout_bench`), whose full output goes to
the log; the Talk The Walk and SDR rows are in `ttw_rows` and `sdr_rows` (a benchmark module
imports one system); the streaming benchmark (`stream_bench`, memory) is separate. Like the
launchers, it re-executes itself once with their malloc setting (huge pages,
`ttw_jax.core.train.launch.allocator_env`; `TTW_JAX_HUGEPAGES=0` measures without it), and its
subprocesses inherit it.

Recorded anchors (not run here): the official PyTorch LingUNet step at the paper's SDR shape,
36 s (its own model code, torch 2.13, 2 threads, measured on this machine kind); the official
Talk The Walk full-task loop, 0.52 s per episode at L = 500, batch 1; the reference exact-bound
implementation, 114 s on the 4 real maps.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

import jax

from experiments.benchmarks.measure import REPO, matmul_peak, pct, row
from experiments.benchmarks.sdr_rows import bench_lingunet, bench_text2conv
from experiments.benchmarks.ttw_rows import (bench_masc_step, bench_ttw_bound, bench_ttw_full_task,
                                             ttw_tables)


# --- Simulators and RCM rollouts (their own scripts) -------------------------------------------

def script(module: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True,
                         text=True, check=False)
    print(out.stdout, out.stderr[-2000:] if out.returncode else "", sep="\n", flush=True)
    if out.returncode:
        raise RuntimeError(f"{module} failed ({out.returncode})")
    return out.stdout


def num(s: str) -> float:
    return float(s.replace(",", ""))


def bench_touchdown_env(quick) -> list[dict]:
    out = script("experiments.benchmarks.touchdown_env_bench", "--batch_sizes=1024",
                 f"--repeats={2 if quick else 5}", f"--python_seconds={1 if quick else 3}")
    m = re.search(r"^\s*1024\s+([\d,]+)\s+([\d,]+)", out, re.M)
    fast, slow = num(m[1]), num(m[2])
    return [row("Touchdown simulator, random policy, batch 1,024 (real graph)", f"{fast:,.0f} steps/s",
                f"{slow:,.0f} steps/s (Python reference loop, same run)", f"{fast / slow:.0f}x")]


def bench_arramon_env(quick) -> list[dict]:
    out = script("experiments.benchmarks.arramon_env_bench", "--batch_sizes=1024",
                 f"--repeats={2 if quick else 5}")
    m = re.search(r"^\| navigation \| 1,024 \| [^|]+\| ([\d,]+) \| ([\d,]+)", out, re.M)
    fast, slow = num(m[1]), num(m[2])
    return [row("ArraMon navigation simulator, random actions, batch 1,024", f"{fast:,.0f} steps/s",
                f"{slow:,.0f} steps/s (Python reference loop, same run)", f"{fast / slow:.0f}x")]


def bench_rcm(peak, quick) -> list[dict]:
    out = script("experiments.benchmarks.rxr_rollout_bench", "--batch_sizes=1024",
                 f"--repeats={1 if quick else 3}", f"--horizon={10 if quick else 20}")
    scan = re.search(r"^\s*1024\s+scan\s+([\d,]+)", out, re.M)
    loop = re.search(r"^\s*1024\s+loop\s+([\d,]+)", out, re.M)
    flops = re.search(r"XLA cost analysis: ([\d.]+) GFLOP per step", out)
    fast, slow, gflop = num(scan[1]), num(loop[1]), float(flops[1])
    return [row("RCM policy rollouts in one scan, batch 1,024, default agent (90 real graphs), "
                f"{gflop:.2f} GFLOP per batch step (XLA)", f"{fast:,.0f} steps/s",
                f"{slow:,.0f} steps/s (Python loop of jitted steps, same run)", f"{fast / slow:.2f}x",
                pct(gflop * fast / 1024, peak))]


def to_markdown(rows: list[dict], header: str) -> str:
    lines = [header, "", "| work | this project | compared with | ratio | fraction of peak |",
             "| --- | --- | --- | --- | --- |"]
    lines += [f"| {r['work']} | {r['ours']} | {r['reference']} | {r['ratio']} | {r['peak']} |"
              for r in rows]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, under 3 minutes")
    p.add_argument("--out", default="", help="also write the Markdown table here")
    p.add_argument("--only", default="", help="comma-separated subset of: " + ",".join(BENCHES))
    args = p.parse_args(argv)
    if argv is None:
        from ttw_jax.core.train.launch import reexec_with_allocator
        reexec_with_allocator()
    # Every figure includes or excludes compilation as stated, never a persistent-cache hit.
    cache = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        run(args)
    finally:
        jax.config.update("jax_enable_compilation_cache", cache)


def run(args) -> None:
    t0 = time.perf_counter()
    chosen = [b for b in args.only.split(",") if b] or list(BENCHES)
    if unknown := sorted(set(chosen) - set(BENCHES)):
        raise SystemExit(f"--only: unknown benchmarks {unknown}; choose from {', '.join(BENCHES)}")
    # The bound first: its figure includes compiling, so nothing may have compiled it before.
    tables, what = ttw_tables()
    peak = matmul_peak(args.quick)
    rows = [row("f32 matmul peak of this machine (square, 1,024-3,072, best)", f"{peak:,.0f} GFLOP/s")]
    for name in chosen:
        t = time.perf_counter()
        rows += BENCHES[name](tables=tables, what=what, peak=peak, quick=args.quick)
        print(f"[{name}: {time.perf_counter() - t:.0f} s]", flush=True)
    header = (f"{'Quick run' if args.quick else 'Run'} of `python -m experiments.benchmarks.run_all"
              f"{' --quick' if args.quick else ''}`: {jax.devices()[0].device_kind}, "
              f"{os.cpu_count()} CPU cores, jax {jax.__version__}, {time.perf_counter() - t0:.0f} s in all.")
    table = to_markdown(rows, header)
    print(table)
    if args.out:
        from ttw_jax.core import paths
        paths.write_text(args.out, table)


BENCHES = {
    "ttw_bound": lambda tables, what, **_: bench_ttw_bound(tables, what),
    "ttw_full_task": lambda tables, peak, quick, **_: bench_ttw_full_task(tables, peak, quick),
    "masc": lambda tables, peak, quick, **_: bench_masc_step(tables, peak, quick),
    "lingunet": lambda peak, quick, **_: bench_lingunet(peak, quick),
    "text2conv": lambda quick, **_: bench_text2conv(quick),
    "rcm": lambda peak, quick, **_: bench_rcm(peak, quick),
    "touchdown_env": lambda quick, **_: bench_touchdown_env(quick),
    "arramon_env": lambda quick, **_: bench_arramon_env(quick),
}

if __name__ == "__main__":
    main()
