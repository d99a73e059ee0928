"""Talk The Walk landmark maps: loading `map.json`, synthetic neighbourhoods, windows and splits.

A neighbourhood is a grid of street corners. Corner coordinates follow the official release:
a landmark at intersection (x, y) on corner `orientation` sits at
`cx = 2x + (orientation in {NE, SE})`, `cy = 2y + (orientation in {NW, NE})`.
Every experiment works on 4x4-corner windows of a neighbourhood; the window/split rule is the
one used to build the official `configurations.{train,valid,test}.json`.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Mapping, Sequence

import numpy as np

from ttw_jax.core import paths
from ttw_jax.core.records import RecordFormatError, is_int, read_json

# Landmark ids: 0 is padding, 10 is what a corner without landmarks shows.
LANDMARK_TYPES = ("<pad>", "Coffee Shop", "Shop", "Restaurant", "Bank", "Subway", "Playfield",
                  "Theater", "Bar", "Hotel", "Empty")
PAD_ID = 0
EMPTY_ID = LANDMARK_TYPES.index("Empty")
NUM_LANDMARK_IDS = len(LANDMARK_TYPES)
ORIENTATIONS = ("NW", "SW", "NE", "SE")

# Neighbourhood boundaries [bx, by]: (bx + 2) x (by + 2) intersections, (2bx + 4) x (2by + 4) corners.
BOUNDARIES: Mapping[str, tuple[int, int]] = {
    "hellskitchen": (3, 3), "williamsburg": (2, 8), "eastvillage": (3, 4), "fidi": (2, 3),
    "uppereast": (3, 3),
}
NEIGHBORHOODS = tuple(BOUNDARIES)
SPLITS = ("train", "valid", "test")
# Splits whose targets the release withholds: none. The Talk The Walk release
# (github.com/facebookresearch/talkthewalk) ships talkthewalk.{train,valid,test}.json and the maps,
# every split with its targets, so every split gets metrics.
HIDDEN_SPLITS: tuple[str, ...] = ()
WINDOW = 4  # windows are WINDOW x WINDOW corners

# Per-corner statistics of the real maps (460 corners of 4 neighbourhoods), used by the generator.
CORNER_COUNT_FREQ = {0: 214, 1: 220, 2: 24, 3: 2}
TYPE_FREQ = {"Shop": 95, "Restaurant": 86, "Bank": 24, "Coffee Shop": 17, "Bar": 15, "Subway": 15,
             "Playfield": 12, "Hotel": 7, "Theater": 3}

SOURCE_HINT = ("Talk The Walk maps come with the official release (github.com/facebookresearch/"
               "talkthewalk, scripts/download_data.sh); see BUILD.md.")


class MapFormatError(RecordFormatError):
    """A map file exists but its content is not in the `map.json` format."""


@dataclasses.dataclass(frozen=True)
class NeighborhoodMap:
    """Landmark ids per corner: `corners[cx, cy, :]`, padded with 0; `[EMPTY_ID]` if none."""
    name: str
    boundary: tuple[int, int]
    corners: np.ndarray  # (2bx + 4, 2by + 4, K) int32


@dataclasses.dataclass(frozen=True)
class Windows:
    """A set of 4x4-corner windows: everything an experiment needs from the maps.

    landmarks: (W, 4, 4, K) int32, `landmarks[w, x, y]` are the ids at window corner (x, y).
    neighborhood: (W,) names; origin: (W, 2) corner coordinates of window corner (0, 0).
    """
    landmarks: np.ndarray
    neighborhood: np.ndarray
    origin: np.ndarray

    def __len__(self) -> int:
        return int(self.landmarks.shape[0])


def map_paths(maps_dir: str, name: str) -> tuple[str, str]:
    """The two accepted layouts: `<nbh>/map.json` (official release) and `<nbh>_map.json`."""
    return os.path.join(maps_dir, name, "map.json"), os.path.join(maps_dir, f"{name}_map.json")


def find_map_file(maps_dir: str, name: str) -> str | None:
    for path in map_paths(maps_dir, name):
        if paths.isfile(path):
            return path
    return None


def _fail(path: str, where: str, problem: str) -> MapFormatError:
    return MapFormatError(f"{path}: {where}: {problem}")


def parse_map(entries, path: str, name: str, boundary: tuple[int, int]) -> NeighborhoodMap:
    """Validates decoded `map.json` content and rasterises it into per-corner landmark ids."""
    if not isinstance(entries, list):
        raise _fail(path, "top level", f"expected a JSON list of landmarks, got {type(entries).__name__}")
    bx, by = boundary
    width, height = 2 * bx + 4, 2 * by + 4
    per_corner: dict[tuple[int, int], list[int]] = {}
    for i, entry in enumerate(entries):
        where = f"entry {i}"
        if not isinstance(entry, dict):
            raise _fail(path, where, f"expected an object, got {type(entry).__name__}")
        for key in ("x", "y", "orientation", "type"):
            if key not in entry:
                raise _fail(path, where, f"missing field '{key}'")
        x, y = entry["x"], entry["y"]
        for key, value in (("x", x), ("y", y)):
            if not is_int(value):
                raise _fail(path, f"{where}, field '{key}'", f"expected an integer, got {value!r}")
        orientation = entry["orientation"]
        if orientation not in ORIENTATIONS:
            raise _fail(path, f"{where}, field 'orientation'",
                        f"expected one of {ORIENTATIONS}, got {orientation!r}")
        kind = entry["type"]
        if kind not in LANDMARK_TYPES[1:-1]:
            raise _fail(path, f"{where}, field 'type'",
                        f"unknown landmark type {kind!r}; known: {LANDMARK_TYPES[1:-1]}")
        cx = 2 * x + (1 if orientation in ("NE", "SE") else 0)
        cy = 2 * y + (1 if orientation in ("NW", "NE") else 0)
        if not (0 <= cx < width and 0 <= cy < height):
            raise _fail(path, f"{where}, fields 'x'/'y'",
                        f"corner ({cx}, {cy}) lies outside {name}'s {width}x{height} corners "
                        f"(boundary {list(boundary)})")
        per_corner.setdefault((cx, cy), []).append(LANDMARK_TYPES.index(kind))
    k = max([1] + [len(v) for v in per_corner.values()])
    corners = np.zeros((width, height, k), np.int32)
    corners[:, :, 0] = EMPTY_ID
    for (cx, cy), ids in per_corner.items():
        corners[cx, cy, :] = 0
        corners[cx, cy, :len(ids)] = ids  # file order; observations are bags (order-free)
    return NeighborhoodMap(name, boundary, corners)


def load_map(path: str, name: str, boundary: tuple[int, int] | None = None) -> NeighborhoodMap:
    """Reads one `map.json`; errors name the file and the offending entry and field."""
    if boundary is None:
        if name not in BOUNDARIES:
            raise ValueError(f"{path}: unknown neighbourhood {name!r}; known: {NEIGHBORHOODS}")
        boundary = BOUNDARIES[name]
    entries = read_json(path, MapFormatError, f"(a map file) {SOURCE_HINT}")
    return parse_map(entries, path, name, boundary)


def load_maps(maps_dir: str, names: Sequence[str] = ()) -> list[NeighborhoodMap]:
    """Loads the named neighbourhoods (all that exist in `maps_dir` when `names` is empty)."""
    if not paths.isdir(maps_dir):
        raise FileNotFoundError(f"{maps_dir}: maps directory not found. {SOURCE_HINT}")
    requested = list(names) or list(NEIGHBORHOODS)
    maps, missing = [], []
    for name in requested:
        path = find_map_file(maps_dir, name)
        if path is None:
            missing.append(name)
        else:
            maps.append(load_map(path, name))
    if (names and missing) or not maps:
        expected = ", ".join(p for n in (missing or requested) for p in map_paths(maps_dir, n))
        raise FileNotFoundError(f"missing Talk The Walk map files; expected: {expected}. {SOURCE_HINT}")
    return maps


def synthetic_maps(seed: int, names: Sequence[str] = NEIGHBORHOODS) -> list[NeighborhoodMap]:
    """Samples neighbourhoods with the real boundaries and per-corner count/type statistics."""
    rng = np.random.default_rng(seed)
    counts = np.array(list(CORNER_COUNT_FREQ.keys()))
    count_p = np.array(list(CORNER_COUNT_FREQ.values()), float)
    types = np.array([LANDMARK_TYPES.index(t) for t in TYPE_FREQ])
    type_p = np.array(list(TYPE_FREQ.values()), float)
    maps = []
    for name in names:
        bx, by = BOUNDARIES[name]
        corners = np.zeros((2 * bx + 4, 2 * by + 4, int(counts.max())), np.int32)
        n = rng.choice(counts, size=corners.shape[:2], p=count_p / count_p.sum())
        for cx, cy in np.ndindex(*corners.shape[:2]):
            ids = np.sort(rng.choice(types, size=n[cx, cy], p=type_p / type_p.sum()))
            corners[cx, cy, :len(ids)] = ids
            if not len(ids):
                corners[cx, cy, 0] = EMPTY_ID
        maps.append(NeighborhoodMap(name, (bx, by), corners))
    return maps


def to_map_json(nmap: NeighborhoodMap) -> list[dict]:
    """The `map.json` entries of a neighbourhood (inverse of `parse_map`, names are placeholders)."""
    entries = []
    for cx, cy in np.ndindex(*nmap.corners.shape[:2]):
        for lid in nmap.corners[cx, cy]:
            if lid in (PAD_ID, EMPTY_ID):
                continue
            orientation = {(0, 1): "NW", (0, 0): "SW", (1, 1): "NE", (1, 0): "SE"}[(cx % 2, cy % 2)]
            entries.append({"x": cx // 2, "y": cy // 2, "orientation": orientation,
                            "type": LANDMARK_TYPES[lid], "name": f"{LANDMARK_TYPES[lid]} {len(entries)}"})
    return entries


def window_split(mx: int, my: int, boundary: tuple[int, int]) -> str:
    """The official split rule for the window whose lower-left corner is (2mx, 2my)."""
    bx, by = boundary
    if not (my >= by - 1 and mx < 3):
        return "train"
    if my == by and mx < 2:
        return "test"
    return "valid"


def windows(maps: Sequence[NeighborhoodMap], split: str | None = None) -> Windows:
    """All 4x4-corner windows of `maps` in `split` (all windows when `split` is None)."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    k = max(m.corners.shape[-1] for m in maps)
    lms, names, origins = [], [], []
    for m in maps:
        bx, by = m.boundary
        for mx in range(bx + 1):
            for my in range(by + 1):
                if split is not None and window_split(mx, my, m.boundary) != split:
                    continue
                block = m.corners[2 * mx:2 * mx + WINDOW, 2 * my:2 * my + WINDOW]
                lms.append(np.pad(block, ((0, 0), (0, 0), (0, k - block.shape[-1]))))
                names.append(m.name)
                origins.append((2 * mx, 2 * my))
    return Windows(np.asarray(lms, np.int32).reshape(-1, WINDOW, WINDOW, k),
                   np.asarray(names), np.asarray(origins, np.int32).reshape(-1, 2))


def load_windows(maps_dir: str | None, seed: int = 0,
                 names: Sequence[str] = ()) -> dict[str, Windows]:
    """Train/valid/test windows from real maps in `maps_dir`, or synthetic maps when it is empty."""
    maps = load_maps(maps_dir, names) if maps_dir else synthetic_maps(seed, names or NEIGHBORHOODS)
    return {split: windows(maps, split) for split in SPLITS}
