"""Leaderboard prediction files, and scoring them back.

- R2R (`format="r2r"`): one JSON list `[{"instr_id": "<path_id>_<k>", "trajectory":
  [[viewpoint, heading, elevation], ...]}]` (the Matterport3DSimulator evaluation's format; the
  heading is the agent's on arriving at each viewpoint, radians, elevation 0).
- RxR (`format="rxr"`): JSON lines `{"instruction_id": int, "path": [viewpoint, ...]}`.

`read_predictions` reads either into {instruction_id: [viewpoint ids]}; `score_predictions`
evaluates predicted paths against a split's reference paths with the same metrics as the
on-device evaluation, so a file written from an evaluation scores to the same numbers.
"""
from __future__ import annotations

import collections
import json
from typing import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.core import paths
from ttw_jax.core.pano_graph import NodeTable, PanoGraph
from ttw_jax.rxr.metrics import path_metrics
from ttw_jax.rxr.records import ANNOTATORS, R2R_IDS_PER_PATH

FORMATS = ("r2r", "rxr")


def arrival_headings(graph: PanoGraph, path: Sequence[int], start_heading: float) -> list[float]:
    """The agent's heading at each node of `path` (node ids): the start heading, then the
    heading of the edge it arrived by."""
    nb, headings = np.asarray(graph.neighbors), np.asarray(graph.headings)
    out = [float(start_heading)]
    for a, b in zip(path[:-1], path[1:]):
        slot = np.nonzero(nb[a] == b)[0]
        out.append(float(headings[a, slot[0]]) if len(slot) else out[-1])
    return out


def prediction_rows(paths: np.ndarray, lengths: np.ndarray, episodes: Mapping[str, np.ndarray],
                    nodes: NodeTable, graph: PanoGraph, fmt: str) -> list[dict]:
    """One row per episode of predicted node paths [E, T] (lengths [E]) in the file format
    `fmt` (module docstring); `episodes` gives instruction_id, path_id and heading."""
    if fmt not in FORMATS:
        raise ValueError(f"prediction format must be one of {FORMATS}, got {fmt!r}")
    rows = []
    for i, (p, n) in enumerate(zip(np.asarray(paths), np.asarray(lengths))):
        p = [int(x) for x in p[:n]]
        viewpoints = [nodes.ids[x].split("/", 1)[1] for x in p]
        iid = int(episodes["instruction_id"][i])
        if fmt == "rxr":
            rows.append({"instruction_id": iid, "path": viewpoints})
        else:
            k = iid - int(episodes["path_id"][i]) * R2R_IDS_PER_PATH
            heads = arrival_headings(graph, p, float(episodes["heading"][i]))
            rows.append({"instr_id": f"{int(episodes['path_id'][i])}_{k}",
                         "trajectory": [[v, h, 0.0] for v, h in zip(viewpoints, heads)]})
    return rows


def write_predictions(path: paths.PathLike, rows: Sequence[dict], fmt: str) -> None:
    """R2R's JSON list or RxR's JSON lines at `path` (any `paths.resolve` path)."""
    paths.write_text(path, json.dumps(list(rows)) if fmt == "r2r"
                     else "".join(json.dumps(row) + "\n" for row in rows))


def leaderboard_id(row: dict, fmt: str) -> str:
    """The id a leaderboard keys a prediction row by: R2R's `instr_id`, RxR's `instruction_id`."""
    return str(row["instr_id"]) if fmt == "r2r" else str(row["instruction_id"])


def leaderboard_ids(records: Sequence[dict]) -> list[str]:
    """The leaderboard ids of a split's annotations (`ttw_jax.rxr.records`): R2R
    "<path_id>_<k>", RxR instruction ids; only R2R's and the guides' (a leaderboard scores
    those)."""
    return [f"{r['path_id']}_{r['instruction_id'] - r['path_id'] * R2R_IDS_PER_PATH}"
            if r["annotator"] == "r2r" else str(r["instruction_id"]) for r in records
            if r["annotator"] in ("r2r", "guide")]


def check_leaderboard(rows: Sequence[dict], fmt: str, expected_ids, where: str) -> None:
    """ValueError (naming `where`) unless `rows` are exactly the leaderboard submission of a
    split whose complete id set is `expected_ids` (R2R "<path_id>_<k>" strings, RxR instruction
    ids): each row has the format's keys and types (module docstring), every id once, none
    missing and none extra."""
    if fmt not in FORMATS:
        raise ValueError(f"prediction format must be one of {FORMATS}, got {fmt!r}")
    keys = {"instr_id", "trajectory"} if fmt == "r2r" else {"instruction_id", "path"}
    for i, row in enumerate(rows):
        if set(row) != keys:
            raise ValueError(f"{where}: row {i} has keys {sorted(row)}, the {fmt} leaderboard "
                             f"takes {sorted(keys)}")
        try:
            _r2r_row(row) if fmt == "r2r" else _rxr_row(row)
        except (KeyError, ValueError, TypeError, IndexError) as e:
            raise ValueError(f"{where}: row {i}: not a {fmt} leaderboard row ({e})") from None
        if fmt == "r2r" and not all(len(s) == 3 and all(isinstance(x, float) for x in s[1:])
                                    for s in row["trajectory"]):
            raise ValueError(f"{where}: row {i}: trajectory steps are [viewpoint, heading, "
                             "elevation] with float angles")
    got = [leaderboard_id(r, fmt) for r in rows]
    expected = {str(i) for i in expected_ids}
    twice = sorted(i for i, n in collections.Counter(got).items() if n > 1)
    missing, extra = sorted(expected - set(got)), sorted(set(got) - expected)
    if twice or missing or extra:
        raise ValueError(f"{where}: the leaderboard takes every id of the split once: "
                         + "; ".join(f"{what} {len(ids)} (e.g. {ids[:3]})" for what, ids in
                                     (("repeated", twice), ("missing", missing),
                                      ("not in the split", extra)) if ids))


def _dedup(viewpoints: list[str]) -> list[str]:
    """Consecutive repeats dropped (MatterSim trajectories log a row per turn), as the on-device
    evaluation's paths."""
    return [v for i, v in enumerate(viewpoints) if i == 0 or v != viewpoints[i - 1]]


def _r2r_row(row) -> tuple[int, list[str]]:
    pid, k = (int(x) for x in str(row["instr_id"]).split("_"))
    if not 0 <= k < R2R_IDS_PER_PATH:
        raise ValueError(f"instruction index {k} is not below {R2R_IDS_PER_PATH}")
    steps = row["trajectory"]
    if not steps or not all(isinstance(s, list) and s and isinstance(s[0], str) for s in steps):
        raise ValueError("trajectory must be a non-empty list of [viewpoint, heading, elevation]")
    return pid * R2R_IDS_PER_PATH + k, _dedup([s[0] for s in steps])


def _rxr_row(row) -> tuple[int, list[str]]:
    path = row["path"]
    if not path or not all(isinstance(v, str) for v in path):
        raise ValueError("path must be a non-empty list of viewpoint ids")
    return int(row["instruction_id"]), _dedup(list(path))


def read_predictions(path: str) -> dict[int, list[str]]:
    """{instruction_id: predicted viewpoint ids} of an R2R (`instr_id` "<path_id>_<k>" ->
    path_id * 10 + k) or RxR prediction file, consecutive repeats dropped; ValueError naming the
    file and entry for a malformed or repeated one."""
    text = paths.resolve(path).read_bytes().decode("utf-8-sig")
    if text.lstrip().startswith("["):
        try:
            entries = [(f"entry {i}", row) for i, row in enumerate(json.loads(text))]
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not a JSON list of R2R predictions ({e})") from None
        parse, kind = _r2r_row, "an R2R"
    else:
        entries = []
        for line_no, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    entries.append((f"line {line_no}", json.loads(line)))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{line_no}: not JSON ({e})") from None
        parse, kind = _rxr_row, "an RxR"
    out = {}
    for where, row in entries:
        try:
            iid, viewpoints = parse(row)
        except (KeyError, ValueError, TypeError, IndexError) as e:
            raise ValueError(f"{path}: {where}: not {kind} prediction ({e})") from None
        if iid in out:
            raise ValueError(f"{path}: {where}: instruction {iid} predicted twice")
        out[iid] = viewpoints
    return out


def score_predictions(predictions: Mapping[int, Sequence[str]],
                      episodes: Mapping[str, np.ndarray], nodes: NodeTable, geodesic,
                      success_radius: float = 3.0) -> dict:
    """Means of PL / NE / SR / OSR / SPL / nDTW / SDTW of `predictions` ({instruction_id:
    viewpoint ids}) against the reference paths of `episodes` (every episode must have a
    prediction; the viewpoints are looked up in the scan of its reference path)."""
    ids = [int(i) for i in episodes["instruction_id"]]
    missing = [i for i in ids if i not in predictions]
    if missing:
        raise ValueError(f"{len(missing)} of {len(ids)} instructions have no prediction, e.g. "
                         f"{missing[:5]}")
    longest = max(len(predictions[i]) for i in ids)
    paths = np.zeros((len(ids), longest), np.int32)
    lengths = np.zeros(len(ids), np.int32)
    for e, iid in enumerate(ids):
        if not predictions[iid]:
            raise ValueError(f"instruction {iid}: empty predicted path")
        scan = nodes.ids[int(episodes["path"][e, 0])].split("/", 1)[0]
        p = nodes.lookup([f"{scan}/{v}" for v in predictions[iid]], "viewpoint")
        paths[e, :len(p)] = p
        lengths[e] = len(p)
    per = jax.jit(path_metrics, static_argnums=(5,))(
        paths, lengths, episodes["path"], episodes["path_len"], geodesic, success_radius)
    return {k: float(jnp.mean(v)) for k, v in per.items()}


def prediction_files(split: str, annotators: np.ndarray,
                     policy: str = "") -> dict[str, np.ndarray]:
    """{file name: episode mask} of the leaderboard files of `split`'s episodes (their annotator
    ids, `records.ANNOTATORS`): `predictions_<split>.json` (R2R's format, R2R instructions) or
    `.jsonl` (RxR's); one file per annotator, `predictions_<split>_<annotator>.jsonl`, when
    several annotators' paths are scored, so every file holds each instruction_id once. A `/` in
    a split name (`r2r/val_seen`) becomes `_`; a `policy` other than the agent's (a baseline)
    is added to the stem (`predictions_test_random_walk.json`)."""
    stem = f"predictions_{split.replace('/', '_')}" + (
        f"_{policy.replace('/', '-')}" if policy else "")
    present = sorted(set(np.asarray(annotators).tolist()))
    if present == [ANNOTATORS.index("r2r")]:
        return {f"{stem}.json": np.ones(len(annotators), bool)}
    if len(present) <= 1:
        return {f"{stem}.jsonl": np.ones(len(annotators), bool)}
    return {f"{stem}_{ANNOTATORS[a]}.jsonl": np.asarray(annotators) == a for a in present}


def write_split_predictions(workdir: str, split: str, data: dict, per_episode: dict,
                            policy: str = "") -> list:
    """Writes a policy's paths on `split` as leaderboard files in `workdir`
    (`prediction_files`); returns their names. A withheld split's file is first checked
    against the leaderboard's format and the split's complete id set."""
    eps = data["episodes"][split]
    names = []
    for name, mask in prediction_files(split, eps["annotator"], policy).items():
        fmt = "r2r" if name.endswith(".json") else "rxr"
        sub_eps = {k: eps[k][mask] for k in ("instruction_id", "path_id", "heading")}
        rows = prediction_rows(per_episode["path"][mask], per_episode["path_len"][mask],
                               sub_eps, data["nodes"], data["graph"], fmt)
        if split in data["complete_ids"]:
            check_leaderboard(rows, fmt, data["complete_ids"][split], f"{name} ({split})")
        write_predictions(paths.resolve(workdir) / name, rows, fmt)
        names.append(name)
    return names
