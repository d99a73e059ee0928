"""Runs the learning tests (`-m learning`) over seeds and XLA:CPU instruction sets, and tables how
far each final metric spread against its bound.

    python -m tests.learning_spread                       # seeds 0,1,2; default ISA and AVX2
    python -m tests.learning_spread --seeds=0 --isas=AVX2 # the second ISA alone, before a stop
    python -m tests.learning_spread --out=DIR -- -k arramon   # extra pytest arguments after --
    python -m tests.learning_spread --seeds=3,4 --append      # more runs into the same table

An ISA of `default` leaves XLA to use everything the CPU has (AVX-512, AVX512-BF16 and AMX where
present); any other is passed as `--xla_cpu_max_isa=<ISA>` (SSE4_2, AVX, AVX2, AVX512, ...), which
changes the kernels XLA emits and so the rounding of every reduction. `DIR` receives
`learning_spread.jsonl` (one line per test run: its metrics, bounds, seed and XLA_FLAGS),
`learning_spread.json` (the machine, the runs and the table) and `learning_spread.md`. The exit
status is 1 if any run failed.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time

from experiments.benchmarks.measure import cpu_info, xla_cpu_isa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(seed: int, isa: str, log: str, pytest_args: list[str]) -> dict:
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_cpu_max_isa=")]
    if isa != "default":
        flags.append(f"--xla_cpu_max_isa={isa}")
    env["XLA_FLAGS"] = " ".join(flags)
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "learning", f"--learning-seed={seed}",
           f"--learning-log={log}", *pytest_args]
    start = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    tail = proc.stdout.strip().splitlines()[-1:] or [""]
    print(f"seed {seed}, ISA {isa}: {tail[0]} ({time.time() - start:.0f} s)", flush=True)
    if proc.returncode not in (0, 1):   # 1: tests failed (tabled); anything else: pytest broke
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"pytest exited with {proc.returncode} (seed {seed}, ISA {isa})")
    return {"seed": seed, "isa": isa, "returncode": proc.returncode, "summary": tail[0],
            "seconds": round(time.time() - start, 1)}


def table(records: list[dict]) -> list[dict]:
    """One row per (test, metric): its bound (the latest run's; one changed between runs lists
    the earlier ones too), the least and greatest value over the runs, the worst one's run, and
    how many runs missed the latest bound."""
    from tests.helpers import Learned
    rows = collections.OrderedDict()
    for r in records:
        for name, m in r["metrics"].items():
            row = rows.setdefault((r["test"], name), {"test": r["test"], "metric": name,
                                                      "values": [], "bounds": []})
            row["op"], row["bound"] = m["op"], m["bound"]   # the latest run's bound
            if m["bound"] not in row["bounds"]:
                row["bounds"].append(m["bound"])
            row["values"].append((m["value"], r["seed"], xla_cpu_isa(r["xla_flags"])))
    out = []
    for row in rows.values():
        values = [v for v, _, _ in row["values"]]
        # the worst value is the one nearest (or beyond) the bound
        worst = (max if row["op"] in ("<", "<=") else min)(row["values"], key=lambda x: x[0])
        if row["op"] == "==":
            worst = max(row["values"], key=lambda x: abs(x[0] - row["bound"]))
        out.append({"test": row["test"], "metric": row["metric"], "op": row["op"],
                    "bound": row["bound"],
                    "earlier_bounds": [b for b in row["bounds"] if b != row["bound"]],
                    "min": min(values), "max": max(values),
                    "worst": worst[0], "worst_run": f"seed {worst[1]}, {worst[2]}",
                    "runs": len(values),
                    "missed": sum(not Learned.OPS[row["op"]](v, row["bound"]) for v in values)})
    return out


def markdown(machine: dict, runs: list[dict], rows: list[dict]) -> str:
    g = lambda x: f"{x:.6g}"
    lines = [f"Learning tests over seeds and XLA:CPU ISAs on {machine['cpu']['model']} "
             f"({', '.join(machine['cpu']['features']) or 'no AVX2'}; {machine['cores']} cores), "
             f"jax {machine['jax']}, revision {machine['revision']}.", "",
             "| seed | ISA | result | time |", "| --- | --- | --- | --- |"]
    lines += [f"| {r['seed']} | {r['isa']} | {r['summary']} | {r['seconds']:.0f} s |" for r in runs]
    lines += ["", "| test | metric | bound | min | max | worst (run) | runs | missed |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    earlier = lambda r: (f" (earlier runs: {', '.join(g(b) for b in r['earlier_bounds'])})"
                         if r["earlier_bounds"] else "")
    lines += [f"| `{r['test']}` | {r['metric']} | {r['op']} {g(r['bound'])}{earlier(r)} | "
              f"{g(r['min'])} | "
              f"{g(r['max'])} | {g(r['worst'])} ({r['worst_run']}) | {r['runs']} | {r['missed']} |"
              for r in rows]
    return "\n".join(lines) + "\n"


def revision() -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                             capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               text=True, capture_output=True, check=True).stdout.strip()
        return rev + ("+changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated learning seeds")
    parser.add_argument("--isas", default="default,AVX2",
                        help="comma-separated XLA:CPU ISAs ('default': all the CPU has)")
    parser.add_argument("--out", default="/tmp/learning_spread", help="output folder")
    parser.add_argument("--table_only", action="store_true",
                        help="run nothing: table the runs already in --out again")
    parser.add_argument("--append", action="store_true",
                        help="add these runs to those already in --out (the table covers all)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    log = os.path.join(args.out, "learning_spread.jsonl")
    summary = os.path.join(args.out, "learning_spread.json")
    import jax
    machine = {"cpu": cpu_info(), "cores": os.cpu_count(), "jax": jax.__version__,
               "revision": revision()}
    earlier = []
    if (args.append or args.table_only) and os.path.exists(summary):
        with open(summary, encoding="utf-8") as f:
            before = json.load(f)
        earlier = before["runs"]
        if before["machine"]["revision"] != machine["revision"] and not args.table_only:
            machine["revision"] = f"{before['machine']['revision']} then {machine['revision']}"
        else:
            machine["revision"] = before["machine"]["revision"]   # the code the runs ran
    elif os.path.exists(log):
        os.remove(log)
    runs = earlier + [run(int(seed), isa, log, args.pytest_args) for isa in args.isas.split(",")
                      for seed in args.seeds.split(",") if not args.table_only]
    with open(log, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    rows = table(records)
    with open(summary, "w", encoding="utf-8") as f:
        json.dump({"machine": machine, "runs": runs, "table": rows}, f, indent=1)
    text = markdown(machine, runs, rows)
    with open(os.path.join(args.out, "learning_spread.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    return int(any(r["returncode"] for r in runs))


if __name__ == "__main__":
    sys.exit(main())
