"""Touchdown records (the official JSON-lines schema): reading, validation and conversion.

A record is one JSON object per line, as in the official `data/{train,dev,test}.json`. The
navigation task needs `route_id`, `navigation_text`, `route_panoids`, `start_heading` and
`end_heading`; spatial description resolution (SDR) also needs `td_location_text` and, for each
view `v` in main / pre / post, `v_pano`, `v_heading` (a number or a numeric string, as in the
release, which leaves some empty: NaN then) and `v_static_center` (a JSON string
`{"x": .., "y": ..}` with coordinates in [0, 1], or `{"x": -1, "y": -1}` when Touchdown is not
visible in that view).
"""
from __future__ import annotations

import json
import math
from typing import Any, Callable, Mapping, Sequence

from ttw_jax.core import records as core

SOURCE_HINT = ("Touchdown records are in the official release: github.com/lil-lab/touchdown, "
               "`data/train.json`, `data/dev.json`, `data/test.json`.")
NAVIGATION_FIELDS = ("route_id", "navigation_text", "route_panoids", "start_heading",
                     "end_heading")
VIEWS = ("main", "pre", "post")
SDR_FIELDS = ("td_location_text",) + tuple(f"{v}_{f}" for v in VIEWS
                                           for f in ("pano", "heading", "static_center"))


class RecordFormatError(core.RecordFormatError):
    """A record file exists but a line does not parse; the message names file, line and field."""


def _navigation(f: core.Fields) -> dict:
    return {"route_id": f.int("route_id"),
            "navigation_text": _text(f, "navigation_text"),
            "route_panoids": list(f.get("route_panoids", core.list_of(core.is_file_stem, 2),
                                        "a list of >= 2 non-empty strings")),
            "start_heading": float(f.get("start_heading", is_heading, HEADING)),
            "end_heading": float(f.get("end_heading", is_heading, HEADING))}


HEADING = f"a heading: {core.QUANTITIES['degrees'][2]}"


def is_heading(v) -> bool:
    """A heading under the shared rule for angles in degrees (`core.QUANTITIES`)."""
    return core.quantity_problem(v, "degrees") is None


def _text(f: core.Fields, name: str) -> str:
    """A string with a non-blank character (an empty instruction or description trains on
    nothing)."""
    return f.get(name, lambda v: core.is_string(v) and v.strip() != "",
                 "a string with text (not empty or blank)")


def _heading(f: core.Fields, name: str) -> float:
    """A number or numeric string; NaN when empty (the release leaves some headings empty, also
    of visible views)."""
    v = f.get(name)
    if v == "":
        return math.nan
    try:
        x = float(v) if isinstance(v, str) else v
    except ValueError:
        x = None
    if not is_heading(x):
        raise f.bad(name, HEADING + " or a numeric string", v)
    return float(x)


def _center(f: core.Fields, name: str) -> tuple[float, float] | None:
    """(x, y) of a `*_static_center` JSON string; None when not visible (x == y == -1)."""
    raw = f.get(name)
    what = 'a JSON string {"x": <number>, "y": <number>}'
    try:
        c = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        c = None
    if not (isinstance(c, dict) and core.is_number(c.get("x")) and core.is_number(c.get("y"))):
        raise f.bad(name, what, raw)
    x, y = float(c["x"]), float(c["y"])
    if x == -1 and y == -1:
        return None
    if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):
        raise f.bad(name, "a centre in [0, 1] x [0, 1] (or x = y = -1)", raw)
    return x, y


def _sdr(f: core.Fields, route_id: int) -> list[dict]:
    text = _text(f, "td_location_text")
    out = []
    for v in VIEWS:
        pano = f.string(f"{v}_pano")
        heading = _heading(f, f"{v}_heading")
        center = _center(f, f"{v}_static_center")
        if center is None:
            continue
        if not core.is_file_stem(pano):
            raise f.bad(f"{v}_pano", "a non-empty panoid without path separators (the view is "
                                     "visible)", pano)
        out.append({"route_id": route_id, "which": v, "panoid": pano, "heading": heading,
                    "center_x": center[0], "center_y": center[1], "td_location_text": text})
    return out


def _fields(rec: Mapping[str, Any], where: str | None = None) -> core.Fields:
    where = where or f"record (route_id {rec.get('route_id')!r})"
    return core.Fields(rec, where, RecordFormatError)


def read_records(path: str, sdr: bool = False) -> list[dict]:
    """The records (raw dicts, file order) of a JSON-lines file; blank lines are skipped.

    Always validates the navigation fields, and the SDR fields too when `sdr`. Raises
    FileNotFoundError for a missing file and RecordFormatError ("{path}:{line}: ...", naming the
    field) for a malformed line or a route_id repeated within the file.
    """
    records: list[dict] = []
    seen: dict[int, int] = {}
    for where, line_no, rec in core.read_jsonl(path, RecordFormatError, SOURCE_HINT):
        f = _fields(rec, where)
        route_id = _navigation(f)["route_id"]
        if sdr:
            _sdr(f, route_id)
        if route_id in seen:
            raise RecordFormatError(f"{where}: field 'route_id' {route_id} repeats line "
                                    f"{seen[route_id]}")
        seen[route_id] = line_no
        records.append(rec)
    return records


def navigation_example(rec: Mapping[str, Any]) -> dict:
    """{route_id: int, navigation_text: str, route_panoids: list[str], start_heading: float,
    end_heading: float} of one record (RecordFormatError if malformed)."""
    return _navigation(_fields(rec))


def sdr_examples(rec: Mapping[str, Any]) -> list[dict]:
    """One dict per view (main, pre, post order) where Touchdown is visible: {route_id: int,
    which: 'main'|'pre'|'post', panoid: str, heading: float (NaN if empty), center_x: float,
    center_y: float (both in [0, 1], from `*_static_center`), td_location_text: str}; 0-3 dicts.
    """
    f = _fields(rec)
    return _sdr(f, _navigation(f)["route_id"])


def check_panoids(records: Sequence[Mapping[str, Any]], node_index: Mapping[str, int],
                  where: str, locate: Callable[[Mapping[str, Any]], str] | None = None) -> None:
    """Raises RecordFormatError "{location}: field 'route_panoids': panoid .. not in the graph"
    for the first route panoid missing from `node_index`; the location is `locate(record)` (its
    file and line) when given, else "{where}, route_id ..". Only `route_panoids` are checked:
    the official data has SDR `pre_pano`s that are off the graph."""
    for rec in records:
        for p in rec["route_panoids"]:
            if p not in node_index:
                at = locate(rec) if locate else f"{where}, route_id {rec.get('route_id')!r}"
                raise RecordFormatError(f"{at}: field 'route_panoids': panoid {p!r} not in the "
                                        f"graph ({len(node_index)} nodes)")
