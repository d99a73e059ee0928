r"""Every benchmark side by side in one run, as one Markdown table.

  python -m experiments.benchmarks.run_all [--quick] [--out=/tmp/benchmarks.md] [--json=rows.json]
      [--column_from=experiments/benchmarks/results/nvidia_h200.json]

Rows: the work, this project's figure, what it is compared with (measured in the same run, or a
recorded anchor, labelled as such), the ratio, and the fraction of this machine's f32 matmul
peak (measured first, in the same run) that the work's FLOPs reach (counted from the traced
program, the same on every backend: `experiments.benchmarks.flops`). `--quick` shrinks
every measurement (under 3 minutes on 2 CPU cores); its figures are for smoke-testing, not for
the benchmarks README. The simulators and the RCM rollouts run their own scripts in subprocesses
(`touchdown_env_bench`, `arramon_env_bench`, `rxr_rollout_bench`), whose full output goes to
the log; the Talk The Walk and SDR rows are in `ttw_rows` and `sdr_rows` (a benchmark module
imports one system); the streaming benchmark (`stream_bench`, memory) is separate. Like the
launchers, it re-executes itself once with their malloc setting (huge pages,
`ttw_jax.core.train.launch.allocator_env`; `TTW_JAX_HUGEPAGES=0` measures without it), and its
subprocesses inherit it.

On a GPU the same command runs unchanged (nothing preallocates GPU memory, since the scripts
run beside it; the peak adds 4,096 and 8,192 matmuls, at JAX's default precision, TF32 on
NVIDIA). `--json` keeps a run's rows; `--column_from` adds such a run from another machine as two
labelled columns, row by row (`experiments/benchmarks/results/` holds the H200 run of the
benchmarks README). A benchmark that fails is a row saying so; the others still run, and the
command exits 1.

Recorded anchors (not run here): the official PyTorch LingUNet step at the paper's SDR shape,
36 s (its own model code, torch 2.13, 2 threads, measured on this machine kind); the official
Talk The Walk full-task loop, 0.52 s per episode at L = 500, batch 1; the reference exact-bound
implementation, 114 s on the 4 real maps.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import traceback

import jax

from experiments.benchmarks.flops import program_flops
from experiments.benchmarks.measure import (REPO, cpu_description, matmul_peak, peak_name,
                                            peak_sizes, pct, row, sig, timeit)
from experiments.benchmarks.sdr_rows import (PAPER, bench_extraction, bench_lingunet,
                                             bench_text2conv, sdr_step)
from experiments.benchmarks.ttw_rows import (bench_masc_step, bench_ttw_bound, bench_ttw_full_task,
                                             masc_step, ttw_tables)
from ttw_jax.core import paths


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
                f"{slow:,.0f} steps/s (Python reference loop, same run)", f"{sig(fast / slow)}x")]


def bench_arramon_env(quick) -> list[dict]:
    out = script("experiments.benchmarks.arramon_env_bench", "--batch_sizes=1024",
                 f"--repeats={2 if quick else 5}")
    m = re.search(r"^\| navigation \| 1,024 \| [^|]+\| ([\d,]+) \| ([\d,]+)", out, re.M)
    fast, slow = num(m[1]), num(m[2])
    return [row("ArraMon navigation simulator, random actions, batch 1,024", f"{fast:,.0f} steps/s",
                f"{slow:,.0f} steps/s (Python reference loop, same run)", f"{sig(fast / slow)}x")]


def bench_rcm(peak, quick) -> list[dict]:
    out = script("experiments.benchmarks.rxr_rollout_bench", "--batch_sizes=1024",
                 f"--repeats={1 if quick else 3}", f"--horizon={10 if quick else 20}")
    scan = re.search(r"^\s*1024\s+scan\s+([\d,]+)", out, re.M)
    loop = re.search(r"^\s*1024\s+loop\s+([\d,]+)", out, re.M)
    flops = re.search(r"traced count: ([\d.]+) GFLOP per step", out)
    fast, slow, gflop = num(scan[1]), num(loop[1]), float(flops[1])
    return [row("RCM policy rollouts in one scan, batch 1,024, default agent (90 real graphs), "
                f"{gflop:.2f} GFLOP per batch step (traced)", f"{fast:,.0f} steps/s",
                f"{slow:,.0f} steps/s (Python loop of jitted steps, same run)", f"{sig(fast / slow)}x",
                pct(gflop * fast / 1024, peak))]


def to_markdown(rows: list[dict], header: str, columns: list[dict] = ()) -> str:
    """The table; `columns` are other runs (`--json` files) added as two columns each."""
    head = "| work | this project | compared with | ratio | fraction of peak |"
    rule = "| --- | --- | --- | --- | --- |"
    for other in columns:
        head += f" {other['device']}: this project | {other['device']}: fraction of its peak |"
        rule += " --- | --- |"
    lines = [header, *(f"Columns '{o['device']}': {o['header']}" for o in columns), "", head, rule]
    for r in rows:
        line = f"| {r['work']} | {r['ours']} | {r['reference']} | {r['ratio']} | {r['peak']} |"
        for other in columns:
            line += " {} | {} |".format(*other_cells(other, r))
        lines.append(line)
    return "\n".join(lines) + "\n"


def other_cells(other: dict, r: dict) -> tuple[str, str]:
    """Another run's figure for row `r` (same benchmark, same position), with its ratio where
    that run measured its reference itself (the recorded anchors were measured on the CPU)."""
    match = [o for o in other["rows"] if (o["bench"], o["index"]) == (r["bench"], r["index"])]
    if not match:
        return "not run", ""
    o = match[0]
    if o["ratio"] and "recorded anchor" not in o["reference"]:
        vs = f" vs {o['reference']}" if o["reference"] else ""
        return f"{o['ours']}; {o['ratio']}{vs}", o["peak"]
    return o["ours"], o["peak"]


# Sizes that fill an accelerator ("on"; one H200 has 141 GB), the same rows at the CPU table's
# sizes ("cpu": float32 against bfloat16 on a CPU) and at test sizes ("small").
DEVICE_SIZES = {
    "on": dict(label="device size", episodes=262_144, rcm=16_384, masc=4_096, masc_features=500,
               lingunet=64, sdr_shape=(100, 464, 128)),
    "cpu": dict(label="the CPU table's size", episodes=1_024, rcm=1_024, masc=128,
                masc_features=500, lingunet=2, sdr_shape=(100, 116, 128)),
    "small": dict(label="test size", episodes=2_048, rcm=64, masc=8, masc_features=32, lingunet=2,
                  sdr_shape=(25, 116, 12), sdr_model=dict(levels=1, channels=16, mlp_hidden=16,
                                                          embed_dim=16, hidden=16)),
}


def bench_device(sizes: dict, tables, peak: float, peak16: float) -> list[dict]:
    """The device-sized rows: the simulators at `episodes` parallel episodes, the RCM rollouts
    at `rcm`, and the MASC and LingUNet train steps at `masc` / `lingunet` in float32 and
    bfloat16, each as a fraction of its dtype's matmul peak (`peak`, `peak16`)."""
    n = sizes["episodes"]
    out = script("experiments.benchmarks.touchdown_env_bench", f"--batch_sizes={n}",
                 "--repeats=2", "--python_seconds=0.2")
    td = num(re.search(rf"^\s*{n}\s+([\d,]+)", out, re.M)[1])
    out = script("experiments.benchmarks.arramon_env_bench", f"--batch_sizes={n}",
                 "--repeats=2", "--python_seconds=0.2")
    ar = num(re.search(rf"^\| navigation \| {n:,} \| [^|]+\| ([\d,]+)", out, re.M)[1])
    size = sizes["label"]
    rows = [row(f"Touchdown simulator, random policy, {n:,} episodes at once ({size})",
                f"{td:,.0f} steps/s"),
            row(f"ArraMon navigation simulator, random actions, {n:,} episodes at once ({size})",
                f"{ar:,.0f} steps/s")]
    b = sizes["rcm"]
    out = script("experiments.benchmarks.rxr_rollout_bench", f"--batch_sizes={b}", "--repeats=1",
                 "--horizon=10")
    scan = num(re.search(rf"^\s*{b}\s+scan\s+([\d,]+)", out, re.M)[1])
    rows.append(row(f"RCM policy rollouts in one scan, batch {b:,} ({size})",
                    f"{scan:,.0f} steps/s"))

    def step_row(work: str, dtype: str, made: tuple, repeats: int, unit: str) -> dict:
        """A train step's time and its traced FLOPs as a fraction of its dtype's peak."""
        step, state, batch, key = made
        flops = program_flops(step, state, batch, key)
        secs = timeit(lambda s: step(s, batch, key)[1], state, repeats=repeats)
        took = sig(secs * 1e3) if unit == "ms" else sig(secs)
        return row(f"{work}, {dtype} ({size})", f"{took} {unit}/step", "", "",
                   pct(flops / secs / 1e9, peak if dtype == "float32" else peak16)
                   + f" of the {peak_name(dtype)} peak")

    b, features = sizes["masc"], sizes["masc_features"]
    for dtype in ("float32", "bfloat16"):
        rows.append(step_row(f"MASC train step, T=3, L={features}, batch {b:,}", dtype,
                             masc_step(tables, b, dtype, features), 2, "ms"))
    shape, b = sizes["sdr_shape"], sizes["lingunet"]
    for dtype in ("float32", "bfloat16"):
        made = sdr_step("lingunet", shape, b, dtype, **{**PAPER, **sizes.get("sdr_model", {})})
        rows.append(step_row(f"LingUNet train step, [{', '.join(map(str, (b, *shape)))}]",
                             dtype, made, 1, "s"))
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, under 3 minutes")
    p.add_argument("--out", default="", help="also write the Markdown table here")
    p.add_argument("--json", default="", help="also write the rows here (for --column_from)")
    p.add_argument("--column_from", action="append", default=[],
                   help="a --json file of another run (another machine): its figures as columns")
    p.add_argument("--only", default="", help="comma-separated subset of: " + ",".join(BENCHES))
    p.add_argument("--device_sizes", default="auto", choices=("auto", "off", *DEVICE_SIZES),
                   help="the device-sized rows: auto = on an accelerator only; cpu = those rows "
                        "at the CPU table's sizes; small = at test sizes")
    args = p.parse_args(argv)
    if argv is None:
        from ttw_jax.core.train.launch import reexec_with_allocator
        reexec_with_allocator()
    # On a GPU the benchmark scripts run in subprocesses beside this one: nobody preallocates.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    # Every figure includes or excludes compilation as stated, never a persistent-cache hit.
    cache = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        failed = run(args)
    finally:
        jax.config.update("jax_enable_compilation_cache", cache)
    if failed:
        raise SystemExit(f"benchmarks failed: {', '.join(failed)} (tracebacks above)")


def run(args) -> list[str]:
    """Runs the chosen benchmarks, writing the table after each; returns the failed ones."""
    t0 = time.perf_counter()
    chosen = [b for b in args.only.split(",") if b] or [b for b in BENCHES if b != "device"]
    device_sizes = getattr(args, "device_sizes", "off")
    if device_sizes == "auto":
        device_sizes = "off" if jax.default_backend() == "cpu" else "on"
    if device_sizes != "off" and "device" not in chosen:
        chosen.append("device")
    if device_sizes == "off" and "device" in chosen:
        raise SystemExit("--only=device needs device sizes: --device_sizes=on, cpu or small")
    if unknown := sorted(set(chosen) - set(BENCHES)):
        raise SystemExit(f"--only: unknown benchmarks {unknown}; choose from {', '.join(BENCHES)}")
    columns = [json.loads(paths.resolve(f).read_text()) for f in args.column_from]
    # The bound first: its figure includes compiling, so nothing may have compiled it before.
    tables, what = ttw_tables()
    peak = matmul_peak(args.quick)
    sizes = peak_sizes(args.quick)
    rows = [dict(row(f"f32 matmul peak of this machine (square, {sizes[0]:,}-{sizes[-1]:,}, best; "
                     f"{peak_name()})", f"{peak:,.0f} GFLOP/s"), bench="peak", index=0)]
    peak16 = None
    if device_sizes != "off":   # the bfloat16 rows' peak
        peak16 = matmul_peak(args.quick, "bfloat16")
        rows.append(dict(row(f"bfloat16 matmul peak (square, {sizes[0]:,}-{sizes[-1]:,}, best)",
                             f"{peak16:,.0f} GFLOP/s"), bench="peak", index=1))
    device, failed = jax.devices()[0].device_kind, []
    # XLA:CPU's kernels (and bfloat16's cost) depend on the CPU's features: the header names them
    machine = f"{device} ({cpu_description()})" if jax.default_backend() == "cpu" else device
    for i, name in enumerate(chosen):
        t = time.perf_counter()
        try:
            new = BENCHES[name](tables=tables, what=what, peak=peak, quick=args.quick,
                                sizes=DEVICE_SIZES.get(device_sizes), peak16=peak16)
        except Exception as e:  # One broken benchmark leaves the others' figures standing.
            traceback.print_exc()
            failed.append(name)
            new = [row(f"{name}: failed", f"{type(e).__name__}: {str(e).splitlines()[0][:150]}"
                       if str(e) else type(e).__name__)]
        rows += [dict(r, bench=name, index=j) for j, r in enumerate(new)]
        print(f"[{name}: {time.perf_counter() - t:.0f} s]", flush=True)
        done = i + 1 == len(chosen)
        header = (f"{'Quick run' if args.quick else 'Run'} of `python -m experiments.benchmarks.run_all"
                  f"{' --quick' if args.quick else ''}`: {machine}, "
                  f"{os.cpu_count()} CPU cores, jax {jax.__version__}, "
                  f"{time.perf_counter() - t0:.0f} s in all"
                  + ("." if done else f" so far (partial: {i + 1} of {len(chosen)} benchmarks)."))
        table = to_markdown(rows, header, columns)
        if args.out:
            paths.write_text(args.out, table)
        if args.json:
            paths.write_text(args.json, json.dumps(
                {"device": device, "header": header, "rows": rows}, indent=1))
    print(table)
    return failed


BENCHES = {
    "ttw_bound": lambda tables, what, **_: bench_ttw_bound(tables, what),
    "ttw_full_task": lambda tables, peak, quick, **_: bench_ttw_full_task(tables, peak, quick),
    "masc": lambda tables, peak, quick, **_: bench_masc_step(tables, peak, quick),
    "lingunet": lambda peak, quick, **_: bench_lingunet(peak, quick),
    "text2conv": lambda quick, **_: bench_text2conv(quick),
    "extraction": lambda peak, quick, **_: bench_extraction(peak, quick),
    "rcm": lambda peak, quick, **_: bench_rcm(peak, quick),
    "touchdown_env": lambda quick, **_: bench_touchdown_env(quick),
    "arramon_env": lambda quick, **_: bench_arramon_env(quick),
    "device": lambda sizes, tables, peak, peak16, **_: bench_device(sizes, tables, peak, peak16),
}

if __name__ == "__main__":
    main()
