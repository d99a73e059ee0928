"""Checks a whole ArraMon release before a run: every file read to the end, every problem named.

`validate_release(manual_dir, features_dir)` reads what the builder and the trainer read:

* every instance file of the builder's `english` and `hindi` configs present in `manual_dir`
  (`MANUAL_FILES`: `train.json`, `val_seen.json`, ..., `train_hindi.json`, ...), each instance
  validated (`records.read_arramon`), and the vocabulary `na_vocab.txt` when present (one token
  a line, none repeated);
* with `features_dir`, the pose file `pos_sim_passed_sec/pos_<mapId>.json` of every mapId the
  instances name (`features.read_poses`, and a first step recorded for every phase), and every
  feature file `vfeat_sim_passed_sec/vfeat_<mapId>_<tag>.npy` those poses list within the
  demonstrations (the files `features.pack` reads): the header, the bytes it announces, the shape
  [7, 7, 2048] and a float dtype, and (unless `bodies=False`) the whole body, finite also as the
  float16 it is packed into (`features.read_feature`); one summary line for the missing pose
  files and one for the missing feature files (count and first few).

Unlike a run, which stops at the first bad file, it reports one line per bad file (file, then
instance / key / field) and goes on.
"""
from __future__ import annotations

import os
from typing import Mapping

import numpy as np

from ttw_datasets.arramon.arramon_dataset_builder import MANUAL_FILES
from ttw_jax.arramon import features as af
from ttw_jax.arramon import records as ar
from ttw_jax.arramon.episodes import actions_of
from ttw_jax.core import paths
from ttw_jax.core.records import RecordFormatError, check_npy_size, problem_line, read_lines

VOCAB_FILE = "na_vocab.txt"
ERRORS = (RecordFormatError, ValueError, OSError)
SHOWN = 3        # missing files named in a summary line


def check_vocab(path: str) -> int:
    """The number of tokens of a vocabulary file (`na_vocab.txt`: one token a line); an
    ArramonFormatError naming the file (and the line) for an empty file or a repeated token."""
    seen: dict[str, int] = {}
    for line_no, token in read_lines(path, ar.ArramonFormatError):
        if token in seen:
            raise ar.ArramonFormatError(f"{path}:{line_no}: token {token!r} repeats line "
                                        f"{seen[token]}")
        seen[token] = line_no
    if not seen:
        raise ar.ArramonFormatError(f"{path}: no tokens")
    return len(seen)


def needed_features(features_dir: str, rec: Mapping, poses: Mapping) -> list[str]:
    """The feature files `features.pack` reads for one instance: each phase's recorded steps
    among its demonstration's actions (FeatureFormatError naming the pose file when a phase's
    first step has no entry)."""
    where = af.pose_path(features_dir, rec["mapId"])
    out = []
    for turn in range(ar.NUM_TURNS):
        for phase in af.PHASES:
            length = len(actions_of(rec["gt_actions"][f"{phase}_action_gt"][turn]))
            steps = af.recorded_steps(poses, phase, turn, length, where)
            out += [af.feature_path(features_dir, rec["mapId"], phase, turn, int(t))
                    for t in np.flatnonzero(steps)]
    return out


def check_feature_file(path: str, bodies: bool = True) -> None:
    """Checks one feature file: the header and the bytes it announces (`check_npy_size`: a
    truncated file, an object array), the shape and a float dtype, and with `bodies` the whole
    body (`features.read_feature`: finite, also after the cast to float16)."""
    shape, dtype = check_npy_size(path, af.FeatureFormatError)
    if shape != af.FEATURE_SHAPE or dtype.kind != "f":
        raise af.FeatureFormatError(f"{path}: expected float {list(af.FEATURE_SHAPE)}, got "
                                    f"{dtype} {list(shape)}")
    if not bodies:
        return
    with np.errstate(over="ignore"):          # the cast to float16: read_feature reports it
        af.read_feature(path)


def check_features(features_dir: str, records: list[Mapping], bodies: bool = True
                   ) -> tuple[list[str], int]:
    """(problems, files checked) of the pose and feature files `records` need."""
    if not paths.isdir(features_dir):
        return [f"{features_dir}: not a folder. {af.HINT}"], 0
    problems, checked, needed = [], 0, {}
    poses: dict = {}                       # mapId -> poses, or None when missing / bad
    missing_poses = []
    for rec in records:
        map_id = rec["mapId"]
        if map_id not in poses:
            poses[map_id] = None
            path = af.pose_path(features_dir, map_id)
            if not paths.isfile(path):
                missing_poses.append(os.path.basename(path))
                continue
            checked += 1
            try:
                poses[map_id] = af.read_poses(features_dir, map_id)
            except ERRORS as e:
                problems.append(problem_line(path, e))
                continue
        if poses[map_id] is None:
            continue
        try:
            needed.update(dict.fromkeys(needed_features(features_dir, rec, poses[map_id])))
        except ERRORS as e:
            problems.append(problem_line(af.pose_path(features_dir, map_id), e))
            poses[map_id] = None           # one line per pose file
    missing = []
    for path in needed:
        if not paths.isfile(path):
            missing.append(os.path.basename(path))
            continue
        checked += 1
        try:
            check_feature_file(path, bodies)
        except ERRORS as e:
            problems.append(problem_line(path, e))
    if missing_poses:
        problems.append(f"{os.path.join(features_dir, af.POS_DIR)}: no pose file for "
                        f"{len(missing_poses)} mapIds the records name, e.g. "
                        f"{missing_poses[:SHOWN]}")
    if missing:
        problems.append(f"{os.path.join(features_dir, af.VFEAT_DIR)}: no feature file for "
                        f"{len(missing)} steps the pose files list, e.g. {missing[:SHOWN]}")
    return problems, checked


def validate_release(manual_dir: str, features_dir: str | None = None, bodies: bool = True
                     ) -> tuple[list[str], int]:
    """(problems, files checked): one line per bad file, in the order above (the missing pose
    and feature files last, one line each)."""
    problems, checked, records = [], 0, []
    names = [n for files in MANUAL_FILES.values() for n in files.values()]
    found = [os.path.join(manual_dir, n) for n in names
             if paths.isfile(os.path.join(manual_dir, n))]
    for path in found:
        checked += 1
        try:
            instances = ar.read_arramon(path)
            if not instances:
                raise ar.ArramonFormatError(f"{path}: no instances")
        except ERRORS as e:
            problems.append(problem_line(path, e))
            continue
        records += instances
    if not found:
        problems.append(f"{manual_dir}: no instance file (expected any of {', '.join(names)}). "
                        f"{ar.SOURCE_HINT}")
    vocab = os.path.join(manual_dir, VOCAB_FILE)
    if paths.isfile(vocab):
        checked += 1
        try:
            check_vocab(vocab)
        except ERRORS as e:
            problems.append(problem_line(vocab, e))
    if features_dir:
        more, n = check_features(features_dir, records, bodies)
        problems += more
        checked += n
    return problems, checked
