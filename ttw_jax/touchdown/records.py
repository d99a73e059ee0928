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
import os
from typing import Any, Mapping, Sequence

SOURCE_HINT = ("Touchdown records are in the official release: github.com/lil-lab/touchdown, "
               "`data/train.json`, `data/dev.json`, `data/test.json`.")
NAVIGATION_FIELDS = ("route_id", "navigation_text", "route_panoids", "start_heading",
                     "end_heading")
VIEWS = ("main", "pre", "post")
SDR_FIELDS = ("td_location_text",) + tuple(f"{v}_{f}" for v in VIEWS
                                           for f in ("pano", "heading", "static_center"))


class RecordFormatError(ValueError):
    """A record file exists but a line does not parse; the message names file, line and field."""


def _field(rec: Mapping[str, Any], name: str, where: str) -> Any:
    if name not in rec:
        raise RecordFormatError(f"{where}: missing field '{name}'")
    return rec[name]


def _bad(where: str, name: str, what: str, value: Any) -> RecordFormatError:
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return RecordFormatError(f"{where}: field '{name}' is not {what}: {shown}")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _number(rec, name: str, where: str, allow_str: bool = False) -> float:
    v = _field(rec, name, where)
    if allow_str and isinstance(v, str):
        try:
            x = float(v)
        except ValueError:
            raise _bad(where, name, "a number", v) from None
    elif _is_number(v):
        x = float(v)
    else:
        raise _bad(where, name, "a number" + (" or numeric string" if allow_str else ""), v)
    if not math.isfinite(x):
        raise _bad(where, name, "a finite number", v)
    return x


def _string(rec, name: str, where: str) -> str:
    v = _field(rec, name, where)
    if not isinstance(v, str):
        raise _bad(where, name, "a string", v)
    return v


def _navigation(rec: Mapping[str, Any], where: str) -> dict:
    route_id = _field(rec, "route_id", where)
    if not isinstance(route_id, int) or isinstance(route_id, bool):
        raise _bad(where, "route_id", "an integer", route_id)
    panos = _field(rec, "route_panoids", where)
    if (not isinstance(panos, list) or len(panos) < 2
            or not all(isinstance(p, str) and p for p in panos)):
        raise _bad(where, "route_panoids", "a list of >= 2 non-empty strings", panos)
    return {"route_id": route_id,
            "navigation_text": _string(rec, "navigation_text", where),
            "route_panoids": list(panos),
            "start_heading": _number(rec, "start_heading", where),
            "end_heading": _number(rec, "end_heading", where)}


def _center(rec, name: str, where: str) -> tuple[float, float] | None:
    """(x, y) of a `*_static_center` JSON string; None when not visible (x == y == -1)."""
    raw = _field(rec, name, where)
    what = 'a JSON string {"x": <number>, "y": <number>}'
    if not isinstance(raw, str):
        raise _bad(where, name, what, raw)
    try:
        c = json.loads(raw)
    except json.JSONDecodeError:
        raise _bad(where, name, what, raw) from None
    if (not isinstance(c, dict) or not _is_number(c.get("x")) or not _is_number(c.get("y"))):
        raise _bad(where, name, what, raw)
    x, y = float(c["x"]), float(c["y"])
    if x == -1 and y == -1:
        return None
    if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):
        raise _bad(where, name, "a centre in [0, 1] x [0, 1] (or x = y = -1)", raw)
    return x, y


def _sdr(rec: Mapping[str, Any], where: str, route_id: int) -> list[dict]:
    text = _string(rec, "td_location_text", where)
    out = []
    for v in VIEWS:
        pano = _string(rec, f"{v}_pano", where)
        # The release leaves some headings empty (also of visible views): NaN.
        heading = (math.nan if _field(rec, f"{v}_heading", where) == "" else
                   _number(rec, f"{v}_heading", where, allow_str=True))
        center = _center(rec, f"{v}_static_center", where)
        if center is None:
            continue
        if not pano:
            raise _bad(where, f"{v}_pano", "a non-empty panoid (the view is visible)", pano)
        out.append({"route_id": route_id, "which": v, "panoid": pano, "heading": heading,
                    "center_x": center[0], "center_y": center[1], "td_location_text": text})
    return out


def read_records(path: str, sdr: bool = False) -> list[dict]:
    """The records (raw dicts, file order) of a JSON-lines file; blank lines are skipped.

    Always validates the navigation fields, and the SDR fields too when `sdr`. Raises
    FileNotFoundError for a missing file and RecordFormatError ("{path}:{line}: ...", naming the
    field) for a malformed line or a route_id repeated within the file.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"Touchdown record file missing: {path}. {SOURCE_HINT}")
    records: list[dict] = []
    seen: dict[int, int] = {}
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise RecordFormatError(f"{where}: invalid JSON ({e.msg} at column {e.colno})"
                                        ) from None
            if not isinstance(rec, dict):
                raise RecordFormatError(f"{where}: expected a JSON object, got "
                                        f"{type(rec).__name__}")
            nav = _navigation(rec, where)
            if sdr:
                _sdr(rec, where, nav["route_id"])
            if nav["route_id"] in seen:
                raise RecordFormatError(f"{where}: field 'route_id' {nav['route_id']} repeats "
                                        f"line {seen[nav['route_id']]}")
            seen[nav["route_id"]] = line_no
            records.append(rec)
    return records


def navigation_example(rec: Mapping[str, Any]) -> dict:
    """{route_id: int, navigation_text: str, route_panoids: list[str], start_heading: float,
    end_heading: float} of one record (RecordFormatError if malformed)."""
    return _navigation(rec, f"record (route_id {rec.get('route_id')!r})")


def sdr_examples(rec: Mapping[str, Any]) -> list[dict]:
    """One dict per view (main, pre, post order) where Touchdown is visible: {route_id: int,
    which: 'main'|'pre'|'post', panoid: str, heading: float (NaN if empty), center_x: float,
    center_y: float (both in [0, 1], from `*_static_center`), td_location_text: str}; 0-3 dicts.
    """
    where = f"record (route_id {rec.get('route_id')!r})"
    return _sdr(rec, where, _navigation(rec, where)["route_id"])


def check_panoids(records: Sequence[Mapping[str, Any]], node_index: Mapping[str, int],
                  path: str) -> None:
    """Raises RecordFormatError "{path}: record {i} (route_id ..): panoid .. not in the graph" for
    the first route panoid missing from `node_index` (i counts records from 0). Only
    `route_panoids` are checked: the official data has SDR `pre_pano`s that are off the graph."""
    for i, rec in enumerate(records):
        for p in rec["route_panoids"]:
            if p not in node_index:
                raise RecordFormatError(f"{path}: record {i} (route_id {rec.get('route_id')!r}): "
                                        f"panoid {p!r} not in the graph ({len(node_index)} "
                                        f"nodes)")
