"""ArraMon instances (Kim et al. 2020, the official JSON schema): reading and validation.

A file (`train.json`, `val_seen.json`, ...; github.com/hyounghk/ArraMon, `data/`) is a JSON list of
*instances*, each with two turns; a turn is a navigation phase (walk through a city and pick up an
object) followed by an assembly phase (place it on a 5 x 4 grid). Fields (every list of turns has
exactly 2 entries, turn t = 0, 1):

    mapId: int                      the instance's map (object layout); unique within val_seen
    code: str (optional)            an identifier (5-6 upper-case characters; not unique in a
                                    file); val_seen has it, the official val_unseen does not
    filename: str (optional)        the annotation's source file (val_seen only, like `code`)
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

Coordinates (x, y, z of points, rectangles) follow the shared rule (`core.records.QUANTITIES`,
"coordinate") and lie within `MAX_COORD`.

Every instance is identified by its position in its file (and its `mapId`), never by `code`,
which not every official split carries. `read_arramon` returns the instances unchanged (plain
Python types) after validating each with `validate_instance` and checking that none repeats an
earlier one exactly (`validated`: a copy would count twice in the metrics); an error raises
`ArramonFormatError` naming the file, the instance index (and its code when it has one) and the
field, e.g.
`val_seen.json: instance 3 (code 'THNOR'): field 'gt_actions.navi_action_gt[1][5]' is not one of
('f', 'l', 'r', 'P'): 'x'`.

Geometry (`/work/shared/README.md`, reconstructed from the data): navigation headings are measured
from +z towards +x (`atan2(dx, dz)`), a forward step adds (sin psi, cos psi) to (x, z), `l` / `r`
turn by -30 / +30 degrees. Each assembly phase starts at cell (gx=2, gz=0) facing +z, whose world
position is `ASSEMBLY_ORIGIN`; a cell is `CELL` = 1.5 units (`assembly_world`).
"""
from __future__ import annotations

from typing import Any, Mapping

from ttw_jax.core.records import (Fields, RecordFormatError, copies, is_int, is_string, list_of,
                                  quantity_problem, read_json_list, shown)

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
REQUIRED = ("mapId", "gt_objects") + tuple(dict.fromkeys(
    g for g, _ in TURN_FIELDS))
# phase -> (path field, actions field, action-ids field)
PHASES = {"navi": ("gt_paths.navi_path_gt", "gt_actions.navi_action_gt",
                   "gt_actionIDs.navi_actionIDs_gt"),
          "assem": ("gt_paths.assem_path_gt", "gt_actions.assem_action_gt",
                    "gt_actionIDs.assem_actionIDs_gt")}
OPTIONAL_STRINGS = ("code", "filename")          # checked when present
WORLD_KEYS = ("bounds", "buildings", "objects", "assembly_objects")


class ArramonFormatError(RecordFormatError):
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

CELL_WHAT = (f"[gx, level, gz] integers with 0 <= gx < {GRID_COLUMNS}, level in {LEVELS}, "
             f"0 <= gz < {GRID_ROWS}")
RECT_WHAT = "[x0, z0, x1, z1] finite with x0 < x1, z0 < z1"
WALKABLE = "walkable (inside world.bounds, outside world.buildings)"
# A documented limit: the released cities span about 160 x 270 units (val_seen); a coordinate
# beyond it is a corrupt file, not a bigger city (the walkable raster would grow with it).
MAX_COORD = 1000.0
POINT_WHAT = f"a list of 3 finite numbers within +-{MAX_COORD:g} (x, y, z in world units)"


def is_coordinate(v: Any) -> bool:
    """A coordinate under the shared rule (`QUANTITIES`), within `MAX_COORD`."""
    return quantity_problem(v, "coordinate") is None and abs(v) <= MAX_COORD


_bounded_point = list_of(is_coordinate, 3, 3)     # [x, y, z]


def _rectangle(v: Any) -> bool:
    return list_of(is_coordinate, 4, 4)(v) and v[0] < v[2] and v[1] < v[3]


def _cell(v: Any) -> bool:
    """[gx, level, gz] integers inside the assembly grid."""
    return list_of(is_int, 3, 3)(v) and in_grid(v[0], v[2]) and v[1] in LEVELS


def _turns(f: Fields, dotted: str) -> list:
    return f.get(dotted, lambda v: isinstance(v, list) and len(v) == NUM_TURNS,
                 f"a list of {NUM_TURNS} turns")


def _check_phase(f: Fields, phase: str) -> None:
    path_field, action_field, id_field = PHASES[phase]
    paths, actions, ids = (_turns(f, name) for name in PHASES[phase])
    for t in range(NUM_TURNS):
        path, acts, act_ids = paths[t], actions[t], ids[t]
        if not isinstance(path, list) or not path:
            raise f.bad(f"{path_field}[{t}]", "a non-empty list of points", path)
        for k, point in enumerate(path):
            if not _bounded_point(point):
                raise f.bad(f"{path_field}[{t}][{k}]", POINT_WHAT, point)
        if not isinstance(acts, list) or not acts or acts[-1] != str(t):
            raise f.error(f"{f.where}: field '{action_field}[{t}]' does not end with the turn "
                          f"token {str(t)!r}: {shown(acts)}")
        for k, a in enumerate(acts[:-1]):
            if a not in ACTIONS:
                raise f.bad(f"{action_field}[{t}][{k}]", f"one of {ACTIONS}", a)
        if not isinstance(act_ids, list) or len(act_ids) != len(acts) - 1:
            raise f.bad(f"{id_field}[{t}]", f"a list of {len(acts) - 1} action ids (one per "
                        f"action of '{action_field}[{t}]' before the turn token)", act_ids)
        for k, (a, i) in enumerate(zip(acts, act_ids)):
            if not is_int(i) or i != ACTIONS.index(a):
                raise f.error(f"{f.where}: field '{id_field}[{t}][{k}]' is {shown(i)}, but "
                              f"action {a!r} has id {ACTIONS.index(a)}")
        forwards = acts.count("f")
        if len(path) != forwards + 1:
            raise f.error(
                f"{f.where}: field '{path_field}[{t}]' has {len(path)} points, but "
                f"'{action_field}[{t}]' has {forwards} forward steps (expected the start plus one "
                f"point per 'f': {forwards + 1})")


def _check_objects(f: Fields, name: str, keys: tuple[str, str], check, what: str) -> list:
    """The list `world.{name}` of objects {name, keys[1]}, `check` true for each keys[1]."""
    objects = f.get(f"world.{name}", lambda v: isinstance(v, list), "a list of objects")
    for k, obj in enumerate(objects):
        field = f"world.{name}[{k}]"
        if not isinstance(obj, Mapping) or set(obj) != set(keys):
            raise f.bad(field, f"an object {{{', '.join(keys)}}}", obj)
        _name(f, obj["name"], f"{field}.name")
        if not check(obj[keys[1]]):
            raise f.bad(f"{field}.{keys[1]}", what, obj[keys[1]])
    return objects


def _check_world(f: Fields) -> None:
    world = f.get("world", lambda v: isinstance(v, Mapping), "an object")
    for key in WORLD_KEYS:
        f.get(f"world.{key}")
    f.get("world.bounds", _rectangle, RECT_WHAT)
    for k, b in enumerate(f.get("world.buildings", lambda v: isinstance(v, list),
                                "a list of rectangles")):
        if not _rectangle(b):
            raise f.bad(f"world.buildings[{k}]", RECT_WHAT, b)
    objects = _check_objects(f, "objects", ("name", "pos"), _bounded_point, POINT_WHAT)
    if len(objects) < NUM_TURNS:
        raise f.bad("world.objects", f"a list of at least {NUM_TURNS} objects", objects)
    targets, positions = f.rec["gt_objects"], f.rec["gt_objects_pos"]["navi_obj_pos_gt"]
    for t in range(NUM_TURNS):
        if objects[t]["name"] != targets[t] or list(objects[t]["pos"]) != list(positions[t]):
            raise f.bad(f"world.objects[{t}]", f"the turn-{t} target (gt_objects[{t}] "
                        f"{targets[t]!r} at navi_obj_pos_gt[{t}] {positions[t]})",
                        dict(objects[t]))
    cells = set()
    for k, obj in enumerate(_check_objects(f, "assembly_objects", ("name", "cell"), _cell,
                                           CELL_WHAT)):
        if tuple(obj["cell"]) in cells:
            raise f.bad(f"world.assembly_objects[{k}].cell",
                        "a free cell and level (another object is there)", obj["cell"])
        cells.add(tuple(obj["cell"]))
    for gx, level, gz in cells:
        if level > 1 and (gx, level - 1, gz) not in cells:
            raise f.fail("world.assembly_objects",
                         f"the object at {[gx, level, gz]} has nothing below it")
    for t, path in enumerate(f.rec["gt_paths"]["navi_path_gt"]):
        for k, point in enumerate(path):
            if not walkable(world, point[0], point[2]):
                raise f.bad(f"gt_paths.navi_path_gt[{t}][{k}]", WALKABLE, point)
    for k, obj in enumerate(objects):
        if not walkable(world, obj["pos"][0], obj["pos"][2]):
            raise f.bad(f"world.objects[{k}].pos", WALKABLE, obj["pos"])


def _name(f: Fields, value: Any, field: str) -> None:
    try:
        parse_object_name(value)
    except ArramonFormatError as e:
        raise f.fail(field, str(e)) from None


def validate_instance(inst: Any, where: str) -> Mapping:
    """`inst` itself if it is a valid instance (see the module docstring), else
    ArramonFormatError "{where}: ... field '...' ..." naming the field."""
    if not isinstance(inst, Mapping):
        raise ArramonFormatError(f"{where}: expected a JSON object, got {type(inst).__name__}")
    f = Fields(inst, where, ArramonFormatError)
    for key in REQUIRED:
        f.get(key)
    for key in OPTIONAL_STRINGS:
        if key in inst:
            f.string(key, nonempty=True)
    f.int("mapId")
    names = f.get("gt_objects", lambda v: isinstance(v, list) and len(v) == NUM_TURNS,
                  f"a list of {NUM_TURNS} object names")
    for t, name in enumerate(names):
        _name(f, name, f"gt_objects[{t}]")
    for t, pos in enumerate(_turns(f, "gt_objects_pos.navi_obj_pos_gt")):
        if not _bounded_point(pos):
            raise f.bad(f"gt_objects_pos.navi_obj_pos_gt[{t}]", POINT_WHAT, pos)
    for t, cell in enumerate(_turns(f, "gt_objects_pos.assem_obj_pos_gt")):
        if not _cell(cell):
            raise f.bad(f"gt_objects_pos.assem_obj_pos_gt[{t}]", CELL_WHAT, cell)
    for phase in PHASES:
        _check_phase(f, phase)
    for field in ("instructions.navi_inst_gt", "instructions.assem_inst_gt"):
        for t, text in enumerate(_turns(f, field)):
            if not is_string(text) or not text.strip():
                raise f.bad(f"{field}[{t}]", "a non-empty string", text)
    if "world" in inst:
        _check_world(f)
    return inst


def instance_where(path: str, index: int, inst: Any) -> str:
    """"{path}: instance {index}" plus " (code '...')" when the instance has a string code."""
    code = inst.get("code") if isinstance(inst, Mapping) else None
    return f"{path}: instance {index}" + (f" (code {code!r})" if isinstance(code, str) else "")


def validated(path: str, data: list) -> tuple[list[dict], list[tuple[int, ArramonFormatError]]]:
    """(the valid instances of `data`, the list read from `path`, in order; (index, error) of
    each other one, in order): an instance that does not validate (`validate_instance`) or
    repeats an earlier valid one exactly (`core.records.copies`: it would count twice in the
    metrics)."""
    good, errors = [], []
    for i, inst in enumerate(data):
        try:
            validate_instance(inst, instance_where(path, i, inst))
            good.append(i)
        except ArramonFormatError as e:
            errors.append((i, e))
    for k, earlier in copies([data[i] for i in good]):
        i, j = good[k], good[earlier]
        errors.append((i, ArramonFormatError(
            f"{instance_where(path, i, data[i])}: a copy of instance {j} (mapId "
            f"{data[i]['mapId']}): it would count twice in the metrics")))
    errors.sort(key=lambda e: e[0])
    bad = {i for i, _ in errors}
    return [data[i] for i in good if i not in bad], errors


def read_instance_list(path: str) -> list:
    """The top-level list of an ArraMon JSON file, not validated (FileNotFoundError naming a
    missing file, ArramonFormatError naming a malformed one)."""
    return read_json_list(path, "instances", ArramonFormatError, SOURCE_HINT)


def read_arramon(path: str) -> list[dict]:
    """The instances of an ArraMon JSON file (a JSON list), unchanged, after validating every one
    (`validated`: no invalid or repeated instance). FileNotFoundError naming a missing file;
    ArramonFormatError naming the file (and the instance and field) otherwise."""
    data = read_instance_list(path)
    _, errors = validated(path, data)
    if errors:
        raise errors[0][1]
    return data
