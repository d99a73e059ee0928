"""Where the test suite's time goes: tables a `--compile-log` file of `python -m pytest`.

    python -m pytest -q --compile-log=/tmp/compile.jsonl
    python -m experiments.benchmarks.suite_time /tmp/compile.jsonl [--top=20] [--out=FILE.json]

Each line of the log is one test (its setup, call and teardown, so a session fixture's shared run
counts in the first test that asks for it): wall seconds and the seconds JAX spent tracing,
lowering, compiling with XLA and reading the compilation cache. Printed: the totals per test
area (`tests/<area>/`) and the slowest tests, each with its compile-pipeline share; `--out`
writes the same as JSON.
"""
from __future__ import annotations

import argparse
import collections
import json

# jax.monitoring's duration events of the compile pipeline, by the name the log gives them
# (`tests/conftest.py --compile-log` listens for them).
COMPILE_EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace",
                  "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
                  "/jax/core/compile/backend_compile_duration": "compile",
                  "/jax/compilation_cache/cache_retrieval_time_sec": "cache_read"}
PARTS = tuple(COMPILE_EVENTS.values())


def read_log(path: str) -> list[dict]:
    """The log's rows; a malformed line is named with its file and line number."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                float(row["wall"]), str(row["test"])
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{path}:{i}: not a compile-log row ({e})") from None
            rows.append(row)
    return rows


def summarize(rows: list[dict], top: int = 20) -> dict:
    """{"total": totals, "areas": {area: totals}, "slowest": [rows]}, totals being the summed
    wall, each of PARTS, `pipeline` (their sum), `programs` and `tests`."""
    def add(acc, row):
        acc["tests"] += 1
        for k in ("wall", "programs") + PARTS:
            acc[k] += row.get(k, 0)
        acc["pipeline"] += sum(row.get(k, 0) for k in PARTS)

    new = lambda: collections.Counter()     # noqa: E731
    total, areas = new(), collections.defaultdict(new)
    for row in rows:
        parts = row["test"].split("/")
        add(total, row)
        add(areas[parts[1] if len(parts) > 2 else parts[0].split("::")[0]], row)
    slowest = sorted(rows, key=lambda r: -r["wall"])[:top]
    rnd = lambda c: {k: round(v, 1) for k, v in c.items()}   # noqa: E731
    return {"total": rnd(total), "areas": {a: rnd(c) for a, c in sorted(
        areas.items(), key=lambda kv: -kv[1]["wall"])}, "slowest": slowest}


def table(summary: dict) -> str:
    """Markdown: areas (test seconds, compile-pipeline seconds and share, programs), then the
    slowest tests."""
    def line(name, c):
        share = c["pipeline"] / c["wall"] if c["wall"] else 0.0
        return (f"| {name} | {c['tests']:,.0f} | {c['wall']:,.0f} | {c['pipeline']:,.0f} "
                f"({share:.0%}) | {c['compile']:,.0f} | {c['programs']:,.0f} |")
    out = ["| area | tests | test seconds | JAX compile pipeline | of which XLA | programs |",
           "| --- | --- | --- | --- | --- | --- |"]
    out += [line(a, c) for a, c in summary["areas"].items()]
    out.append(line("all", summary["total"]))
    out += ["", "| test | seconds | JAX compile pipeline | programs |", "| --- | --- | --- | --- |"]
    for r in summary["slowest"]:
        pipe = sum(r.get(k, 0) for k in PARTS)
        out.append(f"| {r['test']} | {r['wall']:.0f} | {pipe:.0f} | {r.get('programs', 0)} |")
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("log")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    summary = summarize(read_log(args.log), args.top)
    print(table(summary))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
