"""Checks a whole Touchdown release before a run: every file read to the end, every problem named.

`validate_release(manual_dir, graph_dir)` reads what the builders and trainers read:

* the graph (`nodes.txt`, `links.txt`) with its readers' checks;
* every record file of `RECORD_FILES` present (navigation and SDR fields); with the graph, every
  route panorama known and every consecutive pair linked;
* every SDR feature map `features/<panoid>.npy`: the header, the bytes it announces, the shape
  most maps have (or `feature_shape`), and (unless `bodies=False`) the whole body, finite; the
  panoramas the records' views name that have no file.

Unlike a run, which stops at the first bad file, it reports one line per bad file (file, then
line or field) and goes on.
"""
from __future__ import annotations

import os
from collections import Counter
from typing import Sequence

import numpy as np

from ttw_jax.core.records import RecordFormatError, check_npy_size, damaged
from ttw_jax.touchdown import records as tr
from ttw_jax.touchdown.graph import read_graph_files

# split -> record file name in the release's data folder
RECORD_FILES = {"train": "train.json", "dev": "dev.json", "test": "test.json",
                "dev_sample": "touchdown_unseen_dev_sample.json"}
ERRORS = (RecordFormatError, ValueError, OSError)


def _linked(links) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a, _, b in links:
        out.setdefault(a, set()).add(b)
    return out


def check_routes(path: str, records: Sequence[dict], nodes: set[str],
                 out: dict[str, set[str]]) -> str | None:
    """The first route problem of a record file against the graph: a panorama not in
    `nodes.txt` or two consecutive panoramas no link joins (None when there is none)."""
    for rec in records:
        route = rec["route_panoids"]
        unknown = [p for p in route if p not in nodes]
        if unknown:
            return (f"{path}: route_id {rec['route_id']}: field 'route_panoids': panoid "
                    f"{unknown[0]!r} not in the graph")
        for a, b in zip(route, route[1:]):
            if b not in out.get(a, ()):
                return (f"{path}: route_id {rec['route_id']}: field 'route_panoids': consecutive "
                        f"panoramas {a} -> {b} are not linked")
    return None


def check_feature_file(path: str, shape: tuple | None, bodies: bool = True) -> tuple:
    """The shape of one `<panoid>.npy` feature map after checking it (ValueError naming it)."""
    got, dtype = check_npy_size(path, ValueError)
    if shape is not None and got != tuple(shape):
        raise ValueError(f"{path}: shape {got}, expected {tuple(shape)} (like the other maps)")
    if dtype.kind not in "fiu":
        raise ValueError(f"{path}: dtype {dtype}, expected float (float16)")
    if bodies:
        with damaged(path, ValueError):
            x = np.load(path, allow_pickle=False)
        if not np.isfinite(x).all():
            raise ValueError(f"{path}: non-finite values (NaN or inf) in the feature map")
    return got


def _common_shape(feature_dir: str, names: Sequence[str]) -> tuple | None:
    """The shape most feature maps' headers announce (the reference for the others)."""
    shapes = Counter()
    for f in names:
        try:
            shapes[check_npy_size(os.path.join(feature_dir, f), ValueError)[0]] += 1
        except ERRORS:
            continue
    return shapes.most_common(1)[0][0] if shapes else None


def validate_release(manual_dir: str, graph_dir: str | None = None, bodies: bool = True,
                     feature_shape: Sequence[int] | None = None, sdr: bool = True
                     ) -> tuple[list[str], int]:
    """(problems, files checked): one line per bad file, in the order above. `sdr=False` checks
    the records' navigation fields only (files without the SDR annotations)."""
    problems, checked, graph = [], 0, None
    if graph_dir:
        checked += 2
        try:
            nodes, links = read_graph_files(graph_dir)
            graph = ({n[0] for n in nodes}, _linked(links))
        except ERRORS as e:
            problems.append(str(e))
    views, found = set(), 0
    for name in RECORD_FILES.values():
        path = os.path.join(manual_dir, name)
        if not os.path.exists(path):
            continue
        found += 1
        checked += 1
        try:
            recs = tr.read_records(path, sdr=sdr)
        except ERRORS as e:
            problems.append(str(e))
            continue
        if sdr:
            views |= {v["panoid"] for rec in recs for v in tr.sdr_examples(rec)}
        problem = check_routes(path, recs, *graph) if graph is not None else None
        if problem:
            problems.append(problem)
    if not found:
        problems.append(f"{manual_dir}: no record file (expected any of "
                        f"{', '.join(RECORD_FILES.values())}). {tr.SOURCE_HINT}")
    feature_dir = os.path.join(manual_dir, "features")
    if os.path.isdir(feature_dir):
        names = sorted(f for f in os.listdir(feature_dir) if f.endswith(".npy"))
        shape = tuple(feature_shape) if feature_shape else _common_shape(feature_dir, names)
        for f in names:
            checked += 1
            try:
                check_feature_file(os.path.join(feature_dir, f), shape, bodies)
            except ERRORS as e:
                problems.append(str(e))
        missing = sorted(views - {f[:-4] for f in names})
        if missing:
            problems.append(f"{feature_dir}: no feature map for {len(missing)} panoramas the "
                            f"records' views name, e.g. {missing[:3]}")
    return problems, checked
