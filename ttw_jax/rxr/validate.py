"""Checks an R2R / RxR release before a run: every file read to the end, every problem named.

`validate_release(manual_dir, connectivity_dir, bodies, view_features)` reads, with the readers
the `rxr` builder and the trainers use:

* every `<scan>_connectivity.json` (`graph.read_connectivity`);
* every `R2R_*.json` (`records.read_r2r`) and RxR guide / follower file
  (`parse_rxr_file_name`, `read_rxr`; a follower file takes its missing fields from its split's
  guide file, as `read_rxr_split` does, and is read for its own fields alone while that file is
  bad); a file without records is a problem; with the graphs, every record's scan known, its
  path viewpoints included ones, consecutive ones linked;
* the pose traces and text features the records point to, found as the readers find them: with
  `bodies` each read whole (every key of a trace with its dtype, shape and finite values, its
  masks on its record's path, its text masks against the features' subwords; the features
  floating point, finite as stored and as bfloat16, their width against most files'), else each
  archive's directory; where an annotation file has some, the records without are counted, one
  line per kind; then every other such file in `pose_traces/` and `text_features/` (and their
  split folders), on its own, so a bad annotation file hides none of its bodies;
* `view_features` (TSV / HDF5 / npz): every row, each viewpoint once and, with the graphs, each
  row of a known scan one of its viewpoints and each viewpoint of the records' scans present.

Annotations are parsed without their pose traces and text features (`bodies=False` of the
readers, which stop at the first bad one), then those files are checked one by one. Unlike a
run, it reports one line per bad file (file, then line, entry, key or field; a decoder's error,
gzip, zlib, zip or numpy, is that file's line) and goes on. The follower files' stored `metrics` are
recomputed apart, by `ttw_jax.rxr.follower_metrics` (`python -m experiments.validate` runs both).
"""
from __future__ import annotations

import os
import zipfile
import zlib
from collections import Counter
from typing import Mapping, Sequence

import numpy as np

from ttw_jax.core import paths, records as core
from ttw_jax.core.pano_graph import NodeTable
from ttw_jax.rxr import records as rr
from ttw_jax.rxr import view_features as vf
from ttw_jax.rxr.episodes import gold_actions
from ttw_jax.rxr.graph import list_scans, load_matterport_graph, node_id, read_connectivity

ERRORS = (core.RecordFormatError, ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error,
          KeyError)
CONNECTIVITY_SUFFIX = "_connectivity.json"
EXAMPLES = 3   # missing files named in a summary line
TRACE_SUFFIX, TEXT_SUFFIX = "_pose_trace.npz", "_text_features.npz"


class Graphs:
    """The Matterport graphs of the scans whose connectivity files read well
    (`load_matterport_graph`), for checking records' scans and paths."""

    def __init__(self, connectivity_dir: str, good: Sequence[str], bad: Sequence[str]):
        self.dir, self.scans, self.bad = connectivity_dir, set(good), set(bad)
        self.graph, self.nodes = None, NodeTable.from_ids([])
        if good:
            self.graph, self.nodes, _ = load_matterport_graph(connectivity_dir, sorted(good))

    def record_problem(self, rec: dict) -> str | None:
        """The first problem of a record's scan or path ("field '...': ..."), None when there is
        none or its scan's connectivity file is bad (reported there)."""
        scan, path = rec["scan"], rec["path"]
        if scan in self.bad:
            return None
        if scan not in self.scans:
            return (f"field 'scan': no connectivity file {scan}{CONNECTIVITY_SUFFIX} in "
                    f"{self.dir}")
        try:
            ids = self.nodes.lookup([node_id(scan, v) for v in path], "viewpoint")
        except KeyError:
            v = next(v for v in path if node_id(scan, v) not in self.nodes.index)
            return f"field 'path': viewpoint {v!r} is not an included viewpoint of scan {scan}"
        for k in range(len(ids) - 1):
            try:
                gold_actions(self.graph, [ids[k], ids[k + 1]], "")
            except ValueError:
                return (f"field 'path': consecutive viewpoints {path[k]} -> {path[k + 1]} are "
                        f"not linked in scan {scan}'s graph")
        return None

    def viewpoints(self, scans: set[str]) -> list[str]:
        """The node ids ("scan/viewpoint") of `scans`."""
        return [n for n in self.nodes.ids if n.split("/", 1)[0] in scans]


def check_connectivity(connectivity_dir: str, problems: list[str]
                       ) -> tuple[int, list[str], list[str]]:
    """(files checked, good scans, bad scans) of a connectivity folder; a line per bad file is
    added to `problems`."""
    try:
        scans = list_scans(connectivity_dir)
    except ERRORS as e:
        problems.append(core.problem_line(connectivity_dir, e))
        return 0, [], []
    if not scans:
        problems.append(f"{connectivity_dir}: no <scan>{CONNECTIVITY_SUFFIX} file")
    good, bad = [], []
    for scan in scans:
        path = os.path.join(connectivity_dir, scan + CONNECTIVITY_SUFFIX)
        try:
            read_connectivity(path)
            good.append(scan)
        except ERRORS as e:
            problems.append(core.problem_line(path, e))
            bad.append(scan)
    return len(scans), good, bad


def annotation_files(manual_dir: str) -> list[tuple[str, str, str]]:
    """(path, split, annotator) of every annotation file in `manual_dir`: the `R2R_*.json`
    ("r2r"), then the RxR guide files, then the follower files, each by name."""
    names = sorted(paths.listdir(manual_dir)) if paths.isdir(manual_dir) else []
    r2r = [(os.path.join(manual_dir, n), n[len("R2R_"):-len(".json")], "r2r")
           for n in names if n.startswith("R2R_") and n.endswith(".json")]
    rxr = [(os.path.join(manual_dir, n),) + rr.parse_rxr_file_name(n)
           for n in names if rr.parse_rxr_file_name(n)]
    return r2r + sorted(rxr, key=lambda f: f[2] == "follower")


def rxr_lines(path: str) -> list[tuple[int, int | None]]:
    """(line number, demonstration_id or None) of each line of an RxR file that read well, in
    the order of its records."""
    return [(line, raw.get("demonstration_id")) for _, line, raw in core.read_jsonl(path)]


def r2r_entries(records: Sequence[dict]) -> list[int]:
    """The entry index of each record of `read_r2r` (an entry's instructions are consecutive)."""
    out, entry = [], -1
    for i, rec in enumerate(records):
        if i == 0 or rec["path_id"] != records[i - 1]["path_id"]:
            entry += 1
        out.append(entry)
    return out


class AnyGuide(Mapping):
    """Stand-in guide fields for every instruction_id, so that a follower file whose guide file
    is bad is still read for its own fields (its records' scan, text and language unknown)."""

    FIELDS = {"path_id": 0, "scan": "?", "heading": 0.0, "instruction": "?", "language": "en-US"}

    def __getitem__(self, instruction_id):
        return self.FIELDS

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0


def check_archive(path: str) -> None:
    """Checks only the directory of a pose-trace or text-feature `.npz` (the end of the file),
    or the header and size of an `.npy` (PoseTraceError naming the file)."""
    if path.endswith(".npy"):
        core.check_npy_size(path, rr.PoseTraceError)
        return
    with core.damaged(path, rr.PoseTraceError):
        paths.load_numpy(path).close()


def check_pose_trace(path: str, rec: dict | None, subwords: int | None) -> None:
    """Reads a pose trace whole into the masks of `rec`'s path (`pose_trace_masks`; the words
    play no part in its checks; without `rec`, every key on its own, `load_pose_trace`) and
    compares its text masks with the `subwords` of the record's text features, as `episodes`
    does (PoseTraceError naming the file and key)."""
    if rec is None:
        rr.load_pose_trace(path)
        return
    _, _, sub = rr.pose_trace_masks(path, rec["path"], np.zeros(0), np.zeros(0))
    if sub is not None and subwords is not None and sub.shape[1] != subwords:
        raise rr.PoseTraceError(f"{path}: key 'text_masks' has {sub.shape[1]} subwords, the "
                                f"record's text features {subwords}")


class Bodies:
    """The pose traces and text features of a release's records, each checked once: `problems`
    (one line per bad file), the text features' shapes, and the files missing per kind."""

    KINDS = {"pose_traces": "pose traces", "text_features": "text-feature files"}

    def __init__(self, manual_dir: str, bodies: bool):
        self.manual_dir, self.bodies = manual_dir, bodies
        self.listing = rr.FileIndex()
        self.problems: list[str] = []
        self.traces: set[str] = set()
        self.texts: dict[str, tuple | None] = {}   # path -> (m, D); None: unread or bad
        self.missing: dict[str, list[str]] = {k: [] for k in self.KINDS}

    @property
    def checked(self) -> int:
        """The number of files checked."""
        return len(self.traces) + len(self.texts)

    def text_features(self, path: str) -> tuple | None:
        """(m, D) of a text-feature file, checked on first sight (None: unread or bad)."""
        if path not in self.texts:
            self.texts[path] = None
            try:
                if self.bodies:
                    self.texts[path] = rr.load_text_features(path).shape
                else:
                    check_archive(path)
            except ERRORS as e:
                self.problems.append(core.problem_line(path, e))
        return self.texts[path]

    def pose_trace(self, path: str, rec: dict | None, subwords: int | None) -> None:
        """Checks a pose trace of `rec` (None: of no record read) on first sight (`subwords`:
        its text features' rows)."""
        if path in self.traces:
            return
        self.traces.add(path)
        try:
            if self.bodies:
                check_pose_trace(path, rec, subwords)
            else:
                check_archive(path)
        except ERRORS as e:
            self.problems.append(core.problem_line(path, e))

    def check_file(self, recs: Sequence[dict], split: str, annotator: str,
                   demonstration_ids: Sequence[int | None] | None = None,
                   texts: bool = True) -> None:
        """Checks the files the records of one annotation file point to (`demonstration_ids`:
        a follower file's, per record; `texts=False`: not their text features, for records
        whose language is unknown); notes the missing ones when the file has others."""
        found = {k: False for k in self.KINDS}
        lost: dict[str, list[str]] = {k: [] for k in self.KINDS}

        def look(kind, candidates):
            path = self.listing.find(candidates)
            if path is None:
                lost[kind].append(os.path.relpath(candidates[0], self.manual_dir))
            found[kind] = found[kind] or path is not None
            return path

        file_split = None if annotator == "r2r" else split
        for i, rec in enumerate(recs):
            iid, tf = rec["instruction_id"], None
            if texts:
                tf = look("text_features", rr.text_features_candidates(
                    self.manual_dir, iid, rec["language"], file_split))
            shape = self.text_features(tf) if tf is not None else None
            if annotator == "guide":     # the release's cross-translations of the text
                own = rec["language"].split("-", 1)[0]
                for lang in rr.TEXT_FEATURE_LANGUAGES:
                    other = self.listing.find([c for c in rr.text_features_candidates(
                        self.manual_dir, iid, lang, split) if c.endswith(".npz")])
                    if lang != own and other is not None:
                        self.text_features(other)
            if annotator == "r2r":
                continue
            demo = demonstration_ids[i] if demonstration_ids is not None else None
            trace = look("pose_traces", rr.pose_trace_candidates(
                self.manual_dir, iid if demo is None else int(demo), annotator, split))
            if trace is not None:
                self.pose_trace(trace, rec, None if shape is None else shape[0])
        for kind in self.KINDS:
            if found[kind]:
                self.missing[kind] += lost[kind]

    def check_listed(self) -> None:
        """Checks, each on its own, the pose traces and text-feature files in the release's
        folders that no record read named (those of a bad annotation file among them)."""
        for path in self.listed("pose_traces", (TRACE_SUFFIX,)):
            self.pose_trace(path, None, None)
        for folder in ("text_features", "pose_traces"):
            for path in self.listed(folder, (TEXT_SUFFIX, ".npy")):
                if folder == "text_features" or path.endswith(TEXT_SUFFIX):
                    self.text_features(path)

    def listed(self, folder: str, suffixes: tuple[str, ...]) -> list[str]:
        """The files of the release's `folder` and of its split folders whose names end in one
        of `suffixes`."""
        return paths.list_files(paths.join(self.manual_dir, folder),
                                lambda name: name.endswith(suffixes), subfolders=True)

    def report(self) -> list[str]:
        """The bad files' lines, the text features of an odd width, and one line per kind of
        missing file."""
        out = list(self.problems)
        widths = Counter(s[1] for s in self.texts.values() if s is not None)
        if widths:
            width = widths.most_common(1)[0][0]
            out += [f"{p}: text features of width {s[1]}, expected {width} (like the other "
                    f"text-feature files)" for p, s in self.texts.items()
                    if s is not None and s[1] != width]
        for kind, what in self.KINDS.items():
            if self.missing[kind]:
                out.append(f"{os.path.join(self.manual_dir, kind)}: {len(self.missing[kind])} "
                           f"{what} missing (their annotation files have the others'), e.g. "
                           f"{self.missing[kind][:EXAMPLES]}")
        return out


def check_view_features(path: str, graphs: Graphs | None, scans: set[str]) -> str | None:
    """The first problem of a view-feature file (None when there is none): a malformed row or
    non-finite values (its reader's error), a viewpoint listed twice and, with `graphs`, a row of a
    known scan that is not one of its viewpoints, or viewpoints of `scans` without a row."""
    fmt = vf.file_format(path)
    if fmt == "npz":
        ids, feats, places = vf.source_rows(path, "")
        rows = zip(places, ids, feats)
    elif fmt == "tsv":
        rows = ((f"{path}:{line}", f"{s}/{v}", x) for line, s, v, x in vf.tsv_rows(path))
    else:
        rows = ((f"{path}: dataset {name!r}", f"{s}/{v}", x)
                for name, s, v, x in vf.hdf5_rows(path))
    first: dict[str, str] = {}
    for where, key, _ in rows:
        if key in first:
            return f"{where}: viewpoint {key} is listed twice (first at {first[key]})"
        first[key] = where
        scan, viewpoint = key.split("/", 1)
        if graphs is not None and scan in graphs.scans and key not in graphs.nodes.index:
            return (f"{where}: field 'viewpointId': {viewpoint} is not a viewpoint of scan "
                    f"{scan}'s connectivity graph (included viewpoints)")
    if not first:
        return f"{path}: no viewpoint rows"
    if graphs is not None:
        missing = [n for n in graphs.viewpoints(scans or graphs.scans) if n not in first]
        if missing:
            whose = "the records' scans" if scans else "the graphs"
            return (f"{path}: {len(missing)} viewpoints of {whose} have no features, e.g. "
                    f"{missing[:EXAMPLES]}")
    return None


def validate_release(manual_dir: str, connectivity_dir: str | None = None, bodies: bool = True,
                     view_features: str | None = None) -> tuple[list[str], int]:
    """(problems, files checked): one line per bad file (see the module docstring), connectivity
    first, then annotations, pose traces and text features, the missing ones, view features."""
    problems, checked, graphs = [], 0, None
    if connectivity_dir:
        checked, good, bad = check_connectivity(connectivity_dir, problems)
        if good or bad:
            try:
                graphs = Graphs(connectivity_dir, good, bad)
            except ERRORS as e:
                problems.append(core.problem_line(connectivity_dir, e))
    files = annotation_files(manual_dir)
    if not files:
        problems.append(f"{manual_dir}: no annotation file (expected R2R_{{split}}.json or "
                        f"rxr_{{split}}_{{guide,follower}}.jsonl.gz). {rr.R2R_HINT} "
                        f"{rr.RXR_HINT}")
    body = Bodies(manual_dir, bodies)
    guides: dict[str, dict] = {}   # split -> the fields of its guide file (absent: bad)
    scans: set[str] = set()
    for path, split, annotator in files:
        guide = rr.find_rxr_file(manual_dir, split, "guide") if annotator != "r2r" else None
        # a follower file whose guide file is bad (reported): read for its own fields alone
        alone = annotator == "follower" and guide is not None and guides.get(split) is None
        checked += 1
        fields = {} if annotator == "guide" and path == guide else None
        lines = None
        try:
            if annotator == "r2r":
                recs = rr.read_r2r(path, bodies=False)
            elif annotator == "guide":
                recs = rr.read_rxr(path, guide_fields=fields, bodies=False)
            else:
                recs = rr.read_rxr(path, guides=AnyGuide() if alone else guides.get(split),
                                   bodies=False)
                lines = rxr_lines(path)
        except ERRORS as e:
            problems.append(core.problem_line(path, e))
            continue
        if not recs:
            problems.append(f"{path}: no records (an empty file)")
            continue
        if fields is not None:
            guides[split] = fields
        if alone:
            body.check_file(recs, split, annotator, [d for _, d in lines], texts=False)
            continue
        scans |= {r["scan"] for r in recs}
        if graphs is not None:
            bad = [(i, p) for i, r in enumerate(recs) if (p := graphs.record_problem(r))]
            if bad:
                i, p = bad[0]
                where = (f"{path}: entry {r2r_entries(recs)[i]}" if annotator == "r2r"
                         else f"{path}:{(lines or rxr_lines(path))[i][0]}")
                more = f" ({len(bad)} such records in all)" if len(bad) > 1 else ""
                problems.append(f"{where}: {p}{more}")
        body.check_file(recs, split, annotator,
                        [d for _, d in lines] if lines is not None else None)
    body.check_listed()
    checked += body.checked
    problems += body.report()
    if view_features:
        checked += 1
        try:
            problem = check_view_features(view_features, graphs, scans)
        except ERRORS as e:
            problem = core.problem_line(view_features, e)
        if problem:
            problems.append(problem)
    return [" ".join(p.splitlines()) for p in problems], checked
