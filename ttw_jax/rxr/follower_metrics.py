"""The follower metrics an RxR release stores, recomputed and compared (`python -m
experiments.validate --dataset=rxr`).

Each line of `rxr_{split}_follower.jsonl.gz` carries `metrics` {ne, sr, spl, dtw, ndtw, sdtw}:
the follower's `path` scored by the RxR authors against the path of the guide annotation with
the same `instruction_id`. `check_follower_metrics` recomputes them with `metrics.path_metrics_np`
over the trainer's geodesics (`graph.geodesic_table` of the connectivity graphs; with `house_dir`
each edge measured between the `.house` panorama centres, `house.edge_lengths`; success radius
3 m, strict) and counts, per split and metric, the stored values within `TOLERANCES` of the
recomputed ones, listing the worst cases.

Tolerances: the release stores full doubles, so any difference comes from the distances. The
geodesic table is float32 (relative error about 1e-7, 1e-4 m over a 100 m DTW), while measuring
edges between other points (camera poses against panorama centres) moves each by centimetres: 1 cm
for the distances (ne, dtw, in metres) and 1e-3 for the ratios (spl, ndtw, sdtw) and sr (0 or 1,
so exact) separate the two. A case's rank among the worst is its difference in tolerances.

The files are streamed line by line (the release's follower files hold over 100,000); a line
that does not parse, lacks a field, names a viewpoint off the graph, or whose guide annotation is
absent is counted under its reason with its file and line, never raised; a stored value that is
missing or not a number is counted per metric, and its record's other metrics are still compared.
"""
from __future__ import annotations

import dataclasses
import heapq
import json
import os
import sys
from collections import Counter
from typing import Iterator, Sequence

import numpy as np

from ttw_jax.core import records as core
from ttw_jax.core.pano_graph import NodeTable
from ttw_jax.rxr import house, records as rr
from ttw_jax.rxr.graph import geodesic_table, load_matterport_graph, read_connectivity
from ttw_jax.rxr.metrics import path_metrics_np
from ttw_jax.rxr.validate import CONNECTIVITY_SUFFIX, ERRORS, annotation_files

STORED = ("ne", "sr", "spl", "dtw", "ndtw", "sdtw")
TOLERANCES = {"ne": 1e-2, "sr": 1e-3, "spl": 1e-3, "dtw": 1e-2, "ndtw": 1e-3, "sdtw": 1e-3}
METRES = ("ne", "dtw")
SUCCESS_RADIUS = 3.0   # metres: the release's sr is "ne less than 3 meters"
WORST = 10             # cases listed per split
EXAMPLES = 3           # lines named per reason


@dataclasses.dataclass(order=True)
class Case:
    """A stored metric that disagrees: `score` is |stored - recomputed| / tolerance."""
    score: float
    instruction_id: int = dataclasses.field(compare=False)
    metric: str = dataclasses.field(compare=False)
    stored: float = dataclasses.field(compare=False)
    recomputed: float = dataclasses.field(compare=False)
    where: str = dataclasses.field(compare=False)

    def line(self) -> str:
        return (f"instruction_id {self.instruction_id} ({self.where}): {self.metric} stored "
                f"{self.stored:.6f}, recomputed {self.recomputed:.6f} (off by "
                f"{abs(self.stored - self.recomputed):.6f})")


class Tally:
    """Counts per reason, with the first `EXAMPLES` places of each."""

    def __init__(self):
        self.count: Counter = Counter()
        self.places: dict[str, list[str]] = {}

    def add(self, reason: str, where: str) -> None:
        self.count[reason] += 1
        places = self.places.setdefault(reason, [])
        if len(places) < EXAMPLES:
            places.append(where)

    def total(self) -> int:
        return sum(self.count.values())

    def lines(self) -> list[str]:
        return [f"{reason}: {n} (e.g. {', '.join(self.places[reason])})"
                for reason, n in self.count.items()]


@dataclasses.dataclass
class SplitCheck:
    """What the check found in one follower file."""
    split: str
    path: str
    guide: str | None = None
    records: int = 0                 # non-blank lines
    compared: int = 0                # records whose metrics were recomputed
    without: Tally = dataclasses.field(default_factory=Tally)     # records without 'metrics'
    skipped: Tally = dataclasses.field(default_factory=Tally)     # records not compared
    guide_lines: Tally = dataclasses.field(default_factory=Tally)  # guide lines not read
    unusable: Tally = dataclasses.field(default_factory=Tally)    # stored values missing / bad
    checked: Counter = dataclasses.field(default_factory=Counter)   # metric -> values compared
    agree: Counter = dataclasses.field(default_factory=Counter)     # metric -> within tolerance
    worst: list[Case] = dataclasses.field(default_factory=list)     # a min-heap of the worst
    unreadable: str | None = None    # the error that ended the file early

    def add_case(self, case: Case, keep: int) -> None:
        if len(self.worst) < keep:
            heapq.heappush(self.worst, case)
        elif case > self.worst[0]:
            heapq.heapreplace(self.worst, case)

    def lines(self) -> list[str]:
        out = []
        name = f"{self.split} ({self.path})"
        with_metrics = self.records - self.without.total()
        if self.guide is None:
            expected = " or ".join(rr.rxr_file_names(self.split, "guide"))
            out.append(f"{name}: no guide file ({expected}): the reference paths are unknown, "
                       f"nothing compared")
        elif self.records and not with_metrics:
            out.append(f"{name}: no stored metrics: none of its {self.records} records has a "
                       f"'metrics' object; nothing compared")
        else:
            agree = ", ".join(f"{k} {self.agree[k]}/{self.checked[k]}" for k in STORED)
            out.append(f"{name}: {self.records} records, {self.compared} compared; within "
                       f"tolerance: {agree}")
            out += ["  worst: " + c.line() for c in sorted(self.worst, reverse=True)]
            out += [f"  records without stored metrics: {x}" for x in self.without.lines()]
        out += [f"  stored values not compared: {x}" for x in self.unusable.lines()]
        out += [f"  records not compared: {x}" for x in self.skipped.lines()]
        out += [f"  guide lines not read ({self.guide}): {x}" for x in self.guide_lines.lines()]
        if self.unreadable:
            out.append(f"  read up to the error: {self.unreadable}")
        return out


@dataclasses.dataclass
class Report:
    """The check of every follower file of a release (`lines` prints it)."""
    distances: str
    splits: list[SplitCheck]
    notes: list[str]                 # scans whose graph or `.house` file could not be used
    tolerances: dict[str, float]

    def lines(self) -> list[str]:
        if not self.splits:
            return []
        tol = ", ".join(f"{k} {self.tolerances[k]:g}{' m' if k in METRES else ''}"
                        for k in STORED)
        out = [f"follower metrics (information, not counted as problems): each follower's "
               f"stored 'metrics' recomputed against its guide's path; distances: "
               f"{self.distances}; success radius {SUCCESS_RADIUS:g} m",
               f"  agreeing: |stored - recomputed| <= {tol}"]
        out += [f"  {n}" for n in self.notes]
        for s in self.splits:
            out += [f"  {line}" for line in s.lines()]
        return out


def _objects(path: str) -> Iterator[tuple[str | None, dict | None, str]]:
    """(`{path}:{line}`, the line's object or None, why not) of each non-blank line, streamed;
    an error reading the file ends it with (None, None, the error)."""
    try:
        for line_no, text in core.read_lines(path, rr.RecordFormatError, rr.RXR_HINT):
            where = f"{path}:{line_no}"
            try:
                obj = json.loads(text)
            except (json.JSONDecodeError, RecursionError):
                yield where, None, "invalid JSON"
                continue
            yield (where, obj, "") if isinstance(obj, dict) else (where, None,
                                                                   "not a JSON object")
    except ERRORS as e:
        yield None, None, core.problem_line(path, e)


def _instruction_id(obj: dict) -> tuple[int | None, str]:
    iid = obj.get("instruction_id")
    if iid is None:
        return None, "missing field 'instruction_id'"
    return (int(iid), "") if core.is_int(iid) else (None, "field 'instruction_id' not an integer")


def _path(obj: dict) -> tuple[list[str] | None, str]:
    if "path" not in obj:
        return None, "missing field 'path'"
    ok = core.list_of(core.is_nonempty_string, 1)(obj["path"])
    return (obj["path"], "") if ok else (None, "field 'path' not a list of viewpoint ids")


def read_guides(path: str, check: SplitCheck) -> dict[int, tuple[str, list[str]]]:
    """{instruction_id: (scan, path)} of a guide file, streamed; bad lines go to
    `check.guide_lines`."""
    out = {}
    for where, obj, why in _objects(path):
        if where is None:
            check.guide_lines.add("the rest of the file, unreadable", why)
            break
        if obj is None:
            check.guide_lines.add(why, where)
            continue
        iid, why = _instruction_id(obj)
        viewpoints, why_path = _path(obj)
        scan = obj.get("scan")
        why = why or why_path or ("" if core.is_file_stem(scan) else
                                  "missing field 'scan'" if "scan" not in obj else
                                  "field 'scan' not a scan id")
        if why:
            check.guide_lines.add(why, where)
            continue
        out[iid] = (scan, [sys.intern(v) for v in viewpoints])
    return out


class Distances:
    """The trainer's geodesics over the scans whose connectivity (and, with `house_dir`, `.house`)
    files read well; `notes` names the others."""

    def __init__(self, connectivity_dir: str, scans: Sequence[str], house_dir: str | None):
        self.notes: list[str] = []
        self.bad: dict[str, str] = {}
        good = []
        for scan in sorted(scans):
            conn = os.path.join(connectivity_dir, scan + CONNECTIVITY_SUFFIX)
            try:
                read_connectivity(conn)
                good.append(scan)
            except ERRORS as e:
                self.bad[scan] = "its scan's connectivity file unreadable"
                self.notes.append(f"scan {scan}: {core.problem_line(conn, e)}")
        self.nodes, self.table = NodeTable.from_ids([]), None
        self.kind = "house panorama centres" if house_dir else "connectivity poses"
        if not good:
            return
        graph, self.nodes, scan_of = load_matterport_graph(connectivity_dir, good)
        if house_dir:
            centres = np.asarray(graph.positions, np.float64).copy()
            for s, scan in enumerate(good):
                idx = np.nonzero(scan_of == s)[0]
                table = NodeTable.from_ids([self.nodes.ids[i] for i in idx])
                try:
                    centres[idx] = house.panorama_centres(house_dir, table, [scan])
                except ERRORS as e:
                    self.bad[scan] = "its scan's .house file unusable"
                    self.notes.append(f"scan {scan}: {core.problem_line(house_dir, e)}")
            graph = graph.replace(lengths=house.edge_lengths(graph, centres))
        geo = geodesic_table(graph, scan_of)
        self.table = np.asarray(geo.table)
        self.scan, self.local = np.asarray(geo.scan), np.asarray(geo.local)
        self.matrices: dict[int, np.ndarray] = {}

    def local_path(self, scan: str, viewpoints: Sequence[str]) -> tuple[int, list[int]] | None:
        """(scan index, within-scan indices) of a path, None if a viewpoint is off the graph."""
        ids = [self.nodes.index.get(f"{scan}/{v}") for v in viewpoints]
        if any(i is None for i in ids):
            return None
        return int(self.scan[ids[0]]), [int(self.local[i]) for i in ids]

    def matrix(self, s: int) -> np.ndarray:
        """The float64 distance matrix of scan index `s` (converted once)."""
        if s not in self.matrices:
            self.matrices[s] = self.table[s].astype(np.float64)
        return self.matrices[s]


def compare(check: SplitCheck, distances: Distances, follower: str,
            guides: dict[int, tuple[str, list[str]]], tolerances: dict[str, float],
            worst: int) -> None:
    """Streams one follower file, recomputing and comparing each record's stored metrics."""
    for where, obj, why in _objects(follower):
        if where is None:
            check.unreadable = why
            break
        check.records += 1
        if obj is None:
            check.skipped.add(why, where)
            continue
        if "metrics" not in obj:
            check.without.add("no field 'metrics'", where)
            continue
        stored = obj["metrics"]
        iid, why = _instruction_id(obj)
        viewpoints, why_path = _path(obj)
        why = why or why_path or ("" if isinstance(stored, dict) else
                                  "field 'metrics' not an object")
        if not why and iid not in guides:
            why = "no readable guide line with its instruction_id"
        if why:
            check.skipped.add(why, where)
            continue
        scan, ref_viewpoints = guides[iid]
        if scan in distances.bad:
            check.skipped.add(distances.bad[scan], where)
            continue
        path, ref = (distances.local_path(scan, v) for v in (viewpoints, ref_viewpoints))
        if path is None or ref is None:
            check.skipped.add("a viewpoint of its path or its guide's off its scan's graph",
                              where)
            continue
        got = path_metrics_np(path[1], ref[1], distances.matrix(path[0]), SUCCESS_RADIUS)
        check.compared += 1
        for k in STORED:
            value = stored.get(k)
            if not core.is_number(value):
                check.unusable.add(f"'{k}' missing or not a finite number", where)
                continue
            check.checked[k] += 1
            diff = abs(float(value) - got[k])
            if diff <= tolerances[k]:
                check.agree[k] += 1
            else:   # NaN (an unreachable goal) ranks with infinity
                score = diff / max(tolerances[k], 1e-12) if np.isfinite(diff) else np.inf
                check.add_case(Case(score, iid, k, float(value), got[k], where), worst)


def check_follower_metrics(manual_dir: str, connectivity_dir: str, house_dir: str | None = None,
                           tolerances: dict[str, float] | None = None, worst: int = WORST
                           ) -> Report:
    """Recomputes the stored metrics of every follower file in `manual_dir` (module docstring):
    each split's guide file is streamed for the reference paths, then its follower file."""
    tolerances = dict(TOLERANCES, **(tolerances or {}))
    checks, guides = [], []
    for path, split, annotator in annotation_files(manual_dir):
        if annotator != "follower":
            continue
        check = SplitCheck(split, path, rr.find_rxr_file(manual_dir, split, "guide"))
        checks.append(check)
        guides.append({} if check.guide is None else read_guides(check.guide, check))
    scans = {scan for g in guides for scan, _ in g.values()}
    distances = Distances(connectivity_dir, scans, house_dir)
    for check, g in zip(checks, guides):
        compare(check, distances, check.path, g, tolerances, worst)
    return Report(distances.kind, checks, distances.notes, tolerances)
