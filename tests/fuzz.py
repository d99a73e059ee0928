"""The fuzz corpus of `experiments.validate`: damaged copies of a small, clean release per system,
built from the real files in `../shared/data` (or the releases' documented layouts where a file
is not shipped there), each expected to be named by one `validate` pass with its file and its
line, entry or field.

A system's `tests/<system>/fuzz_cases.py` defines `RELEASE`, a `Release`: how to write its clean
folder, the `experiments.validate.report` arguments for it, and its `Case`s, mostly generated from
the mutations below applied to each file and field. `tests/core/test_fuzz_corpus.py` runs them;
`python -m tests.core.test_fuzz_corpus` prints the counts (named / total, silent, unnamed,
crashed) per release.
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import pathlib
import re
import shutil
from typing import Any, Callable

import numpy as np

from experiments import validate

Mutation = Callable[[pathlib.Path], None]   # damages the file at the path it is given


@dataclasses.dataclass(frozen=True)
class Case:
    name: str        # unique within its release
    file: str        # the damaged file, relative to the release folder; its problem names it
    mutate: Mutation
    where: str = ""  # a regex the problem line also matches (line, entry or field)


@dataclasses.dataclass(frozen=True)
class Release:
    name: str                                          # `experiments.validate --dataset`
    build: Callable[[pathlib.Path], None]              # writes the clean release into a folder
    flags: Callable[[pathlib.Path], dict]              # `validate.report` keywords for a folder
    cases: Callable[[], list[Case]]


# ----------------------------------------------------------------------------- mutations

def flip_bytes(count: int = 16, at: float = 0.5) -> Mutation:
    """Inverts `count` bytes starting at the fraction `at` of the file."""
    def mutate(path):
        data = bytearray(path.read_bytes())
        start = min(int(len(data) * at), max(len(data) - count, 0))
        for i in range(start, min(start + count, len(data))):
            data[i] ^= 0xFF
        path.write_bytes(bytes(data))
    return mutate


def truncate(fraction: float = 0.5) -> Mutation:
    def mutate(path):
        data = path.read_bytes()
        path.write_bytes(data[:int(len(data) * fraction)])
    return mutate


def append(extra: bytes = b"\x00garbage") -> Mutation:
    def mutate(path):
        path.write_bytes(path.read_bytes() + extra)
    return mutate


def empty(path: pathlib.Path) -> None:
    path.write_bytes(b"")


def _load(path: pathlib.Path) -> tuple[Any, bool, bool]:
    """(content, gzipped, JSON lines) of a JSON or JSON-lines file."""
    raw = path.read_bytes()
    gz = raw[:2] == b"\x1f\x8b"
    text = (gzip.decompress(raw) if gz else raw).decode("utf-8")
    if not path.name.endswith((".jsonl", ".jsonl.gz")):
        try:
            return json.loads(text), gz, False
        except json.JSONDecodeError:   # JSON lines named `.json` (Touchdown's record files)
            pass
    return [json.loads(line) for line in text.splitlines() if line.strip()], gz, True


def _dump(path: pathlib.Path, data: Any, gz: bool, lines: bool) -> None:
    text = ("".join(json.dumps(r) + "\n" for r in data) if lines else json.dumps(data))
    raw = text.encode("utf-8")
    path.write_bytes(gzip.compress(raw) if gz else raw)


def edit_json(edit: Callable[[Any], Any]) -> Mutation:
    """Rewrites a JSON / JSON-lines (optionally gzipped) file in its own form with
    `edit(content)` (which may change `content` in place and return None)."""
    def mutate(path):
        data, gz, lines = _load(path)
        out = edit(data)
        _dump(path, data if out is None else out, gz, lines)
    return mutate


def set_field(index: int | str | None, field: str, value: Any) -> Mutation:
    """Sets `field` (`a.b` walks objects, `a.0` lists) of item `index` of the top level (None: the
    top level itself) to `value`; `DELETE` removes it."""
    def edit(data):
        target = data if index is None else data[index]
        *parents, last = field.split(".")
        for p in parents:
            target = target[int(p)] if isinstance(target, list) else target[p]
        if value is DELETE:
            del target[int(last) if isinstance(target, list) else last]
        elif isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
    return edit_json(edit)


DELETE = object()


def duplicate_item(index: int = 0) -> Mutation:
    """Appends a copy of item `index` of a top-level list."""
    return edit_json(lambda data: data + [data[index]])


def edit_text(edit: Callable[[list[str]], list[str]]) -> Mutation:
    """Rewrites a text file's lines (without newlines)."""
    def mutate(path):
        path.write_text("\n".join(edit(path.read_text(encoding="utf-8").splitlines())) + "\n",
                        encoding="utf-8")
    return mutate


def blank_line(at: int = 1) -> Mutation:
    return edit_text(lambda lines: lines[:at] + [""] + lines[at:])


def edit_npy(edit: Callable[[np.ndarray], np.ndarray]) -> Mutation:
    """Rewrites an `.npy` file with `edit(array)`."""
    def mutate(path):
        np.save(path, edit(np.load(path)), allow_pickle=False)
    return mutate


def edit_npz(key: str, edit: Callable[[np.ndarray], np.ndarray]) -> Mutation:
    """Rewrites member `key` of an `.npz` with `edit(array)`, the others unchanged."""
    def mutate(path):
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        arrays[key] = edit(arrays[key])
        with open(path, "wb") as f:
            np.savez(f, **arrays)
    return mutate


def planted(array: np.ndarray, value: float, dtype: Any = None) -> np.ndarray:
    """A copy of `array` (as `dtype`) with its middle element set to `value`."""
    out = np.array(array, dtype=dtype or array.dtype)
    out.flat[out.size // 2] = value
    return out


def file_damage(file: str, prefix: str = "") -> list[Case]:
    """The byte-level cases every file gets: flipped bytes in the middle, truncated, emptied."""
    return [Case(f"{prefix}{file}: 16 bytes flipped", file, flip_bytes()),
            Case(f"{prefix}{file}: truncated", file, truncate()),
            Case(f"{prefix}{file}: empty", file, empty)]


# ----------------------------------------------------------------------------- running

def report(release: Release, root: pathlib.Path) -> tuple[list[str], int]:
    """(problem lines, count) of one `validate` pass over the folder `root`."""
    text, count = validate.report(release.name, **release.flags(root))
    return [line.strip() for line in text.splitlines()[1:]], count


def outcome(release: Release, case: Case, base: pathlib.Path, work: pathlib.Path
            ) -> tuple[str, list[str]]:
    """("named" | "unnamed" | "silent" | "crashed: ...", problem lines) of `case` on a copy of
    the clean folder `base` made at `work`."""
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(base, work)
    case.mutate(work / case.file)
    try:
        lines, count = report(release, work)
    except Exception as e:   # noqa: BLE001 (a crash is an outcome to count)
        return f"crashed: {type(e).__name__}: {str(e)[:200]}", []
    if not count:
        return "silent", lines
    path = str(work / case.file)
    if any(path in line and re.search(case.where, line) for line in lines):
        return "named", lines
    return "unnamed", lines
