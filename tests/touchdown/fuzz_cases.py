"""The Touchdown release of the fuzz corpus (`tests/fuzz.py`): three real records of
`touchdown_unseen_dev_sample.json` (and two more as `train.json`), the subgraph of the real graph
around their routes, and small SDR feature maps `features/<panoid>.npy` (not shipped: float16
ReLU activations, `FEATURE_SHAPE`) for their visible views; each case damages one file or field.
"""
from __future__ import annotations

import json
import pathlib

import numpy as np

from tests.conftest import shared_path
from tests.fuzz import (DELETE, Case, Release, append, blank_line, duplicate_item, edit_json,
                        edit_npy, edit_text, file_damage, planted, set_field)

DEV = "touchdown_unseen_dev_sample.json"
TRAIN = "train.json"
NODES, LINKS = "graph/nodes.txt", "graph/links.txt"
DEV_LINES, TRAIN_LINES = (0, 1, 2), (3, 4)          # lines of the shared sample
FEATURE = "features/9EbO37MRG3_KnPvsCeDR8g.npy"     # the main view of the sample's first record
FEATURE_SHAPE = (4, 8, 2)


def _write_lines(path: pathlib.Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def build(root: pathlib.Path) -> None:
    """The clean release: records, the graph around their routes (the routes' panoramas and
    their neighbours, every link between them) and one feature map per visible view."""
    sample = pathlib.Path(shared_path("touchdown", DEV)).read_text("utf-8").splitlines()
    graph = pathlib.Path(shared_path("touchdown", "graph"))
    _write_lines(root / DEV, [sample[i] for i in DEV_LINES])
    _write_lines(root / TRAIN, [sample[i] for i in TRAIN_LINES])
    records = [json.loads(sample[i]) for i in DEV_LINES + TRAIN_LINES]
    route = {p for rec in records for p in rec["route_panoids"]}
    links = [line for line in (graph / "links.txt").read_text().splitlines()
             if line.split(",")[0] in route or line.split(",")[2] in route]
    keep = route | {p for line in links for p in line.split(",")[::2]}
    _write_lines(root / NODES, [line for line in (graph / "nodes.txt").read_text().splitlines()
                                if line.split(",", 1)[0] in keep])
    _write_lines(root / LINKS, links)
    rng = np.random.default_rng(0)
    (root / "features").mkdir()
    for rec in records:
        for view in ("main", "pre", "post"):
            if json.loads(rec[f"{view}_static_center"])["x"] != -1:
                x = np.maximum(rng.standard_normal(FEATURE_SHAPE), 0).astype(np.float16)
                np.save(root / "features" / f"{rec[f'{view}_pano']}.npy", x)
    assert (root / FEATURE).is_file(), FEATURE


def flags(root: pathlib.Path) -> dict:
    return {"data_dir": str(root), "graph_dir": str(root / "graph")}


def edit_csv(line: int, field: int, value: str):
    """Sets comma-separated field `field` of line `line` (from 0) of a graph file."""
    def edit(lines):
        parts = lines[line].split(",")
        parts[field] = value
        return lines[:line] + [",".join(parts)] + lines[line + 1:]
    return edit_text(edit)


def self_link(lines: list[str]) -> list[str]:
    """Line 2 of `links.txt` turned into a link from its start panorama to itself."""
    a, h, _ = lines[1].split(",")
    return lines[:1] + [f"{a},{h},{a}"] + lines[2:]


def _route(make):
    """Sets record 1's `route_panoids` to `make(its route)`."""
    def edit(data):
        data[1]["route_panoids"] = make(data[1]["route_panoids"])
    return edit_json(edit)


def _delete(path: pathlib.Path) -> None:
    path.unlink()


NUMBER_VALUES = {"deleted": DELETE, "a string": "0", "NaN": float("nan"), "inf": float("inf"),
                 "-inf": float("-inf"), "1e300": 1e300, "1000": 1000.0, "-1000": -1000.0,
                 "null": None, "a bool": True}


def record_cases() -> list[Case]:
    """Each field of the second record of the sample (line 2) damaged in turn."""
    fields = {
        "route_id": {"deleted": DELETE, "a string": "7", "a float": 1.5, "2**40": 2**40,
                     "a bool": True, "null": None},
        "navigation_text": {"deleted": DELETE, "a number": 5, "empty": "", "blank": "   ",
                            "null": None, "a list": ["go"]},
        "route_panoids": {"deleted": DELETE, "empty": [], "a string": "abc", "one panorama": ["a"],
                          "a number in it": ["a", 5], "a path": ["a", "../b"]},
        "start_heading": NUMBER_VALUES, "end_heading": NUMBER_VALUES,
        "td_location_text": {"deleted": DELETE, "a number": 5, "empty": "", "blank": " \n "},
        "main_pano": {"deleted": DELETE, "empty": "", "a path": "../x", "a number": 5},
        "main_heading": {"deleted": DELETE, "a word": "north", "'1e300'": "1e300", "'nan'": "nan",
                         "1e300": 1e300, "'inf'": "inf", "'1000'": "1000"},
        "main_static_center": {"deleted": DELETE, "not JSON": "x=0.5", "x = 2": '{"x":2,"y":0.5}',
                               "NaN": '{"x":NaN,"y":0.5}', "no y": '{"x":0.5}',
                               "an object": {"x": 0.5, "y": 0.5}},
        "pre_static_center": {"1e300": '{"x":1e300,"y":0.5}'},
    }
    cases = []
    for field, values in fields.items():
        for what, value in values.items():
            cases.append(Case(f"{DEV}: record 2: {field} {what}", DEV, set_field(1, field, value),
                              f":2: (field|missing field) '{field}'"))
    route = r"route_id \d+: field 'route_panoids'"
    cases += [
        Case(f"{DEV}: a self-link in a route", DEV, _route(lambda r: [r[0], r[0]] + r[1:]), route),
        Case(f"{DEV}: a route panorama off the graph", DEV, _route(lambda r: r + ["ghost"]), route),
        Case(f"{DEV}: a route step no link joins", DEV, _route(lambda r: [r[0], r[-1]]), route),
        Case(f"{DEV}: a record repeated", DEV, duplicate_item(0), ":4: field 'route_id'"),
        Case(f"{DEV}: a record not an object", DEV,
             edit_json(lambda data: data[:1] + [[1, 2]] + data[2:]), ":2: expected a JSON object"),
        Case(f"{TRAIN}: record 1: navigation_text empty", TRAIN,
             set_field(0, "navigation_text", ""), ":1: field 'navigation_text'"),
        Case(f"{TRAIN}: record 1: end_heading 1e300", TRAIN, set_field(0, "end_heading", 1e300),
             ":1: field 'end_heading'"),
    ]
    return cases


def graph_cases() -> list[Case]:
    node = lambda field: f"nodes.txt:2: field '{field}'"   # noqa: E731
    link = lambda field: f"links.txt:2: field '{field}'"   # noqa: E731
    cases = [Case(f"{NODES}: yaw {v}", NODES, edit_csv(1, 1, v), node("pano_yaw_angle"))
             for v in ("nan", "inf", "1e300", "1000", "north", "")]
    cases += [Case(f"{NODES}: lat {v}", NODES, edit_csv(1, 2, v), node("lat"))
              for v in ("nan", "1e300", "91")]
    cases += [Case(f"{NODES}: lng {v}", NODES, edit_csv(1, 3, v), node("lng"))
              for v in ("-inf", "181")]
    cases += [Case(f"{LINKS}: heading {v}", LINKS, edit_csv(1, 1, v), link("heading"))
              for v in ("nan", "1e300", "1000", "90.5", "north")]
    cases += [
        Case(f"{NODES}: a blank line", NODES, blank_line(3), "nodes.txt:4: a blank line"),
        Case(f"{NODES}: a panoid repeated", NODES, edit_text(lambda ls: ls + ls[:1]),
             r"nodes.txt:\d+: field 'panoid'.*repeats line 1"),
        Case(f"{NODES}: a field missing", NODES, edit_text(lambda ls: ls[:1] + [ls[1].rsplit(
            ",", 1)[0]] + ls[2:]), "nodes.txt:2: expected 4"),
        Case(f"{LINKS}: a blank line", LINKS, blank_line(2), "links.txt:3: a blank line"),
        Case(f"{LINKS}: a self-link", LINKS, edit_text(self_link), link("end_panoid") +
             ": a self-link"),
        Case(f"{LINKS}: a link repeated", LINKS, edit_text(lambda ls: ls + ls[:1]),
             r"links.txt:\d+: field 'end_panoid'.*repeats line 1"),
        Case(f"{LINKS}: an unknown start", LINKS, edit_csv(1, 0, "ghost"), link("start_panoid")),
        Case(f"{LINKS}: an unknown end", LINKS, edit_csv(1, 2, "ghost"), link("end_panoid")),
        Case(f"{LINKS}: a field missing", LINKS, edit_text(lambda ls: ls[:1] + [ls[1].rsplit(
            ",", 1)[0]] + ls[2:]), "links.txt:2: expected 3"),
    ]
    return cases


def feature_cases() -> list[Case]:
    shape = np.zeros(FEATURE_SHAPE, np.float16)
    return [
        Case(f"{FEATURE}: NaN", FEATURE, edit_npy(lambda x: planted(x, np.nan)),
             r"non-finite value nan at index \(2, 0, 0\)"),
        Case(f"{FEATURE}: inf", FEATURE, edit_npy(lambda x: planted(x, np.inf)), "non-finite"),
        Case(f"{FEATURE}: float64 1e300", FEATURE,
             edit_npy(lambda x: planted(x, 1e300, np.float64)), "not finite as float16"),
        Case(f"{FEATURE}: float32 1e6", FEATURE,
             edit_npy(lambda x: planted(x, 1e6, np.float32)), "not finite as float16"),
        Case(f"{FEATURE}: another shape", FEATURE, edit_npy(lambda x: x[:, :, :1]),
             r"shape \(4, 8, 1\), expected \(4, 8, 2\)"),
        Case(f"{FEATURE}: integers", FEATURE, edit_npy(lambda x: x.astype(np.int8)),
             "dtype int8, expected floating point"),
        Case(f"{FEATURE}: booleans", FEATURE, edit_npy(lambda x: x > 0), "dtype bool"),
        Case(f"{FEATURE}: complex", FEATURE, edit_npy(lambda x: x.astype(np.complex64)),
             "dtype complex64"),
        Case(f"{FEATURE}: bytes appended", FEATURE, append(b"\x00garbage"),
             "8 bytes after the array"),
        Case(f"{FEATURE}: a second array appended", FEATURE, append(shape.tobytes()),
             "bytes after the array"),
        Case(f"{FEATURE}: removed", FEATURE, _delete, "no such file: the feature map of a view of "
             rf".*{DEV}:1"),
    ]


def cases() -> list[Case]:
    return ([c for f in (DEV, TRAIN, NODES, LINKS, FEATURE) for c in file_damage(f)]
            + record_cases() + graph_cases() + feature_cases())


RELEASE = Release("touchdown", build, flags, cases)
