"""ArraMon instances (the dicts of `ttw_jax.arramon.records`) as padded episode arrays, and
the walkable map of a split.

Reconstructed facts (see `../shared/README.md`; `tests/arramon/test_env.py` replays every
val_seen instance with them):
- The start heading is not stored. `start_heading` takes the first forward step of the
  instance, psi = atan2(dx, dz), and undoes the turns before it (l = -30, r = +30 degrees).
- Turn 2 starts from turn 1's final pose (its last path point and heading).
- Real data do not list the objects already on the assembly grid. `initial_heights` puts one
  object under every target of level 2 that is not explained by the first turn's placement,
  which is the least the ground truth implies; their looks are unknown (attribute 0).
- Real data list only the two target objects; synthetic instances carry every object, the city
  (`world`) and the assembly grid's objects.
Free space (`walkable_from_paths`): walls and buildings are not in the data, so a real split's
walkable map holds the points within 1.0 unit of some ground-truth path point of the split,
as a raster of `resolution` cells judged at their centres (so the radius is exact to within
half a cell diagonal). Synthetic cities rasterise their own buildings (`walkable_from_worlds`).
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Iterable, Sequence

import numpy as np

from ttw_jax.arramon import env, records as ar
from ttw_jax.core import paths
from ttw_jax.core.env import batched
from ttw_jax.core.vocab import Vocabulary, tokenize

NAV_ACTION_IDS = {a: i for i, a in enumerate(ar.ACTIONS)}
NUM_ATTRIBUTES = (len(ar.PATTERNS) + 1, len(ar.COLOURS) + 1, len(ar.TYPES) + 1)  # 0 = unknown


def actions_of(actions: Sequence[str]) -> list[int]:
    """Action ids of one turn's action strings, without the trailing turn token."""
    return [NAV_ACTION_IDS[a] for a in actions if a in NAV_ACTION_IDS]


def start_heading(rec: dict) -> float:
    """psi0 (radians): the heading before the first action of turn 1, from the first forward
    step and the turns before it. ValueError when the instance never moves forward."""
    net = 0
    for turn in range(2):
        path = rec["gt_paths"]["navi_path_gt"][turn]
        for a in actions_of(rec["gt_actions"]["navi_action_gt"][turn]):
            if a == env.FORWARD:
                (x0, _, z0), (x1, _, z1) = path[0], path[1]
                return math.atan2(x1 - x0, z1 - z0) - math.radians(30 * net)
            net += {env.LEFT: -1, env.RIGHT: 1}.get(a, 0)
    raise ValueError(f"instance (mapId {rec.get('mapId')!r}) never moves forward: no start "
                     "heading")


def turn_headings(rec: dict) -> tuple[int, int]:
    """Heading indices (30-degree steps from psi0, mod 12) at the start of each turn."""
    net = sum({env.LEFT: -1, env.RIGHT: 1}.get(a, 0)
              for a in actions_of(rec["gt_actions"]["navi_action_gt"][0]))
    return 0, net % env.NUM_HEADINGS


def object_attributes(name: str) -> tuple[int, int, int]:
    """(pattern, colour, type) ids, 1-based (0 = unknown)."""
    p, c, t = ar.parse_object_name(name)
    return ar.PATTERNS.index(p) + 1, ar.COLOURS.index(c) + 1, ar.TYPES.index(t) + 1


def initial_heights(rec: dict) -> tuple[np.ndarray, np.ndarray]:
    """(heights [5, 4] int32 objects on the grid before turn 1, attrs [5, 4, 3] int32 of the top
    object of each cell, 0 where unknown)."""
    heights = np.zeros((env.GRID_COLUMNS, env.GRID_ROWS), np.int32)
    attrs = np.zeros((env.GRID_COLUMNS, env.GRID_ROWS, 3), np.int32)
    world = rec.get("world")
    if world is not None:
        for obj in world["assembly_objects"]:
            gx, level, gz = obj["cell"]
            heights[gx, gz] = max(heights[gx, gz], level)
            if level >= heights[gx, gz]:
                attrs[gx, gz] = object_attributes(obj["name"])
        return heights, attrs
    (gx0, level0, gz0), (gx1, level1, gz1) = rec["gt_objects_pos"]["assem_obj_pos_gt"]
    heights[gx0, gz0] = level0 - 1
    after = heights.copy()
    after[gx0, gz0] = level0                     # turn 1's object placed
    heights[gx1, gz1] += max(0, level1 - 1 - after[gx1, gz1])
    return heights, attrs


# The official vocabulary file (the release's `data/na_vocab.txt`, 774 lines): one token a line,
# its line number its id, these two first (`tok.Tokenizer`; `build_vocab` keeps the training
# words seen at least 3 times, `MIN_WORD_OCCURRENCE`, by decreasing count).
VOCAB_SPECIALS = ("<PAD>", "<UNK>")
OFFICIAL_MIN_COUNT = 3
VOCAB_HINT = ("the release keeps it as data/na_vocab.txt (github.com/hyounghk/ArraMon), "
              "beside train.json")


def read_vocab_file(path: paths.PathLike) -> Vocabulary:
    """The vocabulary of an official vocabulary file, read as shipped (the official
    `Tokenizer.load`: id = line number, `<PAD>` 0, `<UNK>` 1); a word it does not list encodes
    as `<UNK>` (1), as the official `word2idx`. FileNotFoundError / ValueError naming the file
    when it is missing, empty, does not start with `<PAD>`, `<UNK>`, or has an empty line, a
    token with a space (e.g. a "word count" line) or a control character (NUL), or a token
    twice."""
    path = paths.resolve(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: vocabulary file not found; {VOCAB_HINT}")
    lines = path.read_text(encoding="utf-8").splitlines()
    where = f"{path}: not an official vocabulary file (one token a line, {VOCAB_SPECIALS[0]} " \
            f"and {VOCAB_SPECIALS[1]} first)"
    if tuple(lines[:2]) != VOCAB_SPECIALS:
        raise ValueError(f"{where}: it starts with {lines[:2]!r}")
    seen: dict[str, int] = {}
    for i, word in enumerate(lines):
        if (not word.strip() or len(word.split()) != 1 or word != word.strip()
                or not word.isprintable()):
            raise ValueError(f"{where}: line {i + 1} is {word!r}")
        if word in seen:
            raise ValueError(f"{where}: {word!r} on lines {seen[word] + 1} and {i + 1}")
        seen[word] = i
    return Vocabulary(tuple(lines))


def write_vocab_file(path: paths.PathLike, texts: Iterable[str],
                     min_count: int = OFFICIAL_MIN_COUNT) -> int:
    """Writes an official-format vocabulary file of `texts` as the official `build_vocab`
    would (the words seen at least `min_count` times, by decreasing count, ties in order of
    first use; `tokenize`'s words); returns its number of lines."""
    counts = Counter(w for t in texts for w in tokenize(t))
    words = [w for w, c in sorted(counts.items(), key=lambda wc: -wc[1]) if c >= min_count]
    lines = [*VOCAB_SPECIALS, *words]
    paths.write_text(path, "\n".join(lines) + "\n")
    return len(lines)


def _pad(rows: list[np.ndarray], length: int, fill=0, dtype=np.float32) -> np.ndarray:
    shape = (len(rows), length) + rows[0].shape[1:]
    out = np.full(shape, fill, dtype)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r[:length]
    return out


def episodes(records: Sequence[dict], vocab: Vocabulary, max_tokens: int = 100,
             max_objects: int = 8, map_index: Sequence[int] | None = None,
             truncate: str = "warn") -> dict:
    """Padded arrays of N instances (axis 1 of the per-turn arrays is the turn):

    start [N, 2] (x, z), psi0 [N] float32 radians, turn_heading [N, 2] int32, map_index [N];
    objects [N, K, 3], object_mask [N, K], object_attrs [N, K, 3] int32 (targets of turn 1 and 2
    are objects 0 and 1); heights [N, 5, 4], grid_attrs [N, 5, 4, 3] int32;
    navi_actions [N, 2, Tn] / navi_len [N, 2] (the pick-up included), navi_path [N, 2, Pn, 2] /
    navi_path_len [N, 2]; assem_actions, assem_len, assem_path (world (x, z)), assem_path_len;
    target_pos [N, 2, 3] (x, y, z); assem_target [N, 2, 3] (gx, level, gz);
    navi_tokens / assem_tokens [N, 2, max_tokens] with navi_token_len / assem_token_len [N, 2].
    Action arrays are padded with PICK; paths with their last point. An instruction longer
    than `max_tokens` is cut with a warning, or refused (`truncate="error"`, naming the longest;
    `Vocabulary.encode`).
    """
    n = len(records)
    if not n:
        raise ValueError("no instances to make episodes of (an empty split or partition)")
    out: dict[str, np.ndarray] = {}
    out["start"] = np.array([r["gt_paths"]["navi_path_gt"][0][0][::2] for r in records],
                            np.float32).reshape(n, 2)
    out["psi0"] = np.array([start_heading(r) for r in records], np.float32)
    out["turn_heading"] = np.array([turn_headings(r) for r in records], np.int32).reshape(n, 2)
    out["map_index"] = np.asarray(map_index if map_index is not None else np.zeros(n), np.int32)

    objs, masks, attrs = [], [], []
    for i, r in enumerate(records):
        world = r.get("world")
        listed = (world["objects"] if world is not None else
                  [{"name": nm, "pos": p} for nm, p in zip(r["gt_objects"],
                                                           r["gt_objects_pos"]["navi_obj_pos_gt"])])
        if len(listed) > max_objects:
            raise ValueError(f"instance {i} (mapId {r['mapId']}) has {len(listed)} objects; "
                             f"raise max_objects ({max_objects})")
        objs.append(np.array([o["pos"] for o in listed], np.float32))
        attrs.append(np.array([object_attributes(o["name"]) for o in listed], np.int32))
        masks.append(np.ones(len(listed), bool))
    out["objects"] = _pad(objs, max_objects)
    out["object_attrs"] = _pad(attrs, max_objects, dtype=np.int32)
    out["object_mask"] = _pad(masks, max_objects, False, bool)
    grids = [initial_heights(r) for r in records]
    out["heights"] = np.stack([g[0] for g in grids])
    out["grid_attrs"] = np.stack([g[1] for g in grids])

    for phase, key in (("navi", "navi"), ("assem", "assem")):
        acts = [[np.array(actions_of(r["gt_actions"][f"{key}_action_gt"][t]), np.int32)
                 for t in range(2)] for r in records]
        paths = [[np.array(r["gt_paths"][f"{key}_path_gt"][t], np.float32)[:, ::2]
                  for t in range(2)] for r in records]
        t_max = max(len(a) for pair in acts for a in pair)
        p_max = max(len(p) for pair in paths for p in pair)
        out[f"{phase}_len"] = np.array([[len(a) for a in pair] for pair in acts], np.int32)
        out[f"{phase}_actions"] = np.stack(
            [_pad(pair, t_max, env.PICK, np.int32) for pair in acts])
        out[f"{phase}_path_len"] = np.array([[len(p) for p in pair] for pair in paths], np.int32)
        out[f"{phase}_path"] = np.stack(
            [_pad([np.concatenate([p, np.repeat(p[-1:], p_max - len(p), 0)]) for p in pair],
                  p_max) for pair in paths])
        texts = [s for r in records for s in r["instructions"][f"{key}_inst_gt"]]
        tokens, lengths = vocab.encode(texts, max_tokens, f"{key} instructions (data.max_tokens)",
                                       truncate)
        out[f"{phase}_tokens"] = tokens.reshape(n, 2, max_tokens)
        out[f"{phase}_token_len"] = lengths.reshape(n, 2)
    out["target_pos"] = np.array([r["gt_objects_pos"]["navi_obj_pos_gt"] for r in records],
                                 np.float32).reshape(n, 2, 3)
    out["assem_target"] = np.array([r["gt_objects_pos"]["assem_obj_pos_gt"] for r in records],
                                   np.int32).reshape(n, 2, 3)
    return out


MAX_RASTER_CELLS = 256 * 2 ** 20


def rasterise(points_xz: np.ndarray, radius: float, resolution: float,
              margin: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """(grid [H, W] bool of cells whose centre lies within `radius` of some point, origin [2]).
    Refuses more than `MAX_RASTER_CELLS` cells (a 256 MB raster) naming the points' extent."""
    lo = points_xz.min(0) - radius - margin
    hi = points_xz.max(0) + radius + margin
    shape = np.ceil((hi - lo) / resolution).astype(int)
    if np.prod(shape.astype(float)) > MAX_RASTER_CELLS:
        raise ValueError(f"the walkable raster of points spanning x {points_xz[:, 0].min():g}.."
                         f"{points_xz[:, 0].max():g}, z {points_xz[:, 1].min():g}.."
                         f"{points_xz[:, 1].max():g} at resolution {resolution:g} would have "
                         f"{int(shape[0])} x {int(shape[1])} cells (limit {MAX_RASTER_CELLS:,})")
    grid = np.zeros(shape, bool)
    r = int(math.ceil(radius / resolution)) + 1
    offs = np.arange(-r, r + 1)
    di, dj = np.meshgrid(offs, offs, indexing="ij")
    di, dj = di.ravel(), dj.ravel()
    for chunk in np.array_split(points_xz, max(1, len(points_xz) // 4096)):
        base = np.floor((chunk - lo) / resolution).astype(int)          # [P, 2]
        ii = base[:, :1] + di[None]                                      # [P, S]
        jj = base[:, 1:] + dj[None]
        cx = lo[0] + (ii + 0.5) * resolution
        cz = lo[1] + (jj + 0.5) * resolution
        near = (cx - chunk[:, :1]) ** 2 + (cz - chunk[:, 1:]) ** 2 <= radius ** 2
        ok = near & (ii >= 0) & (ii < shape[0]) & (jj >= 0) & (jj < shape[1])
        grid[ii[ok], jj[ok]] = True
    return grid, lo.astype(np.float32)


def walkable_from_paths(records: Sequence[dict], radius: float = 1.0,
                        resolution: float = 0.1) -> env.Walkable:
    """One raster (map_index 0) of the points within `radius` of the split's ground-truth
    navigation path points."""
    pts = np.concatenate([np.asarray(p, np.float64)[:, ::2] for r in records
                          for p in r["gt_paths"]["navi_path_gt"]])
    grid, origin = rasterise(pts, radius, resolution)
    return env.Walkable(grid=grid[None], origin=origin[None], resolution=resolution)


def walkable_from_worlds(records: Sequence[dict], resolution: float = 0.5) -> env.Walkable:
    """One raster per synthetic instance (map_index = its position): cells whose centre is inside
    `world.bounds` and outside every building. The rasters start a quarter cell before the
    bounds, so no cell edge falls on the half-unit lattice where synthetic streets, buildings
    and steps meet (float32 and float64 then agree on every landing point)."""
    bounds = np.array([r["world"]["bounds"] for r in records], np.float64)
    bounds[:, :2] -= resolution / 4
    bounds[:, 2:] += resolution / 4
    size = np.ceil((bounds[:, 2:] - bounds[:, :2]).max(0) / resolution).astype(int)
    grids = np.zeros((len(records), *size), bool)
    for g, r in enumerate(records):
        x1, z1 = r["world"]["bounds"][2:]
        cx = bounds[g, 0] + (np.arange(size[0]) + 0.5) * resolution
        cz = bounds[g, 1] + (np.arange(size[1]) + 0.5) * resolution
        free = (cx[:, None] < x1) & (cz[None, :] < z1)
        for bx0, bz0, bx1, bz1 in r["world"]["buildings"]:
            free &= ~(((cx >= bx0) & (cx < bx1))[:, None] & ((cz >= bz0) & (cz < bz1))[None, :])
        grids[g] = free
    return env.Walkable(grid=grids, origin=bounds[:, :2].astype(np.float32), resolution=resolution)


def walkable_for(records: Sequence[dict]) -> tuple[env.Walkable, np.ndarray]:
    """(walkable map, map_index [N]) of a split: per-instance cities for synthetic instances,
    the split's path map for real ones."""
    if all("world" in r for r in records):
        return walkable_from_worlds(records), np.arange(len(records), dtype=np.int32)
    return walkable_from_paths(records), np.zeros(len(records), np.int32)


def turn_examples(ep: dict) -> dict:
    """Each instance's two turns as separate teacher-forcing examples ([2N, ...]; turn 2 rows
    follow all turn 1 rows), each starting from the ground truth's state at that turn: turn 2
    starts at turn 1's last path point and heading, with turn 1's target picked up and placed
    on the grid (where the ground truth put it).

    Keys: start, psi0, heading, map_index, objects, object_attrs, object_mask, present, heights,
    grid_attrs, target (the turn's target object index: the turn), navi_path / navi_path_len
    (the gold path, for the student-forcing expert), and per phase (navi / assem) `_actions`,
    `_len`, `_tokens`, `_token_len`.
    """
    n, k = ep["object_mask"].shape
    rows = np.arange(n)
    gx, _, gz = ep["assem_target"][:, 0].T
    heights1 = ep["heights"].copy()
    heights1[rows, gx, gz] += 1
    attrs1 = ep["grid_attrs"].copy()
    attrs1[rows, gx, gz] = ep["object_attrs"][:, 0]
    turns = []
    for t in range(2):
        ex = {key: ep[key] for key in ("psi0", "map_index", "objects", "object_attrs",
                                         "object_mask")}
        ex["start"] = ep["navi_path"][:, t, 0]
        ex["heading"] = ep["turn_heading"][:, t]
        ex["present"] = ep["object_mask"] & ((np.arange(k) != 0) | (t == 0))[None]
        ex["heights"] = ep["heights"] if t == 0 else heights1
        ex["grid_attrs"] = ep["grid_attrs"] if t == 0 else attrs1
        ex["target"] = np.full(n, t, np.int32)
        ex["navi_path"], ex["navi_path_len"] = ep["navi_path"][:, t], ep["navi_path_len"][:, t]
        for phase in ("navi", "assem"):
            for suffix in ("_actions", "_len", "_tokens", "_token_len"):
                ex[phase + suffix] = ep[phase + suffix][:, t]
        turns.append(ex)
    return {key: np.concatenate([turns[0][key], turns[1][key]]) for key in turns[0]}


def paired_turns(examples: dict) -> dict:
    """`turn_examples`' rows [2N, ...] as instance rows [N, 2, ...] (axis 1 the turn): the
    batches of the per-turn training (`losses.per_module_updates`)."""
    return {k: np.stack(np.split(np.asarray(v), 2), 1) for k, v in examples.items()}


def navigation_start(walkable: env.Walkable, batch: dict) -> env.NavState:
    """The batched navigation states a turn-level `batch` (the keys of `turn_examples`, or a
    turn of the cascaded task) starts from."""
    return batched(env.reset_navigation)(walkable, batch["start"], batch["psi0"],
                                         batch["objects"], batch["present"], batch["map_index"],
                                         batch["heading"])


def assembly_start(grid: env.AssemblyGrid, batch: dict) -> env.AssemblyState:
    """The batched assembly states a turn-level `batch` starts from."""
    return batched(env.reset_assembly)(grid, batch["heights"])
