"""Pre-recorded features in the ArraMon release's layout (`features`) for any instances, e.g.
the synthetic ones: the stand-in for the release's `pos_sim_passed_sec/` and
`vfeat_sim_passed_sec/` in tests and quick runs (the release's own files are ResNet maps of
the Unity views, which this project does not render).

For every instance, turn and phase one pose entry and one `[7, 7, 2048]` float32 map per
demonstration step t (the view before action t), optionally skipping some steps (`skip_every`:
no entry, as the release allows). A map is seeded noise plus a signal: channels 0..3 hold the
one-hot of the demonstration's action t (times `signal`), so a model that reads the views can
learn to imitate from them and one that ignores them cannot (tests). An entry's `agent_pos` is
the demonstration's position before action t (the ground-truth path point, Unity (x, y, z)) and
its `agent_rot` the Euler angles (0, yaw, 0) of its heading in degrees (`features`' reading).

Test variants: `variants` writes the pose files in layouts the official dict lookup reads the
same (`VARIANTS`: keys in a shuffled order, `obj_ids` as the float -1.0, extra keys of a third
turn, copies of turn 1's); `shift` s records under tag t the step t + s (pose, view and signal,
clamped to the phase's steps and the pose after its last action): a recording off by s steps.
"""
from __future__ import annotations

import json
import math
import os
from typing import Mapping, Sequence

import numpy as np

from ttw_jax.arramon import env, episodes as ae
from ttw_jax.arramon.features import (FEATURE_SHAPE, PHASES, POS_DIR, TURNS, VFEAT_DIR,
                                      feature_path, pose_path)

VARIANTS = ("shuffled", "float_ids", "third_turn")
TURN_STEP = {env.LEFT: -1, env.RIGHT: 1}


def demonstration_steps(rec: Mapping, phase: str, turn: int) -> tuple[list[int], list[tuple]]:
    """(actions, poses) of one phase of one turn: its demonstration's actions and the poses
    (agent_pos [x, y, z], agent_rot [0, yaw, 0] degrees) before each action and after the last
    (the path advances on every forward action; navigation headings from psi0 and the turn's
    start heading, assembly ones from +z)."""
    actions = ae.actions_of(rec["gt_actions"][f"{phase}_action_gt"][turn])
    path = rec["gt_paths"][f"{phase}_path_gt"][turn]
    base, h = ((math.degrees(ae.start_heading(rec)), ae.turn_headings(rec)[turn])
               if phase == "navi" else (0.0, 0))
    out, k = [], 0
    for a in [*actions, None]:
        out.append(([float(v) for v in path[min(k, len(path) - 1)]],
                    [0.0, (base + 30.0 * h) % 360.0, 0.0]))
        k += a == env.FORWARD
        h += TURN_STEP.get(a, 0)
    return actions, out


def write_features(records: Sequence[Mapping], features_dir: str, seed: int = 0,
                   signal: float = 4.0, noise: float = 1.0, skip_every: int = 0,
                   variants: Sequence[str] = (), shift: int = 0) -> int:
    """Writes the pose and feature files of `records` into `features_dir`; returns the number of
    feature files. `skip_every` k > 0 leaves out the entry (and file) of every k-th step
    (t = k, 2k, ...; step 0 is always recorded); `variants` and `shift`: see the module
    docstring (the feature maps do not depend on `variants`)."""
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        raise ValueError(f"unknown pose-file variants {unknown}; available: {VARIANTS}")
    os.makedirs(os.path.join(features_dir, POS_DIR), exist_ok=True)
    os.makedirs(os.path.join(features_dir, VFEAT_DIR), exist_ok=True)
    rng = np.random.default_rng(seed)
    order = np.random.default_rng([seed, 1])
    written = 0
    for rec in records:
        entries = {}
        for turn in range(2):
            for phase in PHASES:
                actions, poses = demonstration_steps(rec, phase, turn)
                for t in range(len(actions)):
                    if t and skip_every and t % skip_every == 0:
                        continue
                    s = min(max(t + shift, 0), len(actions))     # the step recorded as t
                    feat = noise * rng.standard_normal(FEATURE_SHAPE).astype(np.float32)
                    feat[..., actions[min(s, len(actions) - 1)]] += signal
                    np.save(feature_path(features_dir, rec["mapId"], phase, turn, t), feat)
                    written += 1
                    entry = [-1.0 if "float_ids" in variants else -1, [-1.0, -1.0, -1.0],
                             *poses[s]]
                    entries[f"{rec['mapId']}_{phase}_{turn}_{t}"] = entry
                    if turn == 1 and "third_turn" in variants:
                        entries[f"{rec['mapId']}_{phase}_{TURNS}_{t}"] = entry
        if "shuffled" in variants:
            keys = list(entries)
            order.shuffle(keys)
            entries = {k: entries[k] for k in keys}
        with open(pose_path(features_dir, rec["mapId"]), "w") as f:
            json.dump(entries, f)
    return written
