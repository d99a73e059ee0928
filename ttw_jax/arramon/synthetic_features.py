"""Pre-recorded features in the ArraMon release's layout (`features`) for any instances, e.g.
the synthetic ones: the stand-in for the release's `pos_sim_passed_sec/` and
`vfeat_sim_passed_sec/` in tests and quick runs (the release's own files are ResNet maps of
the Unity views, which this project does not render).

For every instance, turn and phase one pose entry and one `[7, 7, 2048]` float32 map per
demonstration step t (the view before action t), optionally skipping some steps (`skip_every`:
no entry, as the release allows). A map is seeded noise plus a signal: channels 0..3 hold the
one-hot of the demonstration's action t (times `signal`), so a model that reads the views can
learn to imitate from them and one that ignores them cannot (tests).
"""
from __future__ import annotations

import json
import os
from typing import Mapping, Sequence

import numpy as np

from ttw_jax.arramon import episodes as ae
from ttw_jax.arramon.features import (FEATURE_SHAPE, PHASES, POS_DIR, VFEAT_DIR, feature_path,
                                      pose_path)


def _poses(path: Sequence, actions: Sequence[int]) -> list[list[float]]:
    """The position before each action: the path advances on every forward action."""
    out, k = [], 0
    for a in actions:
        out.append([float(v) for v in path[min(k, len(path) - 1)]])
        k += a == 0            # FORWARD
    return out


def write_features(records: Sequence[Mapping], features_dir: str, seed: int = 0,
                   signal: float = 4.0, noise: float = 1.0, skip_every: int = 0) -> int:
    """Writes the pose and feature files of `records` into `features_dir`; returns the number of
    feature files. `skip_every` k > 0 leaves out the entry (and file) of every k-th step
    (t = k, 2k, ...; step 0 is always recorded)."""
    os.makedirs(os.path.join(features_dir, POS_DIR), exist_ok=True)
    os.makedirs(os.path.join(features_dir, VFEAT_DIR), exist_ok=True)
    rng = np.random.default_rng(seed)
    written = 0
    for rec in records:
        entries = {}
        for turn in range(2):
            for phase in PHASES:
                actions = ae.actions_of(rec["gt_actions"][f"{phase}_action_gt"][turn])
                poses = _poses(rec["gt_paths"][f"{phase}_path_gt"][turn], actions)
                for t, (a, pos) in enumerate(zip(actions, poses)):
                    if t and skip_every and t % skip_every == 0:
                        continue
                    feat = noise * rng.standard_normal(FEATURE_SHAPE).astype(np.float32)
                    feat[..., a] += signal
                    np.save(feature_path(features_dir, rec["mapId"], phase, turn, t), feat)
                    written += 1
                    entries[f"{rec['mapId']}_{phase}_{turn}_{t}"] = [
                        -1, [-1.0, -1.0, -1.0], pos, [0.0, 0.0, 0.0]]
        with open(pose_path(features_dir, rec["mapId"]), "w") as f:
            json.dump(entries, f)
    return written
