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

from collections import Counter
from typing import Sequence


from ttw_jax.core import paths
from ttw_jax.core.records import RecordFormatError, check_npy_size
from ttw_jax.touchdown import records as tr
from ttw_jax.touchdown.graph import read_graph_files
from ttw_jax.touchdown.reference import TouchdownReference
from ttw_jax.touchdown.sdr.stream import read_feature_map

# split -> record file name in the release's data folder
RECORD_FILES = {"train": "train.json", "dev": "dev.json", "test": "test.json",
                "dev_sample": "touchdown_unseen_dev_sample.json"}
# Splits whose references the release withholds: none. github.com/lil-lab/touchdown ships
# data/{train,dev,test}.json with every route and Touchdown location, so every split is scored.
HIDDEN_SPLITS: tuple[str, ...] = ()
ERRORS = (RecordFormatError, ValueError, OSError)


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
    (`check_npy_size`): the shape of the others, a numeric dtype and, with `bodies`, the whole
    body (ValueError naming the file)."""
    got, dtype = header
    if shape is not None and got != tuple(shape):
        raise ValueError(f"{path}: shape {got}, expected {tuple(shape)} (like the other maps)")
    if dtype.kind not in "fiu":
        raise ValueError(f"{path}: dtype {dtype}, expected float (float16)")
    if bodies:
        read_feature_map(path, got)


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
            graph = ({n[0]: i for i, n in enumerate(nodes)}, TouchdownReference(links))
        except ERRORS as e:
            problems.append(str(e))
    views, found = set(), 0
    for name in RECORD_FILES.values():
        path = paths.join(manual_dir, name)
        if not paths.exists(path):
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
    feature_dir = paths.join(manual_dir, "features")
    if paths.isdir(feature_dir):
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
            checked += 1
            try:
                if isinstance(headers[f], Exception):
                    raise headers[f]
                check_feature_file(paths.join(feature_dir, f), headers[f], shape, bodies)
            except ERRORS as e:
                problems.append(str(e))
        missing = sorted(views - {f[:-4] for f in names})
        if missing:
            problems.append(f"{feature_dir}: no feature map for {len(missing)} panoramas the "
                            f"records' views name, e.g. {missing[:3]}")
    return problems, checked
