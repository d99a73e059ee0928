"""Synthetic ArraMon instances in the official schema (`ttw_jax.arramon.records`) plus a
`world` describing the city and the assembly grid, so the whole pipeline runs with no download.

`synthetic_instances(num, seed)` is deterministic: instance i is drawn from its own generator
`np.random.default_rng([seed, i])` (so a shorter call gives a prefix of a longer one); every
instance passes `validate_instance`.

Motion rules (the records replay exactly under them, up to 1e-9 from rounding the stored points to
6 decimals): the heading psi is in degrees from +z towards +x; `f` adds (sin psi, cos psi) to
(x, z); `l` / `r` change psi by -30 / +30; `P` ends the phase. Navigation path points are
(x, AGENT_Y, z): the start plus one point per `f`. The initial heading is not stored (as in the
real data): it is the heading of the first forward step minus 30 * (#r - #l) before it. Synthetic
headings are multiples of 30 (psi0 offset 0), and every forward step happens at a multiple of 90.

City (one per instance): a Manhattan grid with bounds [0, 0, S, S], N = 4 or 5 streets per axis,
3 units wide (`STREET_WIDTH`) at pitch 10 (`PITCH`), S = 10 (N - 1) + 3; `buildings` are the 7 x 7
blocks between streets. Agents walk on the street centrelines (x or z = 10 k + 1.5), so a unit
step along a street stays on it; walkable = inside the bounds and not inside a building.

Navigation turn: turn 0 starts at a random centreline point that is not an intersection, facing a
random multiple of 90 degrees (possibly towards a building); turn 1 starts at turn 0's final pose.
Route: an initial turn (none / left `lll` / right `rrr` / around, six `r` or six `l`), forward to
the first or second intersection ahead, a left or right turn there, 2 to 6 steps forward and `P`.
The options are enumerated and only walkable ones (every point walkable and on a centreline, the
target too) are drawn, hierarchically: the initial turn, then the intersection, the direction and
the distance. The target lies 1.0 to 2.5 units straight ahead of the final pose (y =
`OBJECT_Y`), inside the pick-up rectangle (|lateral| <= 0.5, 0 <= forward <= 3); the two targets
have distinct names and are at least `MIN_SEPARATION` (4) apart. 4 to 6 distracters with other
names stand at random walkable centreline points at least 4 from both targets (so at every pick-up
the target is the only object in the rectangle); for each target at least one distracter shares
its type or its colour, so the whole name must be read. `world.objects` = [target 0, target 1,
distracters...].

Assembly (5 x 4 grid, `records.GRID_COLUMNS` x `GRID_ROWS`): 3 to 5 pre-existing objects
(`world.assembly_objects`, other names) at level 1 in distinct cells other than (2, 0). Each phase
starts at (2, 0) facing +z; `f` moves one cell along the heading (only at multiples of 90, staying
in the grid), `l` / `r` turn by 30 degrees, `P` places the held object in the cell one step ahead.
Turn t's target cell is a relation (`RELATIONS`) to a reference object (pre-existing or, in turn
1, possibly the object placed in turn 0): behind (gz + 1), in front of (gz - 1), to the left of
(gx - 1), to the right of (gx + 1) of an object, all at level 1 in an empty cell other than
(2, 0), or on top of a level-1 object that has nothing on it (level 2). The relation is drawn
first among those possible, then the reference. The actions are the shortest sequence found by a
breadth-first search over (gx, gz, heading / 30) with f, l, r in that order (`assembly_actions`),
then `P`; the path is the start plus one `assembly_world` point per `f`.

Instructions are English templates with a few synonyms, lower case, each sentence ending with
".": navigation ("turn around and walk forward. turn right at the second intersection. continue
until you reach the dotted yellow hourglass and pick it up.") states the initial turn, the
intersection, the direction and the target's full name; assembly ("put the dotted yellow
hourglass behind the striped red mug.") the target, the relation and the reference. `code` is 6
upper-case letters / digits (unique within a call), `mapId` = 10**6 seed + i (one city per
instance), `filename` = "synthetic_{seed}_{i}.json".
"""
from __future__ import annotations

import collections
import math
from typing import Sequence

import numpy as np

from ttw_jax.arramon import records as ar

AGENT_Y = 0.525
OBJECT_Y = 0.062
STREET_WIDTH = 3.0
PITCH = 10.0
STREETS_PER_AXIS = (4, 5)
TURN = 30                                    # degrees per l / r
MIN_SEPARATION = 4.0                         # distracters (and the two targets) from targets
DISTRACTERS = (4, 6)                         # inclusive range
PREPLACED = (3, 5)                           # inclusive range of pre-existing assembly objects
WALK_AFTER_TURN = (2, 6)                     # forward steps after the turn, inclusive
TARGET_AHEAD = (1.0, 2.5)                    # target distance ahead of the final pose
CODE_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
MAX_ATTEMPTS = 200                           # redraws of an instance before giving up

INITIAL_TURNS = {"none": 0, "left": -90, "right": 90, "around": 180}
NTH = {1: "first", 2: "second"}
# relation -> (dgx, dgz); None: on top of the reference (same cell, one level up)
RELATIONS = {"behind": (0, 1), "in front of": (0, -1), "to the left of": (-1, 0),
             "to the right of": (1, 0), "on top of": None}
# cell moves (dgx, dgz) of headings 0, 90, 180, 270 degrees (+z, +x, -z, -x)
AXIS_MOVES = ((0, 1), (1, 0), (0, -1), (-1, 0))
HEADINGS = 360 // TURN

_WALK = ("walk forward", "go straight", "head straight ahead")
_START = {"none": "", "left": "turn left and ", "right": "turn right and ",
          "around": "turn around and "}
_TURN = ("turn {dir} at the {nth} intersection.", "at the {nth} intersection, turn {dir}.",
         "take a {dir} at the {nth} intersection.")
_FINISH = ("continue until you reach the {name} and pick it up.",
           "keep going until you see the {name} and pick it up.",
           "walk on until you find the {name} and collect it.",
           "go on until you reach the {name} and take it.")
_PLACE = ("put", "place", "set")


# ----------------------------------------------------------------------------- city

class City:
    """A Manhattan grid of `num_streets` streets per axis (see the module docstring)."""

    def __init__(self, num_streets: int):
        self.num_streets = num_streets
        self.size = PITCH * (num_streets - 1) + STREET_WIDTH
        self.centres = tuple(PITCH * k + STREET_WIDTH / 2 for k in range(num_streets))

    def buildings(self) -> list[list[float]]:
        """[x0, z0, x1, z1] of every block between streets."""
        lo = [PITCH * k + STREET_WIDTH for k in range(self.num_streets - 1)]
        return [[x, z, x + PITCH - STREET_WIDTH, z + PITCH - STREET_WIDTH] for x in lo for z in lo]

    def world(self) -> dict:
        return {"bounds": [0.0, 0.0, self.size, self.size], "buildings": self.buildings()}

    def _in_block(self, v: float) -> bool:
        r = v - PITCH * math.floor(v / PITCH)
        return STREET_WIDTH + 1e-9 < r < PITCH - 1e-9

    def walkable(self, x: float, z: float) -> bool:
        inside = 0.0 <= x <= self.size and 0.0 <= z <= self.size
        return inside and not (self._in_block(x) and self._in_block(z))

    def _centre(self, v: float) -> bool:
        k = round((v - STREET_WIDTH / 2) / PITCH)
        return 0 <= k < self.num_streets and abs(v - self.centres[k]) < 1e-6

    def on_centreline(self, x: float, z: float) -> bool:
        return self.walkable(x, z) and (self._centre(x) or self._centre(z))

    def at_intersection(self, x: float, z: float) -> bool:
        return self._centre(x) and self._centre(z)


_AXIS_DIRECTIONS = {0: (0.0, 1.0), 90: (1.0, 0.0), 180: (0.0, -1.0), 270: (-1.0, 0.0)}


def step(x: float, z: float, psi: int, distance: float = 1.0) -> tuple[float, float]:
    """(x, z) moved `distance` along heading psi (degrees): (sin psi, cos psi), rounded to 6
    decimals (exact axis directions at multiples of 90, which round the same)."""
    if psi % 360 in _AXIS_DIRECTIONS:
        dx, dz = _AXIS_DIRECTIONS[psi % 360]
    else:
        rad = math.radians(psi)
        dx, dz = math.sin(rad), math.cos(rad)
    return round(x + distance * dx, 6), round(z + distance * dz, 6)


def _walk(city: City, x: float, z: float, psi: int, steps: int) -> list[tuple[float, float]]:
    """The points after each of up to `steps` forward steps, stopping before the first one off
    the centrelines."""
    out = []
    for _ in range(steps):
        x, z = step(x, z, psi)
        if not city.on_centreline(x, z):
            break
        out.append((x, z))
    return out


def route_options(city: City, x: float, z: float, psi: int) -> list[tuple]:
    """Every walkable (initial turn, nth intersection, turn 'left' / 'right', forward steps after
    the turn) from pose (x, z, psi) whose farthest target position is walkable too."""
    out = []
    reach = int(2 * PITCH)   # the second intersection ahead is at most 2 pitches away
    for initial, delta in INITIAL_TURNS.items():
        psi1 = (psi + delta) % 360
        ahead = _walk(city, x, z, psi1, reach)
        crossings = [p for p in ahead if city.at_intersection(*p)][:2]
        for nth, (ix, iz) in enumerate(crossings, 1):
            for turn in ("left", "right"):
                psi2 = (psi1 + INITIAL_TURNS[turn]) % 360
                walked = _walk(city, ix, iz, psi2, WALK_AFTER_TURN[1])
                for w in range(WALK_AFTER_TURN[0], len(walked) + 1):
                    fx, fz = walked[w - 1]
                    if all(city.on_centreline(*step(fx, fz, psi2, d)) for d in TARGET_AHEAD):
                        out.append((initial, nth, turn, w))
    return out


def _pick(rng: np.random.Generator, values: Sequence):
    return values[int(rng.integers(len(values)))]


def _choose_route(rng: np.random.Generator, options: list[tuple]) -> tuple:
    """An option drawn level by level: initial turn, intersection, direction, distance."""
    for level in range(3):
        values = sorted({o[level] for o in options}, key=str)
        chosen = _pick(rng, values)
        options = [o for o in options if o[level] == chosen]
    return _pick(rng, options)


def _navigation_turn(rng, city: City, x: float, z: float, psi: int, name: str):
    """(actions without the turn token, path points, final (x, z, psi), target (x, z),
    instruction), or None if no route is walkable from the pose."""
    options = route_options(city, x, z, psi)
    if not options:
        return None
    initial, nth, turn, w = _choose_route(rng, options)
    if initial == "around":
        start_turn = [_pick(rng, ("l", "r"))] * 6
    else:
        start_turn = {"none": [], "left": ["l"] * 3, "right": ["r"] * 3}[initial]
    actions, path = list(start_turn), [(x, z)]
    psi = (psi + INITIAL_TURNS[initial]) % 360
    crossed = 0
    while crossed < nth:   # to the nth intersection ahead
        x, z = step(x, z, psi)
        actions.append("f")
        path.append((x, z))
        crossed += city.at_intersection(x, z)
    actions += [("l" if turn == "left" else "r")] * 3
    psi = (psi + INITIAL_TURNS[turn]) % 360
    for _ in range(w):
        x, z = step(x, z, psi)
        actions.append("f")
        path.append((x, z))
    actions.append("P")
    distance = round(float(rng.uniform(*TARGET_AHEAD)), 2)
    target = step(x, z, psi, distance)
    text = " ".join((
        f"{_START[initial]}{_pick(rng, _WALK)}.",
        _pick(rng, _TURN).format(dir=turn, nth=NTH[nth]),
        _pick(rng, _FINISH).format(name=name)))
    return actions, path, (x, z, psi), target, text


# ----------------------------------------------------------------------------- objects

def object_name(parts: Sequence[str]) -> str:
    """The data's spelling of (pattern, colour, type): "Dotted Yellow Hourglass"."""
    return " ".join(p.title() for p in parts)


def _random_parts(rng) -> tuple[str, str, str]:
    return (_pick(rng, ar.PATTERNS), _pick(rng, ar.COLOURS), _pick(rng, ar.TYPES))


def _new_parts(rng, used: set, keep: tuple[str, str, str] | None = None,
               shared: str | None = None) -> tuple[str, str, str]:
    """Random (pattern, colour, type) not in `used`; with `keep`, sharing its `shared` attribute
    ('colour' or 'type')."""
    while True:
        parts = _random_parts(rng)
        if keep is not None:
            i = 1 if shared == "colour" else 2
            parts = parts[:i] + (keep[i],) + parts[i + 1:]
        if parts not in used:
            used.add(parts)
            return parts


def _centreline_point(rng, city: City, exclude_intersections: bool) -> tuple[float, float]:
    while True:
        along = STREET_WIDTH / 2 + float(rng.integers(int(city.size - STREET_WIDTH) + 1))
        across = _pick(rng, city.centres)
        x, z = (across, along) if rng.integers(2) else (along, across)
        if not (exclude_intersections and city.at_intersection(x, z)):
            return x, z


def _distracter_points(rng, city: City, targets, count: int) -> list[tuple[float, float]] | None:
    points: list[tuple[float, float]] = []
    for _ in range(50 * count):
        x, z = _centreline_point(rng, city, exclude_intersections=False)
        if (all(math.dist((x, z), t) >= MIN_SEPARATION for t in targets)
                and all(math.dist((x, z), p) >= 1.0 for p in points)):
            points.append((x, z))
            if len(points) == count:
                return points
    return None


# ----------------------------------------------------------------------------- assembly

def assembly_actions(target: tuple[int, int], start: tuple[int, int] = ar.START_CELL,
                     heading: int = 0) -> list[str]:
    """The shortest actions (f, l, r, breadth-first in that order) from cell `start` facing
    30 * `heading` degrees until the cell one step ahead is `target` (gx, gz), then "P".
    `f` moves one cell along the heading, only at multiples of 90 degrees and within the grid."""
    first = (start[0], start[1], heading % HEADINGS)
    parent = {first: None}
    queue = collections.deque([first])
    while queue:
        state = queue.popleft()
        gx, gz, h = state
        if h % 3 == 0:
            dx, dz = AXIS_MOVES[h // 3]
            if (gx + dx, gz + dz) == tuple(target):
                actions = []
                while parent[state] is not None:
                    state, a = parent[state]
                    actions.append(a)
                return actions[::-1] + ["P"]
        moves = []
        if h % 3 == 0 and ar.in_grid(gx + AXIS_MOVES[h // 3][0], gz + AXIS_MOVES[h // 3][1]):
            moves.append(("f", (gx + AXIS_MOVES[h // 3][0], gz + AXIS_MOVES[h // 3][1], h)))
        moves += [("l", (gx, gz, (h - 1) % HEADINGS)), ("r", (gx, gz, (h + 1) % HEADINGS))]
        for a, nxt in moves:
            if nxt not in parent:
                parent[nxt] = (state, a)
                queue.append(nxt)
    raise ValueError(f"assembly cell {tuple(target)} is not reachable")


def assembly_path(actions: Sequence[str], start: tuple[int, int] = ar.START_CELL,
                  heading: int = 0) -> tuple[list[list[float]], tuple[int, int]]:
    """(world path: the start plus one `assembly_world` point per `f`, the final cell) of
    assembly actions under the rules of `assembly_actions`."""
    gx, gz = start
    h = heading % HEADINGS
    path = [list(ar.assembly_world(gx, gz))]
    for a in actions:
        if a == "f":
            dx, dz = AXIS_MOVES[h // 3]
            gx, gz = gx + dx, gz + dz
            path.append(list(ar.assembly_world(gx, gz)))
        elif a in ("l", "r"):
            h = (h + (1 if a == "r" else -1)) % HEADINGS
    return path, (gx, gz)


def _assembly_target(rng, grid: dict, placed: list[tuple], prefer: tuple | None):
    """(relation, reference (name, gx, level, gz), target [gx, level, gz]) or None.
    `grid` (gx, gz) -> objects there; `placed` the objects on the grid; `prefer` an object taken
    as the reference half of the time when possible."""
    valid = collections.defaultdict(list)
    for ref in placed:
        _, gx, level, gz = ref
        for relation, move in RELATIONS.items():
            if move is None:
                if level == 1 and grid[gx, gz] == 1:
                    valid[relation].append((ref, [gx, 2, gz]))
            else:
                cx, cz = gx + move[0], gz + move[1]
                if ar.in_grid(cx, cz) and (cx, cz) != ar.START_CELL and not grid[cx, cz]:
                    valid[relation].append((ref, [cx, 1, cz]))
    if not valid:
        return None
    relation = _pick(rng, [r for r in RELATIONS if r in valid])
    choices = valid[relation]
    preferred = [c for c in choices if c[0] == prefer]
    if preferred and rng.integers(2):
        ref, target = preferred[0]
    else:
        ref, target = _pick(rng, choices)
    return relation, ref, target


# ----------------------------------------------------------------------------- instances

def _instance(rng, index: int, seed: int) -> dict | None:
    city = City(int(_pick(rng, STREETS_PER_AXIS)))
    used: set = set()
    target_parts = [_new_parts(rng, used), _new_parts(rng, used)]
    names = [object_name(p) for p in target_parts]
    spoken = [" ".join(p) for p in target_parts]

    # navigation
    x, z = _centreline_point(rng, city, exclude_intersections=True)
    psi = 90 * int(rng.integers(4))
    navi = []
    for t in range(ar.NUM_TURNS):
        turn = _navigation_turn(rng, city, x, z, psi, spoken[t])
        if turn is None:
            return None
        navi.append(turn)
        x, z, psi = turn[2]
    targets = [turn[3] for turn in navi]
    if math.dist(*targets) < MIN_SEPARATION:
        return None
    count = int(rng.integers(DISTRACTERS[0], DISTRACTERS[1] + 1))
    confusers = [_new_parts(rng, used, target_parts[t], _pick(rng, ("colour", "type")))
                 for t in range(ar.NUM_TURNS)]
    others = [_new_parts(rng, used) for _ in range(count - len(confusers))]
    distracters = [(confusers + others)[i] for i in rng.permutation(count)]
    points = _distracter_points(rng, city, targets, count)
    if points is None:
        return None
    objects = [{"name": names[t], "pos": [targets[t][0], OBJECT_Y, targets[t][1]]}
               for t in range(ar.NUM_TURNS)]
    objects += [{"name": object_name(p), "pos": [px, OBJECT_Y, pz]}
                for p, (px, pz) in zip(distracters, points)]

    # assembly
    cells = [(gx, gz) for gx in range(ar.GRID_COLUMNS) for gz in range(ar.GRID_ROWS)
             if (gx, gz) != ar.START_CELL]
    num_placed = int(rng.integers(PREPLACED[0], PREPLACED[1] + 1))
    grid = collections.Counter()
    placed = []
    for i in rng.choice(len(cells), num_placed, replace=False):
        gx, gz = cells[int(i)]
        placed.append((" ".join(_new_parts(rng, used)), gx, 1, gz))
        grid[gx, gz] += 1
    assembly_objects = [{"name": object_name(n.split()), "cell": [gx, level, gz]}
                        for n, gx, level, gz in placed]
    assem, prefer = [], None
    for t in range(ar.NUM_TURNS):
        chosen = _assembly_target(rng, grid, placed, prefer)
        if chosen is None:
            return None
        relation, ref, cell = chosen
        actions = assembly_actions((cell[0], cell[2]))
        path, _ = assembly_path(actions)
        text = f"{_pick(rng, _PLACE)} the {spoken[t]} {relation} the {ref[0]}."
        assem.append((actions, path, cell, text))
        prefer = (spoken[t], cell[0], cell[1], cell[2])
        placed.append(prefer)
        grid[cell[0], cell[2]] += 1

    code = "".join(_pick(rng, CODE_CHARS) for _ in range(6))
    turns = range(ar.NUM_TURNS)
    navi_actions = [navi[t][0] + [str(t)] for t in turns]
    assem_actions = [assem[t][0] + [str(t)] for t in turns]
    return {
        "code": code,
        "gt_objects_pos": {"navi_obj_pos_gt": [list(o["pos"]) for o in objects[:2]],
                           "assem_obj_pos_gt": [list(a[2]) for a in assem]},
        "gt_paths": {"navi_path_gt": [[[px, AGENT_Y, pz] for px, pz in navi[t][1]]
                                      for t in turns],
                     "assem_path_gt": [a[1] for a in assem]},
        "gt_objects": names,
        "mapId": 10 ** 6 * seed + index,
        "gt_actions": {"navi_action_gt": navi_actions, "assem_action_gt": assem_actions},
        "gt_actionIDs": {
            "navi_actionIDs_gt": [[ar.ACTIONS.index(a) for a in acts[:-1]]
                                  for acts in navi_actions],
            "assem_actionIDs_gt": [[ar.ACTIONS.index(a) for a in acts[:-1]]
                                   for acts in assem_actions]},
        "filename": f"synthetic_{seed}_{index}.json",
        "instructions": {"navi_inst_gt": [navi[t][4] for t in turns],
                         "assem_inst_gt": [a[3] for a in assem]},
        "world": dict(city.world(), objects=objects, assembly_objects=assembly_objects),
    }


def synthetic_instances(num: int, seed: int) -> list[dict]:
    """`num` validated synthetic instances (see the module docstring); deterministic in `seed`
    (0 <= seed, num <= 10**6 so that mapIds stay distinct)."""
    if num < 0 or num > 10 ** 6 or seed < 0:
        raise ValueError(f"need 0 <= num <= 10**6 and seed >= 0, got num={num}, seed={seed}")
    out, codes = [], set()
    for i in range(num):
        rng = np.random.default_rng([seed, i])
        for _ in range(MAX_ATTEMPTS):
            inst = _instance(rng, i, seed)
            if inst is not None:
                break
        else:
            raise RuntimeError(f"synthetic instance {i} (seed {seed}): no valid layout in "
                               f"{MAX_ATTEMPTS} attempts")
        while inst["code"] in codes:
            inst["code"] = "".join(_pick(rng, CODE_CHARS) for _ in range(6))
        codes.add(inst["code"])
        out.append(ar.validate_instance(inst, f"synthetic instance {i} (seed {seed})"))
    return out
