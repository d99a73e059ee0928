"""Checks a whole Touchdown release before a run: every file read to the end, every problem named.

`validate_release(manual_dir, graph_dir)` reads what the builders and trainers read:

* the graph (`nodes.txt`, `links.txt`) with its readers' checks (headings under the shared rule,
  no blank line between rows, no self-link or repeated link); `links.txt` is read even when
  `nodes.txt` is bad (its panoids then unchecked);
* every record file of `RECORD_FILES` present (navigation and SDR fields; an empty file is a
  problem); with the graph, every route panorama known and every consecutive pair linked;
* every SDR feature map `features/<panoid>.npy`, listed from the folder: the header, exactly the
  bytes it announces, the shape most maps have (or `feature_shape`), a floating-point dtype and
  (unless `bodies=False`) the whole body, finite as stored and as float16 (the dtype the views
  are read in); then one line per panorama a record's visible view names without a file (the
  views of a bad record file from its lines that parse).

Unlike a run, which stops at the first bad file, it reports one line per bad file (file, then
line or field) and goes on.
"""
from __future__ import annotations

import json
from collections import Counter
from typing import Sequence

from ttw_jax.core import paths
from ttw_jax.core.records import RecordFormatError, check_npy_size, problem_line, read_lines
from ttw_jax.touchdown import records as tr
from ttw_jax.touchdown.graph import GRAPH_FILES, SOURCE_HINT, read_link_rows, read_node_rows
from ttw_jax.touchdown.reference import TouchdownReference
from ttw_jax.touchdown.sdr.stream import read_feature_map

# split -> record file name in the release's data folder
RECORD_FILES = {"train": "train.json", "dev": "dev.json", "test": "test.json",
                "dev_sample": "touchdown_unseen_dev_sample.json"}
# Splits whose references the release withholds: none. github.com/lil-lab/touchdown ships
# data/{train,dev,test}.json with every route and Touchdown location, so every split is scored.
HIDDEN_SPLITS: tuple[str, ...] = ()
ERRORS = (RecordFormatError, ValueError, OSError)
MAX_MISSING = 20             # missing feature maps named one by one, then counted


def check_routes(path: str, records: Sequence[dict], node_index: dict[str, int],
                 reference: TouchdownReference) -> str | None:
    """The first route problem of a record file against the graph: a panorama not in
    `nodes.txt` (`records.check_panoids`) or two consecutive panoramas no link joins (None when
    there is none)."""
    try:
        tr.check_panoids(records, node_index, path)
    except RecordFormatError as e:
        return str(e)
    for rec in records:
        gap = reference.unlinked_step(rec["route_panoids"])
        if gap:
            return (f"{path}: route_id {rec['route_id']}: field 'route_panoids': consecutive "
                    f"panoramas {gap[0]} -> {gap[1]} are not linked")
    return None


def check_feature_file(path: str, header: tuple, shape: tuple | None, bodies: bool = True) -> None:
    """Checks one `<panoid>.npy` feature map whose (shape, dtype) `header` was read
    (`check_npy_size`): the shape of the others, a floating-point dtype and, with `bodies`, the
    whole body (`read_feature_map`; ValueError naming the file)."""
    got, dtype = header
    if shape is not None and got != tuple(shape):
        raise ValueError(f"{path}: shape {got}, expected {tuple(shape)} (like the other maps)")
    if dtype.kind != "f":
        raise ValueError(f"{path}: dtype {dtype}, expected floating point (float16)")
    if bodies:
        read_feature_map(path, got)


def record_views(path: str) -> dict[str, str]:
    """{panoid: `{path}:{line}`} of the visible views of the lines of a record file that parse
    (those of a file `read_records` refuses included); {} for an unreadable file."""
    views = {}
    try:
        for line_no, line in read_lines(path, tr.RecordFormatError):
            try:
                rec = json.loads(line)
                examples = tr.sdr_examples(rec) if isinstance(rec, dict) else []
            except (ValueError, RecursionError):
                continue
            for v in examples:
                views.setdefault(v["panoid"], f"{path}:{line_no}")
    except ERRORS:
        pass
    return views


def check_graph(graph_dir: str) -> tuple[list[str], int, tuple | None]:
    """(problems, files checked, ({panoid: index}, reference) or None) of the graph files;
    `links.txt` is read even when `nodes.txt` is bad."""
    files = [paths.join(graph_dir, f) for f in GRAPH_FILES]
    problems, nodes = [], None
    for path in files:
        if not paths.exists(path):
            problems.append(f"{path}: file not found. {SOURCE_HINT}")
    if problems:
        return problems, 2, None
    try:
        nodes = read_node_rows(files[0])[1]
    except ERRORS as e:
        problems.append(problem_line(files[0], e))
    try:
        links = read_link_rows(files[1], nodes, files[0])
    except ERRORS as e:
        problems.append(problem_line(files[1], e))
        return problems, 2, None
    if nodes is None:
        return problems, 2, None
    return problems, 2, ({p: i for i, p in enumerate(nodes)}, TouchdownReference(links))


def validate_release(manual_dir: str, graph_dir: str | None = None, bodies: bool = True,
                     feature_shape: Sequence[int] | None = None, sdr: bool = True
                     ) -> tuple[list[str], int]:
    """(problems, files checked): one line per bad file, in the order above. `sdr=False` checks
    the records' navigation fields only (files without the SDR annotations)."""
    problems, checked, graph = [], 0, None
    if graph_dir:
        problems, checked, graph = check_graph(graph_dir)
    views, found = {}, 0
    for name in RECORD_FILES.values():
        path = paths.join(manual_dir, name)
        if not paths.exists(path):
            continue
        found += 1
        checked += 1
        try:
            recs = tr.read_records(path, sdr=sdr)
        except ERRORS as e:
            problems.append(problem_line(path, e))
            if sdr:
                views = {**record_views(path), **views}
            continue
        if not recs:
            problems.append(f"{path}: no records (an empty or blank file)")
            continue
        if sdr:
            views = {**record_views(path), **views}
        problem = check_routes(path, recs, *graph) if graph is not None else None
        if problem:
            problems.append(problem)
    if not found:
        problems.append(f"{manual_dir}: no record file (expected any of "
                        f"{', '.join(RECORD_FILES.values())}). {tr.SOURCE_HINT}")
    feature_dir = paths.join(manual_dir, "features")
    if paths.isdir(feature_dir):
        more, n = check_features(feature_dir, views, bodies, feature_shape)
        problems += more
        checked += n
    return problems, checked


def check_features(feature_dir: str, views: dict[str, str], bodies: bool = True,
                   feature_shape: Sequence[int] | None = None) -> tuple[list[str], int]:
    """(problems, files checked) of every `.npy` file in `feature_dir`, then one line per
    panorama of `views` ({panoid: the record naming it}) without a file."""
    problems = []
    names = sorted(f for f in paths.listdir(feature_dir) if f.endswith(".npy"))
    headers = {}                 # file -> (shape, dtype), or the error reading its header
    for f in names:
        try:
            headers[f] = check_npy_size(paths.join(feature_dir, f), ValueError)
        except ERRORS as e:
            headers[f] = e
    # the reference: `feature_shape`, else the shape most maps' headers announce
    shapes = Counter(h[0] for h in headers.values() if isinstance(h, tuple))
    shape = (tuple(feature_shape) if feature_shape
             else shapes.most_common(1)[0][0] if shapes else None)
    for f in names:
        path = paths.join(feature_dir, f)
        try:
            if isinstance(headers[f], Exception):
                raise headers[f]
            check_feature_file(path, headers[f], shape, bodies)
        except ERRORS as e:
            problems.append(problem_line(path, e))
    missing = sorted(set(views) - {f[:-4] for f in names})
    for p in missing[:MAX_MISSING]:
        problems.append(f"{paths.join(feature_dir, p + '.npy')}: no such file: the feature map "
                        f"of a view of {views[p]}")
    if len(missing) > MAX_MISSING:
        problems.append(f"{feature_dir}: {len(missing) - MAX_MISSING} more panoramas the "
                        f"records' views name have no feature map")
    return problems, len(names)
