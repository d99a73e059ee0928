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
imports one system), the seed-axis row (N seeds in one program vs N sequential runs) in
`seeds_bench`; the streaming benchmark (`stream_bench`, memory) is separate. Like the
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
from experiments.benchmarks.measure import (REPO, SHARED, cpu_description, datasheet_cell,
                                            matmul_peak, peak_name, peak_sizes, pct, row, sig,
                                            timeit)
from experiments.benchmarks.sdr_rows import (PAPER, bench_extraction, bench_lingunet,
                                             bench_text2conv, sdr_step)
from experiments.benchmarks.seeds_bench import bench_parallel_seeds
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


def bench_touchdown_env(quick, data_dir=SHARED) -> list[dict]:
    out = script("experiments.benchmarks.touchdown_env_bench", "--batch_sizes=1024",
                 f"--graph_dir={os.path.join(data_dir, 'touchdown', 'graph')}",
                 f"--repeats={2 if quick else 5}", f"--python_seconds={1 if quick else 3}")
    m = re.search(r"^\s*1024\s+([\d,]+)\s+([\d,]+)", out, re.M)
    fast, slow = num(m[1]), num(m[2])
    return [row("Touchdown simulator, random policy, batch 1,024 (real graph)", f"{fast:,.0f} steps/s",
                f"{slow:,.0f} steps/s (Python reference loop, same run)", f"{sig(fast / slow)}x")]


def bench_arramon_env(quick, data_dir=SHARED) -> list[dict]:
    out = script("experiments.benchmarks.arramon_env_bench", "--batch_sizes=1024",
                 f"--data={os.path.join(data_dir, 'arramon', 'val_seen.json')}",
                 f"--repeats={2 if quick else 5}")
    m = re.search(r"^\| navigation \| 1,024 \| [^|]+\| ([\d,]+) \| ([\d,]+)", out, re.M)
    fast, slow = num(m[1]), num(m[2])
    return [row("ArraMon navigation simulator, random actions, batch 1,024", f"{fast:,.0f} steps/s",
                f"{slow:,.0f} steps/s (Python reference loop, same run)", f"{sig(fast / slow)}x")]


def bench_rcm(peak, quick, data_dir=SHARED) -> list[dict]:
    out = script("experiments.benchmarks.rxr_rollout_bench", "--batch_sizes=1024",
                 f"--connectivity_dir={os.path.join(data_dir, 'matterport', 'connectivity')}",
                 f"--repeats={1 if quick else 3}", f"--horizon={10 if quick else 20}")
    scan = re.search(r"^\s*1024\s+scan\s+([\d,]+)", out, re.M)
    loop = re.search(r"^\s*1024\s+loop\s+([\d,]+)", out, re.M)
    flops = re.search(r"traced count: ([\d.]+) GFLOP per step", out)
    fast, slow, gflop = num(scan[1]), num(loop[1]), float(flops[1])
    return [row("RCM policy rollouts in one scan, batch 1,024, default agent (90 real graphs), "
                f"{gflop:.2f} GFLOP per batch step (traced)", f"{fast:,.0f} steps/s",
                f"{slow:,.0f} steps/s (Python loop of jitted steps, same run)", f"{sig(fast / slow)}x",
                pct(gflop * fast / 1024, peak))]


MEASURED = "fraction of the measured matmul peak"
DATASHEET = "fraction of the datasheet dense peak"


def with_datasheet(run: dict) -> dict:
    """`run` (a `--json` file's object) with each row's `datasheet` cell: its FLOP rate as a
    fraction of the datasheet dense peak of the run's device (`measure.datasheet_cell`), where
    the row was not stored with one."""
    return dict(run, rows=[dict(r, datasheet=r.get("datasheet") or datasheet_cell(
        r.get("peak", ""), r["work"], run["device"])) for r in run["rows"]])


def to_markdown(rows: list[dict], header: str, columns: list[dict] = (), device: str = "") -> str:
    """The table; `columns` are other runs (`--json` files) added as columns each. Every
    fraction of peak names its denominator: the matmul rate measured in the same run (float32
    at JAX's default precision unless the row says bfloat16), and the datasheet's dense peak of
    the device (`measure.DATASHEET`; a column only where the device has one)."""
    own_sheet = any(r.get("datasheet") for r in rows)
    head = f"| work | this project | compared with | ratio | {MEASURED} |"
    rule = "| --- | --- | --- | --- | --- |"
    if own_sheet:
        head += f" {DATASHEET} ({device}) |"
        rule += " --- |"
    columns = [with_datasheet(o) for o in columns]
    for other in columns:
        head += f" {other['device']}: this project | {other['device']}: {MEASURED} |"
        rule += " --- | --- |"
        if any(r.get("datasheet") for r in other["rows"]):
            head += f" {other['device']}: {DATASHEET} |"
            rule += " --- |"
    lines = [header, *(f"Columns '{o['device']}': {o['header']}" for o in columns), "", head, rule]
    for r in rows:
        line = f"| {r['work']} | {r['ours']} | {r['reference']} | {r['ratio']} | {r['peak']} |"
        if own_sheet:
            line += f" {r.get('datasheet', '')} |"
        for other in columns:
            cells = other_cells(other, r)
            line += " {} | {} |".format(*cells[:2])
            if any(o.get("datasheet") for o in other["rows"]):
                line += f" {cells[2]} |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def other_cells(other: dict, r: dict) -> tuple[str, str, str]:
    """Another run's figure for row `r` (same benchmark, same position), with its ratio where
    that run measured its reference itself (the recorded anchors were measured on the CPU), its
    fraction of its measured peak and of its datasheet peak."""
    match = [o for o in other["rows"] if (o["bench"], o["index"]) == (r["bench"], r["index"])]
    if not match:
        return "not run", "", ""
    o = match[0]
    if o["ratio"] and "recorded anchor" not in o["reference"]:
        vs = f" vs {o['reference']}" if o["reference"] else ""
        return f"{o['ours']}; {o['ratio']}{vs}", o["peak"], o.get("datasheet", "")
    return o["ours"], o["peak"], o.get("datasheet", "")


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


def bench_device_envs(sizes: dict, data_dir: str = SHARED) -> list[dict]:
    """The simulators at `episodes` parallel episodes (random actions)."""
    n, size = sizes["episodes"], sizes["label"]
    out = script("experiments.benchmarks.touchdown_env_bench", f"--batch_sizes={n}",
                 f"--graph_dir={os.path.join(data_dir, 'touchdown', 'graph')}",
                 "--repeats=2", "--python_seconds=0.2")
    td = num(re.search(rf"^\s*{n}\s+([\d,]+)", out, re.M)[1])
    out = script("experiments.benchmarks.arramon_env_bench", f"--batch_sizes={n}",
                 f"--data={os.path.join(data_dir, 'arramon', 'val_seen.json')}",
                 "--repeats=2", "--python_seconds=0.2")
    ar = num(re.search(rf"^\| navigation \| {n:,} \| [^|]+\| ([\d,]+)", out, re.M)[1])
    return [row(f"Touchdown simulator, random policy, {n:,} episodes at once ({size})",
                f"{td:,.0f} steps/s"),
            row(f"ArraMon navigation simulator, random actions, {n:,} episodes at once ({size})",
                f"{ar:,.0f} steps/s")]


def bench_device_rcm(sizes: dict, data_dir: str = SHARED) -> list[dict]:
    """The RCM policy rollouts at batch `rcm`."""
    b = sizes["rcm"]
    out = script("experiments.benchmarks.rxr_rollout_bench", f"--batch_sizes={b}", "--repeats=1",
                 f"--connectivity_dir={os.path.join(data_dir, 'matterport', 'connectivity')}",
                 "--horizon=10")
    scan = num(re.search(rf"^\s*{b}\s+scan\s+([\d,]+)", out, re.M)[1])
    return [row(f"RCM policy rollouts in one scan, batch {b:,} ({sizes['label']})",
                f"{scan:,.0f} steps/s")]


def step_row(work: str, dtype: str, made: tuple, repeats: int, unit: str, peaks: dict,
             size: str) -> dict:
    """A train step's time and its traced FLOPs as a fraction of its dtype's measured peak."""
    step, state, batch, key = made
    flops = program_flops(step, state, batch, key)
    secs = timeit(lambda s: step(s, batch, key)[1], state, repeats=repeats)
    took = sig(secs * 1e3) if unit == "ms" else sig(secs)
    return row(f"{work}, {dtype} ({size})", f"{took} {unit}/step", "", "",
               pct(flops / secs / 1e9, peaks[dtype]) + f" of the {peak_name(dtype)} peak")


def bench_device_masc(sizes: dict, tables, peaks: dict) -> list[dict]:
    """The MASC train step at batch `masc`, float32 and bfloat16."""
    b, features = sizes["masc"], sizes["masc_features"]
    return [step_row(f"MASC train step, T=3, L={features}, batch {b:,}", dtype,
                     masc_step(tables, b, dtype, features), 2, "ms", peaks, sizes["label"])
            for dtype in ("float32", "bfloat16")]


def bench_device_lingunet(sizes: dict, peaks: dict) -> list[dict]:
    """The LingUNet train step at batch `lingunet` and shape `sdr_shape`, both dtypes."""
    shape, b = sizes["sdr_shape"], sizes["lingunet"]
    rows = []
    for dtype in ("float32", "bfloat16"):
        made = sdr_step("lingunet", shape, b, dtype, **{**PAPER, **sizes.get("sdr_model", {})})
        rows.append(step_row(f"LingUNet train step, [{', '.join(map(str, (b, *shape)))}]",
                             dtype, made, 1, "s", peaks, sizes["label"]))
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
    p.add_argument("--data_dir", default=SHARED,
                   help="the shared data folder: touchdown/graph, ttw/maps, "
                        "matterport/connectivity, arramon/val_seen.json")
    p.add_argument("--render", default="",
                   help="print the table of this stored --json run (with --column_from) and exit")
    args = p.parse_args(argv)
    if args.render:
        table = render(args.render, args.column_from)
        if args.out:
            paths.write_text(args.out, table)
        print(table)
        return
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


DEVICE_BENCHES = ("device_envs", "device_rcm", "device_masc", "device_lingunet")
NEEDS_TABLES = {"ttw_bound", "ttw_full_task", "masc", "seeds", "device_masc"}
NEEDS_PEAK = {"ttw_full_task", "masc", "lingunet", "extraction", "rcm", "device_masc",
              "device_lingunet"}


def chosen_benches(only: str, device_sizes: str) -> list[str]:
    """The benchmarks `--only` names (`device` standing for every device-sized row), in order;
    every CPU-table row when it names none, plus the device rows when `device_sizes` is on."""
    chosen = []
    for b in [b for b in only.split(",") if b] or [b for b in BENCHES if b not in DEVICE_BENCHES]:
        chosen += list(DEVICE_BENCHES) if b == "device" else [b]
    if unknown := sorted(set(chosen) - set(BENCHES)):
        raise SystemExit(f"--only: unknown benchmarks {unknown}; choose from "
                         f"{', '.join(BENCHES)} (or device: all of {', '.join(DEVICE_BENCHES)})")
    device = [b for b in chosen if b in DEVICE_BENCHES]
    if device_sizes == "off" and device:
        raise SystemExit(f"--only={','.join(device)} needs device sizes: --device_sizes=on, cpu "
                         "or small")
    if device_sizes != "off" and not only:
        chosen += list(DEVICE_BENCHES)
    return chosen


def run(args) -> list[str]:
    """Runs the chosen benchmarks, writing the table after each; returns the failed ones."""
    t0 = time.perf_counter()
    device_sizes = getattr(args, "device_sizes", "off")
    if device_sizes == "auto":
        device_sizes = "off" if jax.default_backend() == "cpu" else "on"
    chosen = chosen_benches(args.only, device_sizes)
    data_dir = getattr(args, "data_dir", "") or SHARED
    columns = [stored_run(f) for f in args.column_from]
    # The bound first: its figure includes compiling, so nothing may have compiled it before.
    tables, what = (ttw_tables(os.path.join(data_dir, "ttw", "maps"))
                    if NEEDS_TABLES & set(chosen) else (None, ""))
    sizes = peak_sizes(args.quick)
    peaks, rows = {}, []
    if NEEDS_PEAK & set(chosen):
        peaks["float32"] = matmul_peak(args.quick)
        rows.append(dict(row(f"f32 matmul peak of this machine (square, {sizes[0]:,}-"
                             f"{sizes[-1]:,}, best; {peak_name()})",
                             f"{peaks['float32']:,.0f} GFLOP/s"), bench="peak", index=0))
    if {"device_masc", "device_lingunet"} & set(chosen):   # the bfloat16 rows' peak
        peaks["bfloat16"] = matmul_peak(args.quick, "bfloat16")
        rows.append(dict(row(f"bfloat16 matmul peak (square, {sizes[0]:,}-{sizes[-1]:,}, best)",
                             f"{peaks['bfloat16']:,.0f} GFLOP/s"), bench="peak", index=1))
    device, failed = jax.devices()[0].device_kind, []
    # XLA:CPU's kernels (and bfloat16's cost) depend on the CPU's features: the header names them
    machine = f"{device} ({cpu_description()})" if jax.default_backend() == "cpu" else device
    for i, name in enumerate(chosen):
        t = time.perf_counter()
        try:
            new = BENCHES[name](tables=tables, what=what, peak=peaks.get("float32"),
                                peaks=peaks, quick=args.quick,
                                sizes=DEVICE_SIZES.get(device_sizes), data_dir=data_dir)
        except Exception as e:  # One broken benchmark leaves the others' figures standing.
            traceback.print_exc()
            failed.append(name)
            new = [row(f"{name}: failed", f"{type(e).__name__}: {str(e).splitlines()[0][:150]}"
                       if str(e) else type(e).__name__)]
        rows += [dict(r, bench=name, index=j, datasheet=datasheet_cell(r["peak"], r["work"], device))
                 for j, r in enumerate(new)]
        print(f"[{name}: {time.perf_counter() - t:.0f} s]", flush=True)
        done = i + 1 == len(chosen)
        header = (f"{'Quick run' if args.quick else 'Run'} of `python -m experiments.benchmarks.run_all"
                  f"{' --quick' if args.quick else ''}`: {machine}, "
                  f"{os.cpu_count()} CPU cores, jax {jax.__version__}, "
                  f"{time.perf_counter() - t0:.0f} s in all"
                  + ("." if done else f" so far (partial: {i + 1} of {len(chosen)} benchmarks)."))
        table = to_markdown(rows, header, columns, device)
        if args.out:
            paths.write_text(args.out, table)
        if args.json:
            paths.write_text(args.json, json.dumps(
                {"device": device, "header": header, "rows": rows}, indent=1))
    print(table)
    return failed


def stored_run(path: str) -> dict:
    """A run's {device, header, rows}: a `--json` file, or a committed results file holding one
    (`experiments.readme_tables --keep`)."""
    obj = json.loads(paths.resolve(path).read_text())
    if "rows" in obj:
        return obj
    runs = [v for v in obj.values() if isinstance(v, dict) and "rows" in v]
    if len(runs) != 1:
        raise SystemExit(f"{path}: not a run_all --json file (no 'rows'), nor a results file "
                         "holding exactly one")
    return runs[0]


def render(stored: str, column_from: list[str]) -> str:
    """The table of a stored run (`--json`) with other stored runs as columns, nothing
    measured: for a table's layout that changed after its figures were taken."""
    main_run = with_datasheet(stored_run(stored))
    columns = [stored_run(f) for f in column_from]
    return to_markdown(main_run["rows"], main_run["header"], columns, main_run["device"])


BENCHES = {
    "ttw_bound": lambda tables, what, **_: bench_ttw_bound(tables, what),
    "ttw_full_task": lambda tables, peak, quick, **_: bench_ttw_full_task(tables, peak, quick),
    "masc": lambda tables, peak, quick, **_: bench_masc_step(tables, peak, quick),
    "seeds": lambda tables, quick, **_: bench_parallel_seeds(tables, quick),
    "lingunet": lambda peak, quick, **_: bench_lingunet(peak, quick),
    "text2conv": lambda quick, **_: bench_text2conv(quick),
    "extraction": lambda peak, quick, **_: bench_extraction(peak, quick),
    "rcm": lambda peak, quick, data_dir, **_: bench_rcm(peak, quick, data_dir),
    "touchdown_env": lambda quick, data_dir, **_: bench_touchdown_env(quick, data_dir),
    "arramon_env": lambda quick, data_dir, **_: bench_arramon_env(quick, data_dir),
    "device_envs": lambda sizes, data_dir, **_: bench_device_envs(sizes, data_dir),
    "device_rcm": lambda sizes, data_dir, **_: bench_device_rcm(sizes, data_dir),
    "device_masc": lambda sizes, tables, peaks, **_: bench_device_masc(sizes, tables, peaks),
    "device_lingunet": lambda sizes, peaks, **_: bench_device_lingunet(sizes, peaks),
}

if __name__ == "__main__":
    main()
