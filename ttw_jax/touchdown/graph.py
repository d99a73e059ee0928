"""The Touchdown Street View graph: `nodes.txt` + `links.txt`, and a synthetic street grid.

`nodes.txt`: `panoid,pano_yaw_angle,lat,lng` per line; `links.txt`: `start_panoid,heading,end_panoid`
(integer compass heading, clockwise from north). Both without a header. The synthetic grid writes
the same two formats, so everything downstream runs with no download.
"""
from __future__ import annotations

import math
import os
from typing import Iterator, Mapping, Sequence

import numpy as np

from ttw_jax.core import paths
from ttw_jax.core.pano_graph import NodeTable, PanoGraph, build_graph
from ttw_jax.core.records import RecordFormatError, quantity_problem, read_lines

GRAPH_FILES = ("nodes.txt", "links.txt")
SOURCE_HINT = ("The Touchdown graph is in the official release (github.com/lil-lab/touchdown, "
               "`graph/nodes.txt` and `graph/links.txt`); see BUILD.md.")
EARTH_RADIUS_M = 6_371_000.0

NodeRow = tuple[str, int, float, float]   # panoid, yaw, lat, lng
LinkRow = tuple[str, int, str]            # start, heading, end


class GraphFormatError(RecordFormatError):
    """A graph file exists but a line does not parse; the message names file, line and field."""


def _fields(path: str, line_no: int, line: str, names: Sequence[str]) -> list[str]:
    parts = line.split(",")
    if len(parts) != len(names):
        raise GraphFormatError(f"{path}:{line_no}: expected {len(names)} comma-separated fields "
                               f"({','.join(names)}), got {len(parts)}: {line.strip()!r}")
    return parts


def _parse(path, line_no, name, value, kind, lo: float = -math.inf, hi: float = math.inf,
           quantity: str = ""):
    """`kind(value)`, finite and in [lo, hi], or in range under the shared rule `quantity`
    (a key of `QUANTITIES`) when given."""
    try:
        out = kind(value)
    except ValueError:
        raise GraphFormatError(f"{path}:{line_no}: field '{name}' is not {kind.__name__}: "
                               f"{value!r}") from None
    problem = (quantity_problem(out, quantity) if quantity else
               None if math.isfinite(out) and lo <= out <= hi else
               f"must be a finite number in [{lo}, {hi}], got {value.strip()!r}")
    if problem:
        raise GraphFormatError(f"{path}:{line_no}: field '{name}' {problem}")
    return out


def _rows(path: str) -> Iterator[tuple[int, str]]:
    """`read_lines` of a graph file; a blank line between rows is an error naming it."""
    last = 0
    for i, line in read_lines(path, GraphFormatError):
        if i != last + 1:
            raise GraphFormatError(f"{path}:{last + 1}: a blank line between rows")
        last = i
        yield i, line


def read_node_rows(path: str) -> tuple[list[NodeRow], dict[str, int]]:
    """(rows, {panoid: line}) of `nodes.txt`; a repeated panoid or an empty file is an error."""
    nodes: list[NodeRow] = []
    seen: dict[str, int] = {}
    for i, line in _rows(path):
        pid, yaw, lat, lng = _fields(path, i, line, ("panoid", "pano_yaw_angle", "lat", "lng"))
        if pid in seen:
            raise GraphFormatError(f"{path}:{i}: field 'panoid': {pid!r} repeats line {seen[pid]}")
        seen[pid] = i
        nodes.append((pid, _parse(path, i, "pano_yaw_angle", yaw, float, quantity="degrees"),
                      _parse(path, i, "lat", lat, float, -90, 90),
                      _parse(path, i, "lng", lng, float, -180, 180)))
    if not nodes:
        raise GraphFormatError(f"{path}: no rows (an empty or blank file). {SOURCE_HINT}")
    return nodes, seen


def _known(path: str, line_no: int, name: str, pid: str, nodes: Mapping[str, int] | None,
           nodes_path: str) -> None:
    if nodes is not None and pid not in nodes:
        raise GraphFormatError(f"{path}:{line_no}: field '{name}': unknown panoid {pid!r} (not "
                               f"in {nodes_path})")


def read_link_rows(path: str, nodes: Mapping[str, int] | None, nodes_path: str = ""
                   ) -> list[LinkRow]:
    """The rows of `links.txt`: each end a panoid of `nodes` (any, when None), no link from a
    panorama to itself, none repeated; an empty file is an error."""
    links: list[LinkRow] = []
    seen: dict[tuple[str, str], int] = {}
    for i, line in _rows(path):
        a, h, b = _fields(path, i, line, ("start_panoid", "heading", "end_panoid"))
        _known(path, i, "start_panoid", a, nodes, nodes_path)
        heading = _parse(path, i, "heading", h, int, quantity="degrees")
        _known(path, i, "end_panoid", b, nodes, nodes_path)
        if a == b:
            raise GraphFormatError(f"{path}:{i}: field 'end_panoid': a self-link ({a!r} to "
                                   f"itself)")
        if (a, b) in seen:
            raise GraphFormatError(f"{path}:{i}: field 'end_panoid': the link {a!r} -> {b!r} "
                                   f"repeats line {seen[a, b]}")
        seen[a, b] = i
        links.append((a, heading, b))
    if not links:
        raise GraphFormatError(f"{path}: no rows (an empty or blank file). {SOURCE_HINT}")
    return links


def read_graph_files(graph_dir: str) -> tuple[list[NodeRow], list[LinkRow]]:
    """Parses `graph_dir/nodes.txt` and `graph_dir/links.txt` (raises naming missing files)."""
    files = [paths.join(graph_dir, f) for f in GRAPH_FILES]
    missing = [p for p in files if not paths.exists(p)]
    if missing:
        raise FileNotFoundError(f"Touchdown graph files missing: {', '.join(missing)}. "
                                f"{SOURCE_HINT}")
    nodes, seen = read_node_rows(files[0])
    return nodes, read_link_rows(files[1], seen, files[0])


def compile_touchdown(nodes: Sequence[NodeRow], links: Sequence[LinkRow],
                      where: str = "links") -> tuple[PanoGraph, NodeTable]:
    """Compiles parsed rows into a host `PanoGraph` (integer headings) and its `NodeTable`."""
    table = NodeTable.from_ids([n[0] for n in nodes])
    if len(table.index) != len(nodes):
        raise GraphFormatError(f"{where}: duplicate panoids in nodes")
    src = table.lookup([l[0] for l in links], "start_panoid")
    dst = table.lookup([l[2] for l in links], "end_panoid")
    heading = np.asarray([l[1] % 360 for l in links], np.int32)
    lat = np.asarray([n[2] for n in nodes], np.float64)
    lng = np.asarray([n[3] for n in nodes], np.float64)
    lat0 = math.radians(float(lat.mean())) if len(lat) else 0.0
    x = np.radians(lng - (lng.mean() if len(lng) else 0.0)) * math.cos(lat0) * EARTH_RADIUS_M
    y = np.radians(lat - (lat.mean() if len(lat) else 0.0)) * EARTH_RADIUS_M
    pos = np.stack([x, y, np.zeros_like(x)], -1)
    length = np.linalg.norm(pos[dst] - pos[src], axis=-1)
    graph = build_graph(len(nodes), src, dst, heading, length, pos,
                        yaw=np.asarray([n[1] for n in nodes], np.float32))
    return graph, table


def load_touchdown_graph(graph_dir: str) -> tuple[PanoGraph, NodeTable]:
    """The real graph from `graph_dir` (containing nodes.txt and links.txt)."""
    nodes, links = read_graph_files(graph_dir)
    return compile_touchdown(nodes, links, where=os.path.join(graph_dir, "links.txt"))


def _panoid(rng: np.random.Generator) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    return "".join(alphabet[i] for i in rng.integers(0, 64, 22))


def synthetic_street_grid(num_avenues: int = 6, num_streets: int = 10, panos_per_block: int = 6,
                          spacing_m: float = 10.0, rotation_deg: float = 29.0,
                          seed: int = 0) -> tuple[list[NodeRow], list[LinkRow]]:
    """A Manhattan-like grid in the Touchdown file formats: (nodes rows, links rows).

    Intersections sit on a `num_avenues x num_streets` grid rotated by `rotation_deg`; each block
    has `panos_per_block - 1` panoramas between intersections, and each boundary intersection a
    one-panorama dead end, so most panoramas have 2 out-edges, intersections 4 and ends 1 (the
    real graph's pattern). Reverse links are exactly 180 degrees apart.
    """
    rng = np.random.default_rng(seed)
    grid: dict[tuple[int, int], int] = {}
    pos: list[tuple[float, float]] = []

    def node(gx: float, gy: float) -> int:
        key = (round(gx * panos_per_block), round(gy * panos_per_block))
        if key not in grid:
            grid[key] = len(pos)
            jitter = rng.normal(0, 0.6, 2)
            pos.append((gx * panos_per_block * spacing_m + jitter[0],
                        gy * panos_per_block * spacing_m + jitter[1]))
        return grid[key]

    edges: list[tuple[int, int]] = []
    def street(points):
        for a, b in zip(points[:-1], points[1:]):
            edges.append((a, b))

    p = panos_per_block
    for ax in range(num_avenues):   # avenues run north-south
        ys = [-1 / p] + [j / p for j in range((num_streets - 1) * p + 1)] + [num_streets - 1 + 1 / p]
        street([node(ax, y) for y in ys])
    for sy in range(num_streets):   # streets run east-west
        xs = [-1 / p] + [i / p for i in range((num_avenues - 1) * p + 1)] + [num_avenues - 1 + 1 / p]
        street([node(x, sy) for x in xs])

    rot = math.radians(rotation_deg)
    xy = np.asarray(pos)
    xy = np.stack([xy[:, 0] * math.cos(rot) + xy[:, 1] * math.sin(rot),
                   -xy[:, 0] * math.sin(rot) + xy[:, 1] * math.cos(rot)], -1)
    ids = [_panoid(rng) for _ in range(len(pos))]
    lat0, lng0 = 40.7500, -73.9900
    lat = lat0 + np.degrees(xy[:, 1] / EARTH_RADIUS_M)
    lng = lng0 + np.degrees(xy[:, 0] / (EARTH_RADIUS_M * math.cos(math.radians(lat0))))
    links: list[LinkRow] = []
    yaw = np.zeros(len(pos))
    for a, b in edges:
        d = xy[b] - xy[a]
        h = int(round(math.degrees(math.atan2(d[0], d[1])))) % 360
        links += [(ids[a], h, ids[b]), (ids[b], (h + 180) % 360, ids[a])]
        yaw[a] = yaw[b] = h
    order = rng.permutation(len(links))   # file order is arbitrary in the real data too
    links = [links[i] for i in order]
    yaw = (yaw + rng.integers(-10, 11, len(pos))) % 360
    nodes = [(ids[i], int(yaw[i]), float(lat[i]), float(lng[i])) for i in range(len(pos))]
    return nodes, links


def write_graph_files(graph_dir: str, nodes: Sequence[NodeRow], links: Sequence[LinkRow]) -> None:
    """Writes rows in the original `nodes.txt` / `links.txt` formats."""
    os.makedirs(graph_dir, exist_ok=True)
    with open(os.path.join(graph_dir, "nodes.txt"), "w") as f:
        f.writelines(f"{p},{y},{lat:.6f},{lng:.6f}\n" for p, y, lat, lng in nodes)
    with open(os.path.join(graph_dir, "links.txt"), "w") as f:
        f.writelines(f"{a},{h},{b}\n" for a, h, b in links)
