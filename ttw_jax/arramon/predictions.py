"""Per-instance ArraMon predictions: what the agent did in each turn, written for every evaluated
split, and a scorer that re-reads them to the task metrics.

A predictions file (`predictions_<split>.json`) is a JSON object keyed by `mapId` (as the
official `main.py`'s `map_path`; `"<mapId>_<index>"` for a mapId that a split repeats), each
value {"index": position in the split when written (the scorer finds an instance's entry by its
key, so the split file's order does not matter), "mapId": ..., "turns": [turn 1, turn 2]} with
per turn

    navi_path       [[x, z], ...]   the navigation path (the start, then one point per move)
    picked          int             the object picked up: 0 / 1 are the turn-1 / turn-2 targets
                                    (the instance's `gt_objects`), higher ones the synthetic
                                    distracters; -1 none
    picked_object   str | null      its name ("Dotted Yellow Hourglass")
    pick_fallback   bool            picked by the fallback (nearest object at the step limit)
    assem_path      [[x, z], ...]   the assembly path (world coordinates of the cells visited)
    placement       [gx, level, gz] where the object was placed
    place_fallback  bool            placed by the fallback (in front, at the step limit)

`score_predictions` recomputes nDTW, CTC-k, assembly nDTW, rPOD and PTC from these fields and
the split's instances with the reference definitions of `metrics` (`ndtw_np`, `ctc_np`,
`placement_np`), so a file written by a run scores to the run's results (tests), and a
test-split file can be scored by whoever holds the gold instances. A hidden split's file (the
release's test_unseen, `dataset.HIDDEN_SPLITS`) is written by `write_checked_predictions`: its
format and the split's complete instance set are checked first.
"""
from __future__ import annotations

import json
from collections import Counter
from typing import Mapping, Sequence

import numpy as np

from ttw_jax.arramon import metrics as am
from ttw_jax.core import paths
from ttw_jax.core.records import RecordFormatError, is_int, is_number, list_of, read_json

TURN_FIELDS = ("navi_path", "picked", "picked_object", "pick_fallback", "assem_path",
               "placement", "place_fallback")


def object_names(rec: Mapping) -> list[str]:
    """The names of an instance's objects, in the simulator's order (targets first)."""
    world = rec.get("world")
    return [o["name"] for o in world["objects"]] if world is not None else list(rec["gt_objects"])


def instance_keys(records: Sequence[Mapping]) -> list[str]:
    """The predictions-file key of each instance: its mapId, or "<mapId>_<index>" when the
    split holds that mapId more than once."""
    counts = Counter(str(r["mapId"]) for r in records)
    return [str(r["mapId"]) if counts[str(r["mapId"])] == 1 else f"{r['mapId']}_{i}"
            for i, r in enumerate(records)]


def predictions(records: Sequence[Mapping], per: Mapping[str, np.ndarray]) -> dict:
    """The predictions object of a split from the per-episode arrays of
    `evaluation.evaluate(...)["episodes"]` (episodes in the order of `records`)."""
    out = {}
    for i, (key, rec) in enumerate(zip(instance_keys(records), records)):
        names = object_names(rec)
        turns = []
        for t in range(2):
            picked = int(per[f"picked_{t}"][i])
            turns.append({
                "navi_path": per[f"navi_xz_{t}"][i, :per[f"navi_xz_len_{t}"][i]].tolist(),
                "picked": picked,
                "picked_object": names[picked] if 0 <= picked < len(names) else None,
                "pick_fallback": bool(per[f"pick_auto_{t}"][i]),
                "assem_path": per[f"assem_xz_{t}"][i, :per[f"assem_xz_len_{t}"][i]].tolist(),
                "placement": [int(v) for v in per[f"placed_{t}"][i]],
                "place_fallback": bool(per[f"place_auto_{t}"][i]),
            })
        out[key] = {"index": i, "mapId": rec["mapId"], "turns": turns}
    return out


def write_predictions(path: paths.PathLike, preds: Mapping) -> None:
    paths.write_text(path, json.dumps(preds) + "\n")


def write_checked_predictions(path: paths.PathLike, preds: Mapping,
                              records: Sequence[Mapping]) -> None:
    """Writes `preds` for a leaderboard (a hidden split) after checking what will be read back:
    the format (`check_format`) and every instance of the split's `records` exactly once
    (`check_instances`); RecordFormatError / ValueError naming the file otherwise."""
    text = json.dumps(preds) + "\n"
    name = paths.resolve(path).name
    check_instances(check_format(json.loads(text), name), records, name)
    paths.write_text(path, text)


def _check(cond: bool, where: str, field: str, what: str) -> None:
    if not cond:
        raise RecordFormatError(f"{where}: field {field!r} must be {what}")


_points = list_of(list_of(is_number, 2, 2), 1)     # [[x, z], ...], at least one point


def read_predictions(path: str) -> dict:
    """The predictions object of `path`, validated; RecordFormatError naming the file, the key
    and the field of a malformed entry."""
    return check_format(read_json(path), path)


def check_format(data, source: str) -> dict:
    """`data` if it is a predictions object; RecordFormatError naming `source` (a file), the
    key and the field of a malformed entry."""
    if not isinstance(data, dict):
        raise RecordFormatError(f"{source}: top level: expected a JSON object keyed by mapId")
    for key, entry in data.items():
        where = f"{source}: instance {key!r}"
        _check(isinstance(entry, dict), where, "", "an object")
        _check(is_int(entry.get("index")) and entry["index"] >= 0, where, "index",
               "a non-negative integer")
        turns = entry.get("turns")
        _check(isinstance(turns, list) and len(turns) == 2, where, "turns", "a list of 2 turns")
        for t, turn in enumerate(turns):
            f = f"turns[{t}]"
            _check(isinstance(turn, dict) and set(TURN_FIELDS) <= set(turn), where, f,
                   f"an object with {TURN_FIELDS}")
            for name in ("navi_path", "assem_path"):
                _check(_points(turn[name]), where, f"{f}.{name}",
                       "a non-empty list of finite [x, z]")
            _check(is_int(turn["picked"]) and turn["picked"] >= -1, where, f"{f}.picked",
                   "an object index (-1 none)")
            _check(list_of(is_int, 3, 3)(turn["placement"]), where, f"{f}.placement",
                   "[gx, level, gz] integers")
            for name in ("pick_fallback", "place_fallback"):
                _check(isinstance(turn[name], bool), where, f"{f}.{name}", "a bool")
    return data


def check_instances(preds: Mapping, records: Sequence[Mapping], source: str = "") -> list[str]:
    """The predictions key of each of `records` (a split's file, in any order) after checking
    that `preds` holds every instance of the split exactly once: one entry per instance key
    (its mapId, `instance_keys`), with its mapId, and none other; ValueError (naming `source`)
    otherwise. Entries are matched by key, not position, so a split file whose instances are
    reordered scores the same; only a mapId that the split repeats is keyed by position
    ("<mapId>_<index>": the mapId alone does not tell its instances apart)."""
    where = f"{source}: " if source else ""
    keys = instance_keys(records)
    missing = [k for k in keys if k not in preds]
    if missing:
        raise ValueError(f"{where}{len(missing)} of {len(keys)} instances have no prediction, "
                         f"e.g. {missing[:5]}")
    extra = sorted(set(preds) - set(keys))
    if extra:
        raise ValueError(f"{where}predictions for instances the split does not hold: "
                         f"{extra[:5]}")
    for key, rec in zip(keys, records):
        entry = preds[key]
        if str(entry.get("mapId", key)) != str(rec["mapId"]):
            raise ValueError(f"{where}prediction {key!r} is for instance {entry['index']} "
                             f"(mapId {entry.get('mapId')!r}) of the predicted split, not for "
                             f"the split's mapId {rec['mapId']!r}")
    return keys


def score_predictions(preds: Mapping, records: Sequence[Mapping],
                      rule: str = "distance") -> dict:
    """{metric: mean over both turns, f"{metric}_{turn}": per-turn mean} (the names of
    `evaluation.METRICS`) of `preds` against the split's `records`, under CTC `rule`; every
    instance must have its entry, found by its mapId (`check_instances`: the split file's
    order does not matter)."""
    am.check_rule(rule)
    keys = check_instances(preds, records)
    per: dict[str, list[float]] = {}
    for key, rec in zip(keys, records):
        entry = preds[key]
        for t, turn in enumerate(entry["turns"]):
            gold = [p[::2] for p in rec["gt_paths"]["navi_path_gt"][t]]
            gold_assem = [p[::2] for p in rec["gt_paths"]["assem_path_gt"][t]]
            m = {"navi_ndtw": am.ndtw_np(turn["navi_path"], gold),
                 "assem_ndtw": am.ndtw_np(turn["assem_path"], gold_assem)}
            ctcs = am.ctc_np(turn["navi_path"][-1], rec["gt_objects_pos"]["navi_obj_pos_gt"][t],
                             turn["picked"] == t, turn["pick_fallback"], rule=rule)
            m.update(ctcs)
            m.update(am.placement_np(turn["placement"],
                                     rec["gt_objects_pos"]["assem_obj_pos_gt"][t], ctcs,
                                     turn["place_fallback"], rule))
            for name, v in m.items():
                per.setdefault(f"{name}_{t}", []).append(v)
    out = {}
    for name in {k.rsplit("_", 1)[0] for k in per}:
        turns = [float(np.mean(per[f"{name}_{t}"])) for t in range(2)]
        out.update({f"{name}_{t}": v for t, v in enumerate(turns)})
        out[name] = float(np.mean(turns))
    return out
