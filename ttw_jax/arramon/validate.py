"""Checks a whole ArraMon release before a run: every file read to the end, every problem named.

`validate_release(manual_dir, features_dir)` reads what the builder and the trainer read:

* every instance file of the builder's `english` and `hindi` configs present in `manual_dir`
  (`MANUAL_FILES`: `train.json`, `val_seen.json`, ..., `train_hindi.json`, ...), each instance
  validated (`records.validated`: every field, coordinates under the shared rule, no instance
  repeated; one line per file names the first bad instance and counts the others; the file's
  valid instances are still used below), and the vocabulary `na_vocab.txt` when present, as training
  reads it (`episodes.read_vocab_file`: `<PAD>`, `<UNK>` first, one token a line, no blank line,
  none repeated), its last line ending with a newline (`check_vocab`: else it was cut short);
* with `features_dir`, every pose file `pos_sim_passed_sec/pos_<mapId>.json` and every feature
  file `vfeat_sim_passed_sec/vfeat_<mapId>_<tag>.npy`, listed from their folders, so that a bad
  instance file hides none of them: each pose file read (`features.read_poses`: keys, and each
  entry's fields, positions and angles under the shared rule), each feature file's header,
  exactly the bytes it announces, the shape [7, 7, 2048] and a float dtype, and (unless
  `bodies=False`) the whole body as training reads it (`features.read_feature`: finite as stored
  and as the float16 it is packed into); then, for the valid instances, a pose file per
  mapId with a first step recorded for every phase, and the feature files those poses list
  within the demonstrations (the files `features.pack` reads): one summary line for the missing
  pose files and one for the missing feature files (count and the first few paths);
* with `features_dir`, the tag alignment of each instance file (`tag_alignment`): the recorded
  `agent_pos` (x, z) of every entry within the demonstrations against the pose before the
  demonstration's action t (`features.demonstration_poses`, replayed on the split's walkable map
  as training does): how many entries differ by more than `features.POSE_TOL`, the worst ones
  (pose file and key), and how many would differ with tag t taken as step t + 1 or t - 1. Its
  summary lines (and the count of ignored keys of turns >= 2) are `notes`, information: training
  takes the recorded poses where they differ (`features.merge_recorded`). A recording that a
  shift by one step aligns clearly better (under half the share of differing entries) is a
  problem: its tag t is not the view before action t.

Unlike a run, which stops at the first bad file, it reports one line per bad file (file, then
instance / key / field) and goes on.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Mapping, Sequence

import numpy as np

from ttw_datasets.arramon.arramon_dataset_builder import MANUAL_FILES
from ttw_jax.arramon import episodes as ae, features as af
from ttw_jax.arramon import records as ar
from ttw_jax.arramon.episodes import actions_of
from ttw_jax.core import paths
from ttw_jax.core.records import RecordFormatError, problem_line
from ttw_jax.core.vocab import Vocabulary

VOCAB_FILE = "na_vocab.txt"
ERRORS = (RecordFormatError, ValueError, OSError)
SHOWN = 3        # missing files (or worst entries, or more bad instances) named in a line
SHIFTS = (1, -1)
POSE_FILE = re.compile(r"pos_(.+)\.json")
FEATURE_FILE = re.compile(r"vfeat_.+\.npy")


def read_instances(path: str) -> tuple[list[dict], str | None]:
    """(the valid instances of one instance file, its problem line or None): the first invalid
    or repeated instance (`records.validated`), and how many more there are; an unreadable file
    or one with no instance has none valid."""
    try:
        data = ar.read_instance_list(path)
    except ERRORS as e:
        return [], problem_line(path, e)
    if not data:
        return [], f"{path}: no instances"
    valid, errors = ar.validated(path, data)
    if not errors:
        return valid, None
    line = problem_line(path, errors[0][1])
    more = [i for i, _ in errors[1:]]
    if more:
        line += (f"; {len(more)} more bad instances: {more[:SHOWN]}"
                 + (" ..." if len(more) > SHOWN else ""))
    return valid, line


def check_vocab(path: str) -> None:
    """Checks a vocabulary file as training reads it (`episodes.read_vocab_file`), and that its
    last token ends with a newline as every line of the official file does (else it was cut
    short: its ids still read, the words past the cut would encode as `<UNK>`)."""
    ae.read_vocab_file(path)
    lines = paths.resolve(path).read_bytes().split(b"\n")
    if lines[-1]:
        raise ar.ArramonFormatError(f"{path}: line {len(lines)} does not end with a newline "
                                    "(every line of the official file does): truncated?")


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
    """Checks one feature file: the header (`features.check_feature_header`: exactly the bytes
    it announces, no object array, a float [7, 7, 2048]) and with `bodies` the whole body as
    training reads it (`features.read_feature`: finite as stored and as the float16 it is packed
    into)."""
    if bodies:
        af.read_feature(path)
    else:
        af.check_feature_header(path)


def check_features(features_dir: str, records: list[Mapping], bodies: bool = True
                   ) -> tuple[list[str], int, dict]:
    """(problems, files checked, {mapId: its `features.Poses`, None where missing or bad}):
    every pose and feature file of the folders, listed (also those no valid instance names,
    so that a bad instance file hides none), then the files `records` need."""
    if not paths.isdir(features_dir):
        return [f"{features_dir}: not a folder. {af.HINT}"], 0, {}
    problems, checked, read = [], 0, {}      # read: pose-file mapId -> Poses, None when bad
    for path in paths.list_files(paths.join(features_dir, af.POS_DIR), POSE_FILE.fullmatch):
        map_id = POSE_FILE.fullmatch(os.path.basename(path)).group(1)
        checked += 1
        try:
            read[map_id] = af.read_poses(features_dir, map_id)
        except ERRORS as e:
            read[map_id] = None
            problems.append(problem_line(path, e))
    poses: dict = {}                         # record mapId -> Poses, None when missing / bad
    needed, missing_poses = {}, []
    for rec in records:
        map_id = rec["mapId"]
        if map_id not in poses:
            poses[map_id] = read.get(str(map_id))
            if str(map_id) not in read:
                missing_poses.append(af.pose_path(features_dir, map_id))
        if poses[map_id] is None:
            continue
        try:
            needed.update(dict.fromkeys(needed_features(features_dir, rec, poses[map_id])))
        except ERRORS as e:
            problems.append(problem_line(af.pose_path(features_dir, map_id), e))
            poses[map_id] = None             # one line per pose file
    present = paths.list_files(paths.join(features_dir, af.VFEAT_DIR), FEATURE_FILE.fullmatch)
    for path in present:
        checked += 1
        try:
            check_feature_file(path, bodies)
        except ERRORS as e:
            problems.append(problem_line(path, e))
    have = set(present)
    missing = [p for p in needed if p not in have]
    if missing_poses:
        problems.append(f"{os.path.join(features_dir, af.POS_DIR)}: no pose file for "
                        f"{len(missing_poses)} mapIds the records name, e.g. "
                        f"{missing_poses[:SHOWN]}")
    if missing:
        problems.append(f"{os.path.join(features_dir, af.VFEAT_DIR)}: no feature file for "
                        f"{len(missing)} steps the pose files list, e.g. {missing[:SHOWN]}")
    return problems, checked, poses


@dataclasses.dataclass
class Alignment:
    """The recorded agent_pos of one split against the replayed demonstration: `compared`
    entries and `differ` of them farther than `tol` in (x, z), the `worst` (distance, pose file,
    key), per shift s of `SHIFTS` [compared, differ] with tag t taken as step t + s, and
    `headings` [entries whose agent_rot reads as a heading (`features.recorded_headings`), of
    those at the replayed position with another heading]."""
    split: str
    tol: float = af.POSE_TOL
    compared: int = 0
    differ: int = 0
    worst: list = dataclasses.field(default_factory=list)
    shifted: dict = dataclasses.field(default_factory=lambda: {s: [0, 0] for s in SHIFTS})
    headings: list = dataclasses.field(default_factory=lambda: [0, 0])

    def share(self, shift: int = 0) -> float:
        compared, differ = (self.compared, self.differ) if shift == 0 else self.shifted[shift]
        return differ / compared if compared else 0.0

    def off_by(self) -> int:
        """The shift (+1 / -1) that aligns clearly better than none (under half its share of
        differing entries), else 0."""
        best = min(SHIFTS, key=self.share)
        fits = self.shifted[best][0] and self.share(best) < self.share() / 2
        return best if self.differ and fits else 0

    def line(self) -> str:
        text = (f"tag alignment {self.split}: {self.differ} of {self.compared} recorded agent_pos "
                f"differ from the replayed pose before their action by more than {self.tol:g} "
                "in (x, z)")
        if self.worst:
            text += "; worst " + ", ".join(f"{d:.3g} at {os.path.basename(f)} {k!r}"
                                           for d, f, k in self.worst)
        text += "; with tag t as step " + ", ".join(
            f"t{s:+d}: {d} of {c}" for s, (c, d) in self.shifted.items())
        return (text + f"; agent_rot read as a heading for {self.headings[0]} of {self.compared} "
                f"({self.headings[1]} of them at the replayed position with another heading)")

    def problem(self, features_dir: str) -> str | None:
        s = self.off_by()
        if not s:
            return None
        return (f"{os.path.join(features_dir, af.POS_DIR)}: {self.split}: the recording looks "
                f"shifted by {s:+d} step: {self.differ} of {self.compared} agent_pos differ from "
                f"the pose before action t, {self.shifted[s][1]} of {self.shifted[s][0]} from the "
                f"pose before action t{s:+d} (tag t should be the view before action t)")


def _max_objects(records: Sequence[Mapping]) -> int:
    return max(len(r["world"]["objects"]) if "world" in r else len(r["gt_objects"])
               for r in records)


def tag_alignment(split: str, records: Sequence[Mapping], poses: Mapping, features_dir: str,
                  tol: float = af.POSE_TOL) -> Alignment:
    """`Alignment` of the `records` whose pose file read (`poses`: mapId -> `features.Poses` or
    None), replayed on their own walkable map (`episodes.walkable_for`, as training does)."""
    out = Alignment(split, tol)
    recs = [r for r in records if poses.get(r["mapId"]) is not None]
    if not recs:
        return out
    walk, index = ae.walkable_for(recs)
    ep = ae.episodes(recs, Vocabulary(("<pad>", "<unk>")), 1, _max_objects(recs), index,
                     "ignore")
    replayed = af.demonstration_poses(walk, ep)
    worst = []
    for phase in af.PHASES:
        length = ep[f"{phase}_len"][..., None]                             # [N, 2, 1]
        demo = replayed[phase]
        steps = np.arange(demo.shape[2])
        rec = np.full(demo.shape[:3] + (6,), np.nan, np.float32)
        for i, r in enumerate(recs):
            for turn in range(2):
                k = int(length[i, turn, 0])
                rec[i, turn, :k] = af.entry_poses(poses[r["mapId"]], phase, turn, k)
        for s in (0, *SHIFTS):
            at = np.clip(steps + s, 0, len(steps) - 1)
            valid = (steps < length) & (steps + s >= 0) & (steps + s < length)
            dist = np.where(valid, af.pose_offsets(rec, demo[:, :, at]), np.nan)
            with np.errstate(invalid="ignore"):
                far = dist > tol
            counts = [int(np.isfinite(dist).sum()), int(far.sum())]
            if s:
                out.shifted[s] = [a + b for a, b in zip(out.shifted[s], counts)]
                continue
            out.compared += counts[0]
            out.differ += counts[1]
            heading = af.recorded_headings(rec[..., 3:], af.heading_base(phase, ep["psi0"]))
            read = valid & (heading >= 0)
            out.headings[0] += int(read.sum())
            out.headings[1] += int((read & ~far & (heading != demo[..., 2])).sum())
            for i, turn, t in zip(*np.nonzero(far)):
                map_id = recs[i]["mapId"]
                worst.append((float(dist[i, turn, t]), af.pose_path(features_dir, map_id),
                              f"{map_id}_{phase}_{turn}_{t}"))
    out.worst = sorted(worst, key=lambda w: -w[0])[:SHOWN]
    return out


def validate_release(manual_dir: str, features_dir: str | None = None, bodies: bool = True,
                     notes: list[str] | None = None) -> tuple[list[str], int]:
    """(problems, files checked): one line per bad file, in the order above (the missing pose
    and feature files last, one line each, then the recordings that look shifted); with
    `features_dir` the tag alignment's summary lines are appended to `notes` when given."""
    problems, checked, records, splits = [], 0, [], {}
    names = [n for files in MANUAL_FILES.values() for n in files.values()]
    found = [os.path.join(manual_dir, n) for n in names
             if paths.isfile(os.path.join(manual_dir, n))]
    for path in found:
        checked += 1
        instances, problem = read_instances(path)
        if problem:
            problems.append(problem)
        if instances:
            records += instances
            splits[os.path.splitext(os.path.basename(path))[0]] = instances
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
        more, n, poses = check_features(features_dir, records, bodies)
        problems += more
        checked += n
        lines = []
        for split, instances in splits.items():
            try:
                alignment = tag_alignment(split, instances, poses, features_dir)
            except ERRORS as e:
                problems.append(f"{split}: tag alignment not checked: {type(e).__name__}: {e}")
                continue
            lines.append(alignment.line())
            shifted = alignment.problem(features_dir)
            if shifted:
                problems.append(shifted)
        ignored = [p for p in poses.values() if p is not None and p.ignored]
        if ignored:
            lines.append(f"pose files: {sum(p.ignored for p in ignored)} keys of turns >= "
                         f"{af.TURNS} ignored (in {len(ignored)} files; the official loop reads "
                         "turns 0 and 1)")
        if notes is not None:
            notes += lines
    return problems, checked
