"""Synthetic ArraMon instances: determinism, validation, and exact replay of every ground-truth
path under the motion rules (navigation and assembly), pick-up and placement, walkable routes,
instructions that match the actions."""
import collections
import json
import math
import re

import pytest

from ttw_jax.arramon import records as ar, synthetic as asyn

NUM, SEED = 300, 7
TOL = 1e-9   # stored points are the motion rule's, rounded to 6 decimals


@pytest.fixture(scope="module")
def instances():
    return asyn.synthetic_instances(NUM, SEED)


def test_deterministic_and_valid(instances, tmp_path):
    assert asyn.synthetic_instances(12, SEED) == instances[:12]   # a prefix of a longer call
    assert asyn.synthetic_instances(12, SEED + 1) != instances[:12]
    assert len({inst["code"] for inst in instances}) == NUM
    assert all(re.fullmatch(r"[A-Z0-9]{6}", inst["code"]) for inst in instances)
    assert len({inst["mapId"] for inst in instances}) == NUM
    for i, inst in enumerate(instances):
        ar.validate_instance(inst, f"instance {i}")
    path = tmp_path / "train.json"
    path.write_text(json.dumps(instances))
    assert ar.read_arramon(str(path)) == instances   # plain JSON types, exact round trip
    with pytest.raises(ValueError, match="seed >= 0"):
        asyn.synthetic_instances(3, -1)


# ----------------------------------------------------------------------------- replay

def replay_navigation(x, z, psi, actions):
    """(points, picks [(x, z, psi)], final (x, z, psi)) of actions (turn token excluded): f adds
    (sin psi, cos psi) to (x, z), l / r turn by -30 / +30 degrees."""
    points, picks = [(x, z)], []
    for a in actions:
        if a == "f":
            assert psi % 90 == 0   # synthetic streets are axis-aligned
            x, z = x + math.sin(math.radians(psi)), z + math.cos(math.radians(psi))
            points.append((x, z))
        elif a in "lr":
            psi += 30 if a == "r" else -30
        else:
            picks.append((x, z, psi))
    return points, picks, (x, z, psi)


def first_heading(path, actions):
    """The initial heading: that of the first forward step, minus 30 * (#r - #l) before it."""
    k = actions.index("f")
    (x0, _, z0), (x1, _, z1) = path[0], path[1]
    before = actions[:k]
    return math.degrees(math.atan2(x1 - x0, z1 - z0)) - 30 * (before.count("r") -
                                                               before.count("l"))


def in_pickup(pose, pos):
    x, z, psi = pose
    s, c = math.sin(math.radians(psi)), math.cos(math.radians(psi))
    dx, dz = pos[0] - x, pos[2] - z
    forward, lateral = dx * s + dz * c, dx * c - dz * s
    return abs(lateral) <= 0.5 and -1e-9 <= forward <= 3.0 + 1e-9


def walkable(world, x, z):
    x0, z0, x1, z1 = world["bounds"]
    inside = x0 <= x <= x1 and z0 <= z <= z1
    return inside and not any(b[0] < x < b[2] and b[1] < z < b[3] for b in world["buildings"])


def on_centreline(v):
    return abs((v - 1.5) / 10 - round((v - 1.5) / 10)) < 1e-9


def test_navigation_replays_exactly(instances):
    for inst in instances:
        world, paths = inst["world"], inst["gt_paths"]["navi_path_gt"]
        actions = inst["gt_actions"]["navi_action_gt"]
        psi = first_heading(paths[0], actions[0][:-1])
        assert abs(psi - 90 * round(psi / 90)) < 1e-9   # turn 0 faces a multiple of 90
        psi = 90 * round(psi / 90)
        x, _, z = paths[0][0]
        present = list(range(len(world["objects"])))
        for t in range(ar.NUM_TURNS):
            acts = actions[t][:-1]
            assert acts[-1] == "P" and acts.count("P") == 1
            # turn 1 starts where turn 0 ended
            assert abs(x - paths[t][0][0]) < TOL and abs(z - paths[t][0][2]) < TOL
            points, picks, (x, z, psi) = replay_navigation(x, z, psi, acts)
            assert len(points) == len(paths[t])
            for (px, pz), stored in zip(points, paths[t]):
                assert abs(px - stored[0]) < TOL and abs(pz - stored[2]) < TOL
                assert stored[1] == asyn.AGENT_Y
                assert walkable(world, px, pz)
                assert on_centreline(px) or on_centreline(pz)   # routes stay on the streets
            target = inst["gt_objects_pos"]["navi_obj_pos_gt"][t]
            assert world["objects"][t]["pos"] == target and target[1] == asyn.OBJECT_Y
            assert walkable(world, target[0], target[2])
            # the target is the only present object in the pick-up rectangle
            (pose,) = picks
            inside = [k for k in present if in_pickup(pose, world["objects"][k]["pos"])]
            assert inside == [t]
            present.remove(t)


def test_assembly_replays_exactly(instances):
    moves = {0: (0, 1), 90: (1, 0), 180: (0, -1), 270: (-1, 0)}
    for inst in instances:
        stack = collections.Counter(tuple(o["cell"][::2])
                                    for o in inst["world"]["assembly_objects"])
        assert all(o["cell"][1] == 1 for o in inst["world"]["assembly_objects"])
        assert (2, 0) not in stack
        for t in range(ar.NUM_TURNS):
            gx, gz, psi = 2, 0, 0
            points = [list(ar.assembly_world(gx, gz))]
            placed = None
            for a in inst["gt_actions"]["assem_action_gt"][t][:-1]:
                if a == "f":
                    assert psi % 90 == 0
                    gx, gz = gx + moves[psi % 360][0], gz + moves[psi % 360][1]
                    assert 0 <= gx < 5 and 0 <= gz < 4
                    points.append(list(ar.assembly_world(gx, gz)))
                elif a in "lr":
                    psi += 30 if a == "r" else -30
                else:
                    placed = (gx + moves[psi % 360][0], gz + moves[psi % 360][1])
            assert points == inst["gt_paths"]["assem_path_gt"][t]
            tx, level, tz = inst["gt_objects_pos"]["assem_obj_pos_gt"][t]
            assert placed == (tx, tz) != (2, 0) and (gx, gz) != placed
            assert level == 1 + stack[tx, tz]
            stack[tx, tz] += 1


def test_assembly_actions_are_shortest():
    assert asyn.assembly_actions((2, 1)) == ["P"]
    assert asyn.assembly_actions((2, 3)) == ["f", "f", "P"]
    assert asyn.assembly_actions((3, 0)) == ["r", "r", "r", "P"]
    assert asyn.assembly_actions((0, 0)) == ["l", "l", "l", "f", "P"]
    # standing on the target: step off and turn around
    assert asyn.assembly_actions((2, 0)) == ["f"] + ["l"] * 6 + ["P"]
    assert asyn.assembly_actions((4, 3)) == ["f", "f", "f", "r", "r", "r", "f", "P"]


# ----------------------------------------------------------------------------- objects, text

def spoken(name):
    return " ".join(ar.parse_object_name(name))


def test_objects_and_distracters(instances):
    for inst in instances:
        objects = inst["world"]["objects"]
        names = [o["name"] for o in objects]
        assert names[:2] == inst["gt_objects"] and len(set(names)) == len(names)
        assert 4 <= len(objects) - 2 <= 6
        targets = [ar.parse_object_name(n) for n in names[:2]]
        distracters = [ar.parse_object_name(n) for n in names[2:]]
        for t, (_, colour, kind) in enumerate(targets):
            assert any(d[1] == colour or d[2] == kind for d in distracters)
            for o in objects[2:] + objects[1 - t:2 - t]:
                assert math.dist(o["pos"][::2], objects[t]["pos"][::2]) >= 4.0
        assembly = [o["name"] for o in inst["world"]["assembly_objects"]]
        assert 3 <= len(assembly) <= 5 and not set(assembly) & set(names[:2])
        assert len(set(assembly)) == len(assembly)


NAV = re.compile(r"^(?:(?:turn (?P<initial>left|right|around) and )?"
                 r"(?:walk forward|go straight|head straight ahead)\.) "
                 r"(?:turn (?P<d1>left|right) at the (?P<n1>first|second) intersection|"
                 r"at the (?P<n2>first|second) intersection, turn (?P<d2>left|right)|"
                 r"take a (?P<d3>left|right) at the (?P<n3>first|second) intersection)\. "
                 r"[a-z ]+ the (?P<name>[a-z]+ [a-z]+ [a-z]+) and [a-z ]+\.$")
ASSEM = re.compile(r"^(?:put|place|set) the (?P<name>[a-z]+ [a-z]+ [a-z]+) "
                   r"(?P<rel>behind|in front of|to the left of|to the right of|on top of) "
                   r"the (?P<ref>[a-z]+ [a-z]+ [a-z]+)\.$")


def test_instructions_match_the_actions(instances):
    seen = collections.Counter()
    for inst in instances:
        objects = inst["world"]["objects"]
        paths = inst["gt_paths"]["navi_path_gt"]
        grid = {tuple(o["cell"]): spoken(o["name"]) for o in inst["world"]["assembly_objects"]}
        for t in range(ar.NUM_TURNS):
            text = inst["instructions"]["navi_inst_gt"][t]
            m = NAV.match(text)
            assert m, text
            assert m["name"] == spoken(inst["gt_objects"][t]) == spoken(objects[t]["name"])
            acts = "".join(inst["gt_actions"]["navi_action_gt"][t][:-1])
            lead = re.match(r"^[lr]*", acts).group()
            initial = {"": None, "lll": "left", "rrr": "right", "llllll": "around",
                       "rrrrrr": "around"}[lead]
            assert m["initial"] == initial
            direction = m["d1"] or m["d2"] or m["d3"]
            nth = m["n1"] or m["n2"] or m["n3"]
            turn = re.match(r"^[lr]*f+([lr]+)f+P$", acts)
            assert turn and turn.group(1) == ("lll" if direction == "left" else "rrr")
            # intersections crossed before the turn (the turn happens at the last one)
            before = paths[t][1:len(paths[t]) - acts[turn.end(1):].count("f")]
            crossed = sum(on_centreline(p[0]) and on_centreline(p[2]) for p in before)
            assert crossed == {"first": 1, "second": 2}[nth]
            assert on_centreline(before[-1][0]) and on_centreline(before[-1][2])
            seen[initial, nth, direction] += 1
            # assembly: the target cell is the relation to the named reference
            m = ASSEM.match(inst["instructions"]["assem_inst_gt"][t])
            assert m, inst["instructions"]["assem_inst_gt"][t]
            assert m["name"] == spoken(inst["gt_objects"][t])
            refs = [c for c, n in grid.items() if n == m["ref"]]
            assert len(refs) == 1
            rx, rlevel, rz = refs[0]
            tx, level, tz = inst["gt_objects_pos"]["assem_obj_pos_gt"][t]
            expected = {"behind": (rx, 1, rz + 1), "in front of": (rx, 1, rz - 1),
                        "to the left of": (rx - 1, 1, rz), "to the right of": (rx + 1, 1, rz),
                        "on top of": (rx, 2, rz)}[m["rel"]]
            assert (tx, level, tz) == expected
            seen[m["rel"]] += 1
            seen["ref placed in turn 0"] += t == 1 and m["ref"] == spoken(inst["gt_objects"][0])
            grid[tx, level, tz] = m["name"]
    # every kind of route and relation occurs
    for initial in (None, "left", "right", "around"):
        assert sum(v for k, v in seen.items() if isinstance(k, tuple) and k[0] == initial) > 20
    for nth in ("first", "second"):
        for direction in ("left", "right"):
            assert sum(v for k, v in seen.items() if isinstance(k, tuple)
                       and k[1:] == (nth, direction)) > 20
    for rel in asyn.RELATIONS:
        assert seen[rel] > 40
    assert seen["ref placed in turn 0"] > 20
