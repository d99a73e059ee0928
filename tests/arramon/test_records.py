"""ArraMon instance files: the real val_seen validates, broken instances name file / instance /
field, object names, the assembly grid's world positions and the world of synthetic instances."""
import copy
import json
import re

import numpy as np
import pytest

from tests.conftest import shared_path
from ttw_jax.arramon import records as ar
from ttw_jax.arramon.synthetic import synthetic_instances


@pytest.fixture(scope="module")
def val_seen_path():
    return shared_path("arramon", "val_seen.json")


@pytest.fixture(scope="module")
def val_seen(val_seen_path):
    return ar.read_arramon(val_seen_path)


@pytest.mark.slow
def test_every_real_val_seen_instance_validates(val_seen_path, val_seen):
    with open(val_seen_path, encoding="utf-8") as f:
        raw = json.load(f)
    assert len(val_seen) == 1065
    assert val_seen == raw   # returned unchanged
    assert all("world" not in inst for inst in val_seen)


def test_real_assembly_paths_replay_on_the_grid(val_seen):
    """Every ground-truth assembly path is the grid walk of its actions from cell (2, 0) facing
    +z, and P places on the target cell (the constants of the module)."""
    moves = {0: (0, 1), 90: (1, 0), 180: (0, -1), 270: (-1, 0)}
    for inst in val_seen:
        for t in range(ar.NUM_TURNS):
            (gx, gz), psi = ar.START_CELL, 0
            points = [ar.assembly_world(gx, gz)]
            for a in inst["gt_actions"]["assem_action_gt"][t][:-1]:
                if a in "lr":
                    psi = (psi + (30 if a == "r" else -30)) % 360
                elif a == "f":
                    gx, gz = gx + moves[psi][0], gz + moves[psi][1]
                    assert ar.in_grid(gx, gz)
                    points.append(ar.assembly_world(gx, gz))
                else:
                    tx, _, tz = inst["gt_objects_pos"]["assem_obj_pos_gt"][t]
                    assert (gx + moves[psi][0], gz + moves[psi][1]) == (tx, tz)
            got = inst["gt_paths"]["assem_path_gt"][t]
            assert len(got) == len(points)
            for p, q in zip(got, points):
                assert max(abs(a - b) for a, b in zip(p, q)) < 1e-4


def test_assembly_world():
    assert ar.assembly_world(2, 0) == ar.ASSEMBLY_ORIGIN
    x0, y0, z0 = ar.ASSEMBLY_ORIGIN
    assert ar.assembly_world(3, 2) == (x0 + 1.5, y0, z0 + 3.0)
    assert ar.assembly_world(0, 3) == (x0 - 3.0, y0, z0 + 4.5)
    assert (ar.GRID_COLUMNS, ar.GRID_ROWS, ar.CELL) == (5, 4, 1.5)


def test_parse_object_name():
    assert ar.parse_object_name("Dotted Yellow Hourglass") == ("dotted", "yellow", "hourglass")
    assert ar.parse_object_name("Striped Green Tv") == ("striped", "green", "tv")
    assert ar.parse_object_name("  striped  PURPLE bucket ") == ("striped", "purple", "bucket")
    assert len(ar.PATTERNS) == 2 and len(ar.COLOURS) == 7 and len(ar.TYPES) == 7
    for bad in ("Dotted Pink Ball", "Spotted Red Mug", "Dotted Red", "Dotted Red Mug Cup", "",
                None, 3):
        with pytest.raises(ar.ArramonFormatError, match="is not 'Pattern Colour Type'"):
            ar.parse_object_name(bad)


def _set(inst, path, value):
    target = inst
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


def _delete(inst, path):
    target = inst
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]


def _insert_forward(inst):
    inst["gt_actions"]["navi_action_gt"][1].insert(0, "f")
    inst["gt_actionIDs"]["navi_actionIDs_gt"][1].insert(0, 0)


# (change, field named in the message, rest of the message)
BROKEN = [
    (lambda i: _delete(i, ["gt_paths", "navi_path_gt"]), "missing field 'gt_paths.navi_path_gt'"),
    (lambda i: _set(i, ["gt_paths"], []), "field 'gt_paths' is not an object"),
    (lambda i: _set(i, ["mapId"], "8900"), "field 'mapId' is not an integer"),
    (lambda i: _set(i, ["gt_actions", "navi_action_gt", 1, 5], "x"),
     r"field 'gt_actions.navi_action_gt\[1\]\[5\]' is not one of \('f', 'l', 'r', 'P'\): 'x'"),
    (lambda i: _set(i, ["gt_actions", "assem_action_gt", 0, -1], "1"),
     r"field 'gt_actions.assem_action_gt\[0\]' does not end with the turn token '0'"),
    (lambda i: _set(i, ["gt_actionIDs", "navi_actionIDs_gt", 0, 3], 1),
     r"field 'gt_actionIDs.navi_actionIDs_gt\[0\]\[3\]' is 1, but action 'r' has id 2"),
    (lambda i: i["gt_actionIDs"]["assem_actionIDs_gt"][1].pop(),
     r"field 'gt_actionIDs.assem_actionIDs_gt\[1\]' is not a list of 10 action ids"),
    (_insert_forward, r"field 'gt_paths.navi_path_gt\[1\]' has 18 points, but "
                      r"'gt_actions.navi_action_gt\[1\]' has 18 forward steps"),
    (lambda i: _set(i, ["gt_paths", "navi_path_gt", 0, 7], [1.0, "0.525", 2.0]),
     r"field 'gt_paths.navi_path_gt\[0\]\[7\]' is not a list of 3 finite numbers"),
    (lambda i: _set(i, ["gt_paths", "navi_path_gt", 1, 3], [1e30, 0.525, 2.0]),
     r"field 'gt_paths.navi_path_gt\[1\]\[3\]' is not a list of 3 finite numbers within "
     r"\+-1000"),
    (lambda i: _set(i, ["gt_paths", "navi_path_gt", 0, 0], [3e3, 0.525, 2.0]),
     r"field 'gt_paths.navi_path_gt\[0\]\[0\]' is not a list of 3 finite numbers within"),
    (lambda i: _set(i, ["gt_paths", "assem_path_gt", 1], []),
     r"field 'gt_paths.assem_path_gt\[1\]' is not a non-empty list of points"),
    (lambda i: _set(i, ["gt_objects_pos", "assem_obj_pos_gt", 1], [5, 1, 3]),
     r"field 'gt_objects_pos.assem_obj_pos_gt\[1\]' is not \[gx, level, gz\] integers"),
    (lambda i: _set(i, ["gt_objects_pos", "assem_obj_pos_gt", 0], [2, 3, 3]),
     r"field 'gt_objects_pos.assem_obj_pos_gt\[0\]' is not \[gx, level, gz\]"),
    (lambda i: _set(i, ["gt_objects_pos", "navi_obj_pos_gt", 1], [1.0, 2.0]),
     r"field 'gt_objects_pos.navi_obj_pos_gt\[1\]' is not a list of 3 finite numbers"),
    (lambda i: _set(i, ["gt_objects_pos", "navi_obj_pos_gt", 0, 2], 1e300),
     r"field 'gt_objects_pos.navi_obj_pos_gt\[0\]' is not a list of 3 finite numbers within"),
    (lambda i: _set(i, ["gt_paths", "assem_path_gt", 1, 0, 1], float("nan")),
     r"field 'gt_paths.assem_path_gt\[1\]\[0\]' is not a list of 3 finite numbers"),
    (lambda i: _set(i, ["gt_objects", 1], "Dotted Pink Ball"),
     r"field 'gt_objects\[1\]': object name 'Dotted Pink Ball' is not 'Pattern Colour Type'"),
    (lambda i: _set(i, ["instructions", "assem_inst_gt", 0], "  "),
     r"field 'instructions.assem_inst_gt\[0\]' is not a non-empty string"),
    (lambda i: i["instructions"]["navi_inst_gt"].append("and again."),
     "field 'instructions.navi_inst_gt' is not a list of 2 turns"),
]


@pytest.mark.parametrize("change, message", BROKEN)
def test_broken_instances_name_file_instance_and_field(tmp_path, val_seen, change, message):
    broken = copy.deepcopy(val_seen[0])
    assert broken["code"] == "3KADWF"
    change(broken)
    path = tmp_path / "val_seen.json"
    path.write_text(json.dumps([val_seen[1], broken]))
    with pytest.raises(ar.ArramonFormatError,
                       match=f"^{re.escape(str(path))}: instance 1 \\(code '3KADWF'\\): "
                             f"{message}"):
        ar.read_arramon(str(path))


def test_unreadable_files(tmp_path, val_seen):
    path = tmp_path / "train.json"
    with pytest.raises(FileNotFoundError, match=f"{re.escape(str(path))}.*hyounghk/ArraMon"):
        ar.read_arramon(str(path))
    path.write_text('[{"code": ')
    with pytest.raises(ar.ArramonFormatError, match="train.json: invalid JSON at line 1"):
        ar.read_arramon(str(path))
    path.write_text(json.dumps({"code": "X"}))
    with pytest.raises(ar.ArramonFormatError, match="expected a JSON list of instances"):
        ar.read_arramon(str(path))
    no_map = {k: v for k, v in val_seen[0].items() if k != "mapId"}
    path.write_text(json.dumps([val_seen[0], no_map, 7]))
    with pytest.raises(ar.ArramonFormatError, match=r"train.json: instance 1 \(code '3KADWF'\): "
                                                    r"missing field 'mapId'"):
        ar.read_arramon(str(path))
    path.write_text(json.dumps([val_seen[0], 7]))
    with pytest.raises(ar.ArramonFormatError, match=r"instance 1: expected a JSON object"):
        ar.read_arramon(str(path))


def test_a_repeated_instance_is_refused_and_validated_lists_the_others(tmp_path, val_seen):
    """A copy of an instance would count twice in the metrics; an instance of the same map
    that is not a copy is not one."""
    path = tmp_path / "val_seen.json"
    same_map = dict(copy.deepcopy(val_seen[1]), mapId=val_seen[0]["mapId"])
    path.write_text(json.dumps([val_seen[0], same_map, val_seen[1], val_seen[0]]))
    with pytest.raises(ar.ArramonFormatError,
                       match=f"^{re.escape(str(path))}: instance 3 \\(code '3KADWF'\\): a copy of "
                             f"instance 0 \\(mapId 8900\\): it would count twice in the metrics"):
        ar.read_arramon(str(path))
    broken = copy.deepcopy(val_seen[2])
    broken["mapId"] = "x"
    data = [val_seen[0], broken, val_seen[1], val_seen[0]]
    valid, errors = ar.validated(str(path), data)
    assert valid == [val_seen[0], val_seen[1]]
    assert [i for i, _ in errors] == [1, 3]
    assert "field 'mapId' is not an integer" in str(errors[0][1])


def test_world_is_validated_when_present():
    (inst,) = synthetic_instances(1, 5)
    assert ar.validate_instance(inst, "x") is inst
    where = "gen"
    taken = {(gx, gz) for gx, _, gz in (o["cell"] for o in inst["world"]["assembly_objects"])}
    gx, gz = next((gx, gz) for gx in range(5) for gz in range(4) if (gx, gz) not in taken)
    cases = [
        (lambda w: w.pop("buildings"), "missing field 'world.buildings'"),
        (lambda w: w.update(bounds=[0, 0, -1, 5]), "field 'world.bounds' is not"),
        (lambda w: w["objects"][0].update(name="Dotted Red Mug"
                                          if inst["gt_objects"][0] != "Dotted Red Mug"
                                          else "Dotted Red Bowl"),
         r"field 'world.objects\[0\]' is not the turn-0 target"),
        (lambda w: w["objects"].__setitem__(1, dict(w["objects"][1], pos=[0.0, 0.0, 0.0])),
         r"field 'world.objects\[1\]' is not the turn-1 target"),
        (lambda w: w["objects"][3].update(name="Big Red Mug"),
         r"field 'world.objects\[3\].name': object name 'Big Red Mug'"),
        (lambda w: w["assembly_objects"][0].update(cell=[gx, 2, gz]),
         rf"field 'world.assembly_objects': the object at \[{gx}, 2, {gz}\] has nothing "
         r"below it"),
        (lambda w: w["assembly_objects"][1].update(cell=list(w["assembly_objects"][0]["cell"])),
         r"field 'world.assembly_objects\[1\].cell' is not a free cell"),
        (lambda w: w["assembly_objects"][0].update(cell=[2, 1, 4]),
         r"field 'world.assembly_objects\[0\].cell' is not \[gx, level, gz\]"),
        (lambda w: w["buildings"].append([-1000.0, -1000.0, 1000.0, 1000.0]),
         r"field 'gt_paths.navi_path_gt\[0\]\[0\]' is not walkable"),
    ]
    for change, message in cases:
        broken = copy.deepcopy(inst)
        change(broken["world"])
        with pytest.raises(ar.ArramonFormatError, match=f"^{where}: {message}"):
            ar.validate_instance(broken, where)
    world = inst["world"]
    assert ar.walkable(world, 1.5, 1.5) and not ar.walkable(world, 5.0, 5.0)
    assert not ar.walkable(world, -0.1, 1.5)


def test_code_and_filename_are_optional_but_checked_when_present(tmp_path, val_seen):
    # The official val_unseen has neither field on its instances.
    bare = {k: v for k, v in val_seen[0].items() if k not in ("code", "filename")}
    only_code = {k: v for k, v in val_seen[1].items() if k != "filename"}
    path = tmp_path / "val_unseen.json"
    path.write_text(json.dumps([bare, only_code]))
    assert ar.read_arramon(str(path)) == [bare, only_code]
    no_code = copy.deepcopy(bare)
    no_code["gt_objects"][0] = "Dotted Pink Ball"
    path.write_text(json.dumps([bare, no_code]))
    with pytest.raises(ar.ArramonFormatError, match=r"val_unseen.json: instance 1: field "
                                                    r"'gt_objects\[0\]'"):
        ar.read_arramon(str(path))
    for key, value in (("code", ""), ("filename", 7)):
        path.write_text(json.dumps([dict(bare, **{key: value})]))
        with pytest.raises(ar.ArramonFormatError, match=f"field '{key}' is not a non-empty "
                                                        "string"):
            ar.read_arramon(str(path))


def test_a_walkable_raster_past_the_limit_is_refused_naming_the_extent():
    from ttw_jax.arramon.episodes import rasterise
    grid, origin = rasterise(np.array([[0.0, 0.0], [10.0, 5.0]]), 1.0, 0.1)
    assert grid.shape == (160, 110) and grid.any()
    with pytest.raises(ValueError, match=r"spanning x 0..900, z 0..900 at resolution 0.01 would "
                                         r"have 90600 x 90600 cells \(limit 268,435,456\)"):
        rasterise(np.array([[0.0, 0.0], [900.0, 900.0]]), 1.0, 0.01)
