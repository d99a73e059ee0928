"""ArraMon instances (Kim et al. 2020, the official JSON schema): reading and validation.

A file (`train.json`, `val_seen.json`, ...; github.com/hyounghk/ArraMon, `data/`) is a JSON list of
*instances*, each with two turns; a turn is a navigation phase (walk through a city and pick up an
object) followed by an assembly phase (place it on a 5 x 4 grid). Fields (every list of turns has
exactly 2 entries, turn t = 0, 1):

    code: str                       an identifier (5-6 upper-case characters; not unique in a file)
    mapId: int                      the city map
    filename: str                   the annotation's source file
    gt_objects: [str, str]          the target of each turn, "Pattern Colour Type" (title case,
                                    e.g. "Dotted Yellow Hourglass", "Striped Green Tv")
    gt_objects_pos:
      navi_obj_pos_gt: [[x, y, z]] * 2      world position of each turn's target
      assem_obj_pos_gt: [[gx, level, gz]] * 2   assembly cell where it goes (level 1 floor,
                                                2 stacked); 0 <= gx < 5, 0 <= gz < 4
    gt_paths:
      navi_path_gt: [[[x, 0.525, z], ...]] * 2   the start plus one point per forward step
      assem_path_gt: [[[x, y, z], ...]] * 2      the same on the assembly grid (world coordinates)
    gt_actions:
      navi_action_gt / assem_action_gt: [[a, ..., "t"]] * 2   a in ACTIONS, ending with the turn
                                                              token str(t)
    gt_actionIDs:
      navi_actionIDs_gt / assem_actionIDs_gt: [[id, ...]] * 2   ACTIONS.index of the actions
                                                                without the turn token
    instructions:
      navi_inst_gt / assem_inst_gt: [str, str]   non-empty

Optional `world` (written only by `ttw_jax.arramon.synthetic`; validated when present):

    world:
      bounds: [x0, z0, x1, z1]                       the walkable area's rectangle
      buildings: [[x0, z0, x1, z1], ...]            obstacles (a point strictly inside one is not
                                                     walkable; every navigation path point and
                                                     object must be walkable, `walkable`)
      objects: [{"name": str, "pos": [x, y, z]}, ...]   objects[0] / objects[1] are the turn-0 /
                                                     turn-1 targets (same names and positions as
                                                     gt_objects / navi_obj_pos_gt), then
                                                     distracters
      assembly_objects: [{"name": str, "cell": [gx, level, gz]}, ...]   objects already on the
                                                     assembly grid (distinct cells/levels; a level
                                                     2 object stands on a level 1 one)

`read_arramon` returns the instances unchanged (plain Python types) after validating each with
`validate_instance`; an error raises `ArramonFormatError` naming the file, the instance index (and
its code when it has one) and the field, e.g.
`val_seen.json: instance 3 (code 'THNOR'): field 'gt_actions.navi_action_gt[1][5]' is not one of
('f', 'l', 'r', 'P'): 'x'`.

Geometry (`/work/shared/README.md`, reconstructed from the data): navigation headings are measured
from +z towards +x (`atan2(dx, dz)`), a forward step adds (sin psi, cos psi) to (x, z), `l` / `r`
turn by -30 / +30 degrees. Each assembly phase starts at cell (gx=2, gz=0) facing +z, whose world
position is `ASSEMBLY_ORIGIN`; a cell is `CELL` = 1.5 units (`assembly_world`).
"""
from __future__ import annotations

import json
import math
import numbers
import os
from typing import Any, Mapping

SOURCE_HINT = ("ArraMon instances are in the official release, github.com/hyounghk/ArraMon, "
               "`data/` (the test split is sent on request by e-mail to the authors, "
               "arramonunc@gmail.com).")

ACTIONS = ("f", "l", "r", "P")                   # ids 0..3: forward, left, right, pick / place
NUM_TURNS = 2
PATTERNS = ("dotted", "striped")
COLOURS = ("green", "red", "blue", "white", "yellow", "brown", "purple")
TYPES = ("ball", "hourglass", "mug", "tv", "book", "bowl", "bucket")

GRID_COLUMNS = 5                                 # gx 0..4
GRID_ROWS = 4                                    # gz 0..3
LEVELS = (1, 2)                                  # floor, stacked
START_CELL = (2, 0)                              # (gx, gz) where each assembly phase starts
ASSEMBLY_ORIGIN = (239.656616, -487.623871, -199.363037)   # world position of START_CELL
CELL = 1.5

# (group, field) of every two-turn list
TURN_FIELDS = (("gt_objects_pos", "navi_obj_pos_gt"), ("gt_objects_pos", "assem_obj_pos_gt"),
               ("gt_paths", "navi_path_gt"), ("gt_paths", "assem_path_gt"),
               ("gt_actions", "navi_action_gt"), ("gt_actions", "assem_action_gt"),
               ("gt_actionIDs", "navi_actionIDs_gt"), ("gt_actionIDs", "assem_actionIDs_gt"),
               ("instructions", "navi_inst_gt"), ("instructions", "assem_inst_gt"))
REQUIRED = ("code", "mapId", "filename", "gt_objects") + tuple(dict.fromkeys(
    g for g, _ in TURN_FIELDS))
# phase -> (path field, actions field, action-ids field)
PHASES = {"navi": ("gt_paths.navi_path_gt", "gt_actions.navi_action_gt",
                   "gt_actionIDs.navi_actionIDs_gt"),
          "assem": ("gt_paths.assem_path_gt", "gt_actions.assem_action_gt",
                    "gt_actionIDs.assem_actionIDs_gt")}
WORLD_KEYS = ("bounds", "buildings", "objects", "assembly_objects")


class ArramonFormatError(ValueError):
    """An instance file exists but an instance does not validate; the message names the file, the
    instance (index and code) and the field."""


# ----------------------------------------------------------------------------- names and grid

def parse_object_name(name: Any) -> tuple[str, str, str]:
    """(pattern, colour, type), lower-cased, of an object name "Pattern Colour Type" (any case,
    e.g. "Dotted Yellow Hourglass"); ArramonFormatError for anything else."""
    words = name.lower().split() if isinstance(name, str) else []
    if (len(words) != 3 or words[0] not in PATTERNS or words[1] not in COLOURS
            or words[2] not in TYPES):
        raise ArramonFormatError(
            f"object name {name!r} is not 'Pattern Colour Type' with pattern in {PATTERNS}, "
            f"colour in {COLOURS}, type in {TYPES}")
    return words[0], words[1], words[2]


def in_grid(gx: int, gz: int) -> bool:
    return 0 <= gx < GRID_COLUMNS and 0 <= gz < GRID_ROWS


def assembly_world(gx: float, gz: float) -> tuple[float, float, float]:
    """World (x, y, z) of assembly cell (gx, gz): x = x0 + CELL (gx - 2), y = y0,
    z = z0 + CELL gz with (x0, y0, z0) = ASSEMBLY_ORIGIN."""
    x0, y0, z0 = ASSEMBLY_ORIGIN
    return (x0 + CELL * (gx - START_CELL[0]), y0, z0 + CELL * (gz - START_CELL[1]))


def walkable(world: Mapping, x: float, z: float) -> bool:
    """Is (x, z) inside `world["bounds"]` (edges included) and not strictly inside any of
    `world["buildings"]`?"""
    x0, z0, x1, z1 = world["bounds"]
    if not (x0 <= x <= x1 and z0 <= z <= z1):
        return False
    return not any(b[0] < x < b[2] and b[1] < z < b[3] for b in world["buildings"])


# ----------------------------------------------------------------------------- field checks

def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _bad(where: str, name: str, what: str, value: Any) -> ArramonFormatError:
    return ArramonFormatError(f"{where}: field '{name}' is not {what}: {_shown(value)}")


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_finite(v: Any) -> bool:
    return (isinstance(v, numbers.Real) and not isinstance(v, bool)
            and math.isfinite(float(v)))


def _numbers(v: Any, count: int) -> bool:
    return isinstance(v, list) and len(v) == count and all(_is_finite(x) for x in v)


def _get(inst: Mapping, dotted: str, where: str) -> Any:
    """The value at `group.field` (or `field`), ArramonFormatError naming what is missing."""
    value, seen = inst, []
    for part in dotted.split("."):
        if not isinstance(value, Mapping):
            raise _bad(where, ".".join(seen), "an object", value)
        seen.append(part)
        if part not in value:
            raise ArramonFormatError(f"{where}: missing field '{'.'.join(seen)}'")
        value = value[part]
    return value


def _turns(inst: Mapping, dotted: str, where: str) -> list:
    value = _get(inst, dotted, where)
    if not isinstance(value, list) or len(value) != NUM_TURNS:
        raise _bad(where, dotted, f"a list of {NUM_TURNS} turns", value)
    return value


def _cell(v: Any) -> bool:
    """[gx, level, gz] integers inside the assembly grid."""
    return (isinstance(v, list) and len(v) == 3 and all(_is_int(x) for x in v)
            and in_grid(v[0], v[2]) and v[1] in LEVELS)


CELL_WHAT = (f"[gx, level, gz] integers with 0 <= gx < {GRID_COLUMNS}, level in {LEVELS}, "
             f"0 <= gz < {GRID_ROWS}")


def _check_phase(inst: Mapping, phase: str, where: str) -> None:
    path_field, action_field, id_field = PHASES[phase]
    paths, actions, ids = (_turns(inst, f, where) for f in PHASES[phase])
    for t in range(NUM_TURNS):
        path, acts, act_ids = paths[t], actions[t], ids[t]
        if not isinstance(path, list) or not path:
            raise _bad(where, f"{path_field}[{t}]", "a non-empty list of points", path)
        for k, point in enumerate(path):
            if not _numbers(point, 3):
                raise _bad(where, f"{path_field}[{t}][{k}]", "a list of 3 finite numbers", point)
        if not isinstance(acts, list) or not acts or acts[-1] != str(t):
            raise ArramonFormatError(f"{where}: field '{action_field}[{t}]' does not end with "
                                     f"the turn token {str(t)!r}: {_shown(acts)}")
        for k, a in enumerate(acts[:-1]):
            if a not in ACTIONS:
                raise _bad(where, f"{action_field}[{t}][{k}]", f"one of {ACTIONS}", a)
        if not isinstance(act_ids, list) or len(act_ids) != len(acts) - 1:
            raise ArramonFormatError(
                f"{where}: field '{id_field}[{t}]' is not a list of {len(acts) - 1} action ids "
                f"(one per action of '{action_field}[{t}]' before the turn token): "
                f"{_shown(act_ids)}")
        for k, (a, i) in enumerate(zip(acts, act_ids)):
            if not _is_int(i) or i != ACTIONS.index(a):
                raise ArramonFormatError(
                    f"{where}: field '{id_field}[{t}][{k}]' is {_shown(i)}, but action {a!r} has "
                    f"id {ACTIONS.index(a)}")
        forwards = acts.count("f")
        if len(path) != forwards + 1:
            raise ArramonFormatError(
                f"{where}: field '{path_field}[{t}]' has {len(path)} points, but "
                f"'{action_field}[{t}]' has {forwards} forward steps (expected the start plus one "
                f"point per 'f': {forwards + 1})")


def _check_world(inst: Mapping, where: str) -> None:
    world = inst["world"]
    if not isinstance(world, Mapping):
        raise _bad(where, "world", "an object", world)
    for key in WORLD_KEYS:
        _get(inst, f"world.{key}", where)
    bounds = world["bounds"]
    if not _numbers(bounds, 4) or not (bounds[0] < bounds[2] and bounds[1] < bounds[3]):
        raise _bad(where, "world.bounds", "[x0, z0, x1, z1] finite with x0 < x1, z0 < z1",
                   bounds)
    buildings = world["buildings"]
    if not isinstance(buildings, list):
        raise _bad(where, "world.buildings", "a list of rectangles", buildings)
    for k, b in enumerate(buildings):
        if not _numbers(b, 4) or not (b[0] < b[2] and b[1] < b[3]):
            raise _bad(where, f"world.buildings[{k}]",
                       "[x0, z0, x1, z1] finite with x0 < x1, z0 < z1", b)
    objects = world["objects"]
    if not isinstance(objects, list) or len(objects) < NUM_TURNS:
        raise _bad(where, "world.objects", f"a list of at least {NUM_TURNS} objects", objects)
    for k, obj in enumerate(objects):
        name = f"world.objects[{k}]"
        if not isinstance(obj, Mapping) or set(obj) != {"name", "pos"}:
            raise _bad(where, name, "an object {name, pos}", obj)
        _name(obj["name"], f"{name}.name", where)
        if not _numbers(obj["pos"], 3):
            raise _bad(where, f"{name}.pos", "a list of 3 finite numbers", obj["pos"])
    targets, positions = inst["gt_objects"], inst["gt_objects_pos"]["navi_obj_pos_gt"]
    for t in range(NUM_TURNS):
        if objects[t]["name"] != targets[t] or list(objects[t]["pos"]) != list(positions[t]):
            raise ArramonFormatError(
                f"{where}: field 'world.objects[{t}]' is not the turn-{t} target "
                f"(gt_objects[{t}] {targets[t]!r} at navi_obj_pos_gt[{t}] {positions[t]}): "
                f"{_shown(dict(objects[t]))}")
    placed = world["assembly_objects"]
    if not isinstance(placed, list):
        raise _bad(where, "world.assembly_objects", "a list of objects", placed)
    cells = set()
    for k, obj in enumerate(placed):
        name = f"world.assembly_objects[{k}]"
        if not isinstance(obj, Mapping) or set(obj) != {"name", "cell"}:
            raise _bad(where, name, "an object {name, cell}", obj)
        _name(obj["name"], f"{name}.name", where)
        if not _cell(obj["cell"]):
            raise _bad(where, f"{name}.cell", CELL_WHAT, obj["cell"])
        if tuple(obj["cell"]) in cells:
            raise _bad(where, f"{name}.cell", "a free cell and level (another object is there)",
                       obj["cell"])
        cells.add(tuple(obj["cell"]))
    for gx, level, gz in cells:
        if level > 1 and (gx, level - 1, gz) not in cells:
            raise ArramonFormatError(f"{where}: field 'world.assembly_objects': the object at "
                                     f"{[gx, level, gz]} has nothing below it")
    for t, path in enumerate(inst["gt_paths"]["navi_path_gt"]):
        for k, point in enumerate(path):
            if not walkable(world, point[0], point[2]):
                raise _bad(where, f"gt_paths.navi_path_gt[{t}][{k}]",
                           "walkable (inside world.bounds, outside world.buildings)", point)
    for k, obj in enumerate(objects):
        if not walkable(world, obj["pos"][0], obj["pos"][2]):
            raise _bad(where, f"world.objects[{k}].pos",
                       "walkable (inside world.bounds, outside world.buildings)", obj["pos"])


def _name(value: Any, field: str, where: str) -> None:
    try:
        parse_object_name(value)
    except ArramonFormatError as e:
        raise ArramonFormatError(f"{where}: field '{field}': {e}") from None


def validate_instance(inst: Any, where: str) -> Mapping:
    """`inst` itself if it is a valid instance (see the module docstring), else
    ArramonFormatError "{where}: ... field '...' ..." naming the field."""
    if not isinstance(inst, Mapping):
        raise ArramonFormatError(f"{where}: expected a JSON object, got {type(inst).__name__}")
    for key in REQUIRED:
        _get(inst, key, where)
    for key in ("code", "filename"):
        if not isinstance(inst[key], str) or not inst[key]:
            raise _bad(where, key, "a non-empty string", inst[key])
    if not _is_int(inst["mapId"]):
        raise _bad(where, "mapId", "an integer", inst["mapId"])
    names = inst["gt_objects"]
    if not isinstance(names, list) or len(names) != NUM_TURNS:
        raise _bad(where, "gt_objects", f"a list of {NUM_TURNS} object names", names)
    for t, name in enumerate(names):
        _name(name, f"gt_objects[{t}]", where)
    for t, pos in enumerate(_turns(inst, "gt_objects_pos.navi_obj_pos_gt", where)):
        if not _numbers(pos, 3):
            raise _bad(where, f"gt_objects_pos.navi_obj_pos_gt[{t}]",
                       "a list of 3 finite numbers", pos)
    for t, cell in enumerate(_turns(inst, "gt_objects_pos.assem_obj_pos_gt", where)):
        if not _cell(cell):
            raise _bad(where, f"gt_objects_pos.assem_obj_pos_gt[{t}]", CELL_WHAT, cell)
    for phase in PHASES:
        _check_phase(inst, phase, where)
    for field in ("instructions.navi_inst_gt", "instructions.assem_inst_gt"):
        for t, text in enumerate(_turns(inst, field, where)):
            if not isinstance(text, str) or not text.strip():
                raise _bad(where, f"{field}[{t}]", "a non-empty string", text)
    if "world" in inst:
        _check_world(inst, where)
    return inst


def instance_where(path: str, index: int, inst: Any) -> str:
    """"{path}: instance {index}" plus " (code '...')" when the instance has a string code."""
    code = inst.get("code") if isinstance(inst, Mapping) else None
    return f"{path}: instance {index}" + (f" (code {code!r})" if isinstance(code, str) else "")


def read_arramon(path: str) -> list[dict]:
    """The instances of an ArraMon JSON file (a JSON list), unchanged, after validating every one
    (`validate_instance`). FileNotFoundError naming a missing file; ArramonFormatError naming the
    file (and the instance and field) otherwise."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"ArraMon file missing: {path}. {SOURCE_HINT}")
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as e:
            raise ArramonFormatError(f"{path}: invalid JSON at line {e.lineno}, column "
                                     f"{e.colno}: {e.msg}") from None
        except UnicodeDecodeError as e:
            raise ArramonFormatError(f"{path}: not UTF-8 text ({e})") from None
    if not isinstance(data, list):
        raise ArramonFormatError(f"{path}: expected a JSON list of instances, got "
                                 f"{type(data).__name__}")
    for i, inst in enumerate(data):
        validate_instance(inst, instance_where(path, i, inst))
    return data
