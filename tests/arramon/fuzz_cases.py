"""The ArraMon release of the fuzz corpus (`tests/fuzz.py`): the two real instances of
`val_seen.json` with the fewest actions (`data/val_seen.json`, the official JSON list), the real
`na_vocab.txt`, and their pre-recorded poses and features (not shipped:
`ttw_jax.arramon.synthetic_features.write_features`, the official `pos_sim_passed_sec/` and
`vfeat_sim_passed_sec/` layout, the first step of each phase recorded); each case damages one
file or field.
"""
from __future__ import annotations

import json
import pathlib
import re
import shutil

import numpy as np

from tests.conftest import shared_path
from tests.fuzz import (DELETE, Case, Release, append, blank_line, duplicate_item, edit_json,
                        edit_npy, edit_text, file_damage, flip_bytes, planted, set_field,
                        truncate)
from ttw_jax.arramon.synthetic_features import write_features

SPLIT, VOCAB = "data/val_seen.json", "data/na_vocab.txt"
SOURCE = (122, 88)                 # the val_seen instances used: the two with fewest actions
MAP_IDS = (36661, 36646)           # their mapIds
# The damaged pose file and feature file are instance 1's, like the damaged instance fields: the
# tag alignment then replays instance 0 alone in every case (one more compilation, not two).
POSE = f"features/pos_sim_passed_sec/pos_{MAP_IDS[1]}.json"
KEY = f"{MAP_IDS[1]}_navi_0_0"     # the pose entry the cases damage
FEATURE = f"features/vfeat_sim_passed_sec/vfeat_{MAP_IDS[1]}_navi_1_0.npy"
NAN, INF = float("nan"), float("inf")
# groups and the two-turn lists in them (records.TURN_FIELDS)
GROUPS = {"gt_objects_pos": ("navi_obj_pos_gt", "assem_obj_pos_gt"),
          "gt_paths": ("navi_path_gt", "assem_path_gt"),
          "gt_actions": ("navi_action_gt", "assem_action_gt"),
          "gt_actionIDs": ("navi_actionIDs_gt", "assem_actionIDs_gt"),
          "instructions": ("navi_inst_gt", "assem_inst_gt")}


def build(root: pathlib.Path) -> None:
    """The clean release: `data/` (val_seen.json, na_vocab.txt) and `features/`."""
    instances = json.loads(pathlib.Path(shared_path("arramon", "val_seen.json")).read_text())
    records = [instances[i] for i in SOURCE]
    assert tuple(r["mapId"] for r in records) == MAP_IDS
    (root / "data").mkdir(parents=True)
    (root / SPLIT).write_text(json.dumps(records))
    shutil.copyfile(shared_path("arramon", "na_vocab.txt"), root / VOCAB)
    write_features(records, str(root / "features"), skip_every=1)


def flags(root: pathlib.Path) -> dict:
    return {"data_dir": str(root / "data"), "features_dir": str(root / "features")}


def _field(dotted: str) -> str:
    """The message's name of a `set_field` path: `a.b.0.1` -> `a.b[0][1]`."""
    return re.sub(r"\.(\d+)", r"[\1]", dotted)


def _instance(field: str, value, index: int = 1, named: str | None = None) -> Case:
    """Instance `index` of the split with `field` (a `set_field` path) set to `value`; the problem
    names the instance and the field `named` (default: `field` itself)."""
    what = "deleted" if value is DELETE else f"= {value!r}"
    shown = re.escape(_field(named if named is not None else field))
    return Case(f"instance {index}: {field} {what}", SPLIT, set_field(index, field, value),
                rf"instance {index}\b.*'{shown}")


def instance_cases() -> list[Case]:
    """Every field of an instance deleted and of a wrong type; its numbers NaN, infinite, 1e300
    or out of range; its strings and lists empty; a repeated instance."""
    out = []
    for top in ("mapId", "gt_objects", *GROUPS):
        out += [_instance(top, DELETE), _instance(top, str(MAP_IDS[1]) if top == "mapId" else "x")]
    out += [_instance(f"{group}.{name}", DELETE) for group, fields in GROUPS.items()
            for name in fields]
    out += [_instance("gt_paths.navi_path_gt", []), _instance("instructions.navi_inst_gt", []),
            _instance("code", ""), _instance("code", 7), _instance("filename", "")]
    numbers = {"gt_paths.navi_path_gt.0.1.0": (NAN, INF, 1e300),
               "gt_paths.assem_path_gt.1.0.2": (NAN, 1e300),
               "gt_objects_pos.navi_obj_pos_gt.0.2": (NAN, -1e300)}
    out += [_instance(field, value, named=field.rsplit(".", 1)[0])
            for field, values in numbers.items() for value in values]
    out += [
        _instance("mapId", 1.5), _instance("mapId", 2**40), _instance("mapId", True),
        _instance("gt_objects_pos.assem_obj_pos_gt.0.0", -1,
                  named="gt_objects_pos.assem_obj_pos_gt.0"),
        _instance("gt_objects_pos.assem_obj_pos_gt.1.1", 3,
                  named="gt_objects_pos.assem_obj_pos_gt.1"),
        _instance("gt_objects_pos.assem_obj_pos_gt.1.2", 2.5,
                  named="gt_objects_pos.assem_obj_pos_gt.1"),
        _instance("gt_actionIDs.navi_actionIDs_gt.0.1", -1),
        _instance("gt_actionIDs.assem_actionIDs_gt.1.0", NAN),
        _instance("gt_actions.navi_action_gt.1.2", ""),
        _instance("gt_actions.navi_action_gt.0.-1", "1", named="gt_actions.navi_action_gt.0"),
        _instance("gt_paths.navi_path_gt.0", []),
        _instance("gt_paths.navi_path_gt.1.0", [1.0, 0.525]),
        _instance("gt_objects.0", ""), _instance("gt_objects.1", "Dotted Pink Ball"),
        _instance("gt_objects", []),
        _instance("instructions.navi_inst_gt.0", ""),
        _instance("instructions.assem_inst_gt.1", "   "),
        _instance("instructions.assem_inst_gt.0", None),
        _instance("gt_objects", ["Dotted Yellow Hourglass"]),
        Case("instance 0 repeated", SPLIT, duplicate_item(0), r"instance 2\b.*copy of instance 0"),
        Case("an instance that is not an object", SPLIT, edit_json(lambda d: d + [7]),
             r"instance 2\b.*expected a JSON object"),
        Case("top level an object", SPLIT, edit_json(lambda d: {"instances": d}), "top level"),
        Case("no instances", SPLIT, edit_json(lambda d: []), "no instances"),
        Case("bytes appended", SPLIT, append(), r"line 1, column \d+"),
    ]
    return out


def _entry(field: str, value, name: str) -> Case:
    """The pose entry `KEY` with its field `field` (0 obj_ids .. 3 agent_rot; `a.b` walks into
    it) set to `value`."""
    return Case(f"pose {KEY}[{field}] = {value!r}", POSE, set_field(KEY, str(field), value),
                rf"key '{KEY}': field '{name}'")


def pose_cases() -> list[Case]:
    """A pose file's entries with fields out of range, of the wrong type or missing; bad keys,
    a first step with no entry, an empty file."""
    numbers = {("2.0", "agent_pos"): (NAN, INF, 1e300), ("1.2", "obj_pos"): (NAN, 1e300),
               ("3.1", "agent_rot"): (NAN, "1.0")}
    out = [_entry(field, value, name) for (field, name), values in numbers.items()
           for value in values]
    out += [
        _entry("3", 1e4, "agent_rot"), _entry("3", "north", "agent_rot"),
        _entry("0", 1.5, "obj_ids"), _entry("0", "x", "obj_ids"), _entry("0", NAN, "obj_ids"),
        _entry("2", [], "agent_pos"), _entry("1", None, "obj_pos"),
        Case(f"pose {KEY}: 3 fields", POSE, set_field(KEY, "3", DELETE), rf"key '{KEY}'"),
        Case(f"pose {KEY}: not a list", POSE, set_field(None, KEY, {"agent_pos": [0, 0, 0]}),
             rf"key '{KEY}'"),
        Case("pose key of another map", POSE,
             edit_json(lambda d: {**d, f"{MAP_IDS[0]}_navi_0_3": d[KEY]}),
             rf"key '{MAP_IDS[0]}_navi_0_3'"),
        Case("pose key of another phase", POSE,
             edit_json(lambda d: {**d, f"{MAP_IDS[1]}_walk_0_3": d[KEY]}),
             rf"key '{MAP_IDS[1]}_walk_0_3'"),
        Case("pose: first step without an entry", POSE, set_field(None, KEY, DELETE),
             "no entry for navi_0_0"),
        Case("pose: no entries", POSE, edit_json(lambda d: {}), "no entries"),
        Case("pose: a list", POSE, edit_json(lambda d: list(d.values())), "top level"),
        Case("pose: bytes appended", POSE, append(), r"line 1, column \d+"),
    ]
    return out


def feature_cases() -> list[Case]:
    """A feature file with NaN / inf planted, float64 1e300 (infinite as float16), float32
    beyond float16's range, integer or boolean values, another shape; damaged bytes (in the
    header: a flip in the middle of a raw `.npy` changes values, which no check can see unless
    they become non-finite), appended bytes, deleted."""
    index = r"at index \(\d+, \d+, \d+\)"
    shape = r"expected float \[7, 7, 2048\], got "
    return [
        Case("feature: NaN", FEATURE, edit_npy(lambda a: planted(a, NAN)), index),
        Case("feature: float64 1e300", FEATURE,
             edit_npy(lambda a: planted(a, 1e300, np.float64)), rf"{index} is not finite as "
                                                                "float16"),
        Case("feature: float32 1e6", FEATURE, edit_npy(lambda a: planted(a, 1e6)),
             rf"{index} is not finite as float16"),
        Case("feature: float16 inf", FEATURE,
             edit_npy(lambda a: planted(a, INF, np.float16)), index),
        Case("feature: integers", FEATURE, edit_npy(lambda a: a.astype(np.int32)),
             shape + "int32"),
        Case("feature: booleans", FEATURE, edit_npy(lambda a: a > 0), shape + "bool"),
        Case("feature: another shape", FEATURE, edit_npy(lambda a: a[..., :1024]),
             shape + r"float32 \[7, 7, 1024\]"),
        Case("feature: flattened", FEATURE, edit_npy(lambda a: a.reshape(49, 2048)),
             shape + r"float32 \[49, 2048\]"),
        Case("feature: 16 bytes flipped in the header", FEATURE, flip_bytes(at=0.0)),
        Case("feature: truncated", FEATURE, truncate()),
        Case("feature: empty", FEATURE, lambda p: p.write_bytes(b"")),
        Case("feature: bytes appended", FEATURE, append(), "bytes after the array"),
        Case("feature: deleted", FEATURE, lambda p: p.unlink(), "no feature file for 1 steps"),
        Case("pose file: deleted", POSE, lambda p: p.unlink(), "no pose file for 1 mapIds"),
    ]


def vocab_cases() -> list[Case]:
    """The vocabulary with a blank line, a repeated token, a token with a space or a control
    character, not starting with <PAD>, <UNK>."""
    return [
        Case("vocab: blank line", VOCAB, blank_line(5), r"line 6 is ''"),
        Case("vocab: blank last line", VOCAB, edit_text(lambda lines: lines + [""]),
             r"line 775 is ''"),
        Case("vocab: token repeated", VOCAB, edit_text(lambda lines: lines + ["the"]),
             r"'the' on lines 3 and 775"),
        Case("vocab: a word count line", VOCAB,
             edit_text(lambda lines: lines[:3] + ["the 412"] + lines[4:]), r"line 4 is"),
        Case("vocab: bytes appended", VOCAB, append(), r"line 775 is"),
        Case("vocab: <UNK> missing", VOCAB, edit_text(lambda lines: lines[:1] + lines[2:]),
             "starts with"),
    ]


def cases() -> list[Case]:
    return (file_damage(SPLIT) + file_damage(VOCAB) + file_damage(POSE) + instance_cases()
            + pose_cases() + feature_cases() + vocab_cases())


RELEASE = Release("arramon", build, flags, cases)
