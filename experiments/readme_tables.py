r"""Every table of the READMEs says where its numbers come from, and those numbers are checked.

The line before each Markdown table (blank lines allowed between) is one of:

    <!-- results: results/<file>.json -->    numbers from a committed results file (or several,
                                             separated by commas)
    <!-- results: unbacked: <why> -->        numbers measured before results files were kept
    <!-- table: <what> -->                   no measured numbers (settings, commands, paper's)

A results file (`experiments/<name>/results/*.json`, path relative to the README) is a JSON object
with the exact `command` that produced it and the run's `results.json` / `sweep.json` (or several
runs under names). Each number printed in a backed table, outside its first column (the row
labels), outside the columns whose header starts with "paper" and the rows whose label does, must
equal a number of the file rounded to the printed precision (or its percentage).

    python -m experiments.readme_tables     # the tables of every README and their state

and, to commit a finished run's results.json (or sweep.json) with its exact command,
`python -m experiments.readme_tables --keep=<workdir> --out=<results file> --command=<command>`.
"""
from __future__ import annotations

import dataclasses
import glob
import json
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = re.compile(r"^<!--\s*(results|table):\s*(.*?)\s*-->$")
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?(?![\w.])")


@dataclasses.dataclass
class Table:
    readme: str
    line: int             # 1-based line of the header row
    kind: str             # "results", "unbacked", "table" or "" (no marker)
    source: str           # the results file, the reason, or what the table holds
    header: list
    rows: list


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def tables(readme: str) -> list[Table]:
    """The Markdown tables of `readme` with their markers."""
    lines = open(readme, encoding="utf-8").read().splitlines()
    out, i = [], 0
    while i < len(lines):
        if (lines[i].startswith("|") and i + 1 < len(lines)
                and re.match(r"^\|\s*:?-{3,}", lines[i + 1])):
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            k = i - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            m = MARKER.match(lines[k].strip()) if k >= 0 else None
            kind, source = "", ""
            if m:
                kind, source = m.group(1), m.group(2)
                if kind == "results" and source.startswith("unbacked:"):
                    kind, source = "unbacked", source[len("unbacked:"):].strip()
            out.append(Table(readme, i + 1, kind, source, _cells(lines[i]),
                             [_cells(r) for r in lines[i + 2:j]]))
            i = j
        else:
            i += 1
    return out


def numbers_in(obj) -> list[float]:
    """Every number in a parsed JSON value, those written inside strings ("212 GFLOP/s", the
    rows of a benchmark table) included."""
    if isinstance(obj, bool):
        return []
    if isinstance(obj, str):
        return [float(n.replace(",", "")) for n in NUMBER.findall(obj)]
    if isinstance(obj, (int, float)):
        return [float(obj)] if math.isfinite(obj) else []
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in numbers_in(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in numbers_in(v)]
    return []


def printed_numbers(table: Table) -> list[tuple[str, str]]:
    """(cell, number) of every measured number the table prints (see the module docstring)."""
    skip = {c for c, h in enumerate(table.header) if h.lower().startswith("paper")}
    out = []
    for row in table.rows:
        if not row or row[0].lower().startswith("paper"):
            continue
        for c, cell in enumerate(row[1:], 1):
            if c not in skip:
                out.extend((cell, n) for n in NUMBER.findall(cell.replace("`", "")))
    return out


def found(number: str, values: list[float]) -> bool:
    """`number` as printed equals one of `values` at its precision (or as a percentage)."""
    digits = len(number.split(".", 1)[1]) if "." in number else 0
    x = float(number.replace(",", ""))
    tol = 0.5 * 10 ** -digits + 1e-9
    return any(abs(v - x) <= tol or abs(100 * v - x) <= tol for v in values)


def check(table: Table) -> list[str]:
    """Problems of one table (empty when it is fine)."""
    where = f"{os.path.relpath(table.readme, ROOT)}:{table.line}"
    if not table.kind:
        return [f"{where}: no marker (<!-- results: FILE -->, <!-- results: unbacked: WHY -->"
                " or <!-- table: WHAT -->) on the line before the table"]
    if table.kind != "results":
        return []
    values = []
    for name in (n.strip() for n in table.source.split(",")):
        path = os.path.join(os.path.dirname(table.readme), name)
        if not os.path.isfile(path):
            return [f"{where}: results file {name} does not exist"]
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict) or not isinstance(data.get("command"), str):
            return [f"{where}: {name} has no 'command' (the exact command of its run)"]
        values += numbers_in(data)
    return [f"{where}: {n!r} (cell {cell!r}) is not in {table.source}"
            for cell, n in printed_numbers(table) if not found(n, values)]


def readmes() -> list[str]:
    return [os.path.join(ROOT, "README.md"),
            *sorted(glob.glob(os.path.join(ROOT, "experiments", "*", "README.md")))]


def keep(workdir: str, out: str, command: str, wall_time: str = "") -> dict:
    """Writes the results file `out` of the run in `workdir`: its command, its wall time when
    given (as printed, e.g. "10m51s") and its results.json (or sweep.json). `workdir` may also be
    a file the command wrote: JSON is kept parsed under its name, anything else (a benchmark's
    Markdown table) as its text under "output". Returns what was written."""
    names = ([os.path.basename(workdir)] if os.path.isfile(workdir)
             else ["results.json", "sweep.json"])
    workdir = os.path.dirname(workdir) if os.path.isfile(workdir) else workdir
    for name in names:
        path = os.path.join(workdir, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                if name.endswith(".json"):
                    entry = {name[:-len(".json")]: json.load(f)}
                else:
                    entry = {"output": f.read()}
            kept = {"command": command, **({"wall_time": wall_time} if wall_time else {}), **entry}
            os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
            with open(out, "w", encoding="utf-8") as f:
                json.dump(kept, f, indent=1)
                f.write("\n")
            return kept
    raise FileNotFoundError(f"{workdir} holds neither results.json nor sweep.json")


def main() -> int:
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", help="a run's workdir (or a file it wrote) to commit as --out")
    parser.add_argument("--out", help="the results file to write")
    parser.add_argument("--command", help="the exact command of the run")
    parser.add_argument("--wall_time", default="", help="the run's wall time, as printed")
    args = parser.parse_args()
    if args.keep:
        if not (args.out and args.command):
            parser.error("--keep needs --out and --command")
        keep(args.keep, args.out, args.command, args.wall_time)
        print(f"wrote {args.out}")
        return 0
    problems, counts = [], {}
    for readme in readmes():
        for t in tables(readme):
            counts[t.kind or "unmarked"] = counts.get(t.kind or "unmarked", 0) + 1
            problems.extend(check(t))
            print(f"{os.path.relpath(readme, ROOT)}:{t.line}: {t.kind or 'UNMARKED'}: "
                  f"{t.source}")
    print(f"tables: {counts}")
    print("\n".join(problems) or "every backed table matches its results file")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
