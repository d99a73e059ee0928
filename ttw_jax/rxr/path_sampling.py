"""RxR-style two-level path sampling on Matterport3D graphs (Ku et al. 2020, "Room-Across-Room",
section 3): paths are drawn as sequences of rooms first, then as viewpoint paths through them.

Pipeline, per environment (scan):

1. Regions. Each viewpoint belongs to a region: the Matterport3D room annotations
   (`read_panorama_regions`) or, without them, a synthetic partition (`synthetic_regions`).
2. Rooms (`room_graph`). A room is a connected component of the subgraph induced by one region's
   viewpoints, so a region whose viewpoints fall apart in the navigation graph gives several rooms.
   Two rooms are adjacent when an edge joins them (their union is connected). The room graph is
   undirected (Matterport edges are symmetric; an edge in either direction makes two rooms adjacent).
3. Room paths (`room_paths`). Simple paths in the room graph with 1 to `max_rooms` rooms (5 in
   RxR), enumerated by depth-first search from every room (neighbours in increasing order). To
   bound the work, at most `ceil(max_room_paths / #rooms)` paths are kept per start room, so every
   start room is represented when the cap bites.
4. Candidate viewpoint paths (`constrained_shortest_path`). For a room path r_0..r_{k-1}, the
   shortest path (edge weight = edge length in metres) from a start viewpoint in r_0 to an end
   viewpoint in r_{k-1} that moves only through viewpoints of the path's rooms, and only from room
   r_i to r_i or r_{i+1}: a shortest path on the layered graph whose layer i holds the viewpoints of
   r_i (a simple room path puts each viewpoint in at most one layer, so the layered graph is a
   subgraph of the navigation graph with the backward and skipping edges removed). It therefore
   visits the rooms exactly in the room path's order, each once, as a contiguous stretch.
   RxR takes all start/end pairs; to stay fast we draw `candidates_per_env` room paths at random
   (without replacement while there are enough, then again with fresh start/end draws) and for
   each one random start viewpoint; the end is the first viewpoint of the last room, in random
   order, whose constrained shortest path has `min_steps` to `max_steps` edges and length at most
   `max_length` (Dijkstra is cut off at `max_length`; at most `end_tries` ends are tried).
   Identical viewpoint sequences are kept once.
5. Greedy selection. Starting from an empty set, repeatedly add the candidate p = (p_1..p_m)
   that MINIMISES

       d(p_1, p_m) / L(p) + mean_{v in p} coverage(v),

   d = geodesic (unconstrained shortest-path) distance from start to end in the scan, L = length of
   p, coverage(v) = number of already selected paths that visit v. Minimising is the paper's
   intent: d / L is 1 for a shortest path and smaller for a path that wanders through rooms, so
   the first term prefers paths that are NOT shortest-path-like (an agent cannot succeed by
   heading straight for the goal), and the second prefers paths over viewpoints that few selected
   paths cover yet (the paths spread over the environment). Ties go to the earlier candidate.
   Selection stops after `per_env` paths or when candidates run out.

Everything is deterministic given `seed` (one `numpy` generator per scan, seeded with
`[seed, scan index]`), and shortest paths / components use `scipy.sparse.csgraph`.
"""
from __future__ import annotations

import math
import os
from typing import Sequence

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

from ttw_jax.core.pano_graph import NodeTable, PanoGraph, adjacency
from ttw_jax.core.records import RecordFormatError, read_lines

REGION_FILE = os.path.join("house_segmentations", "panorama_to_region.txt")
REGION_HINT = (
    "Region annotations come with Matterport3D (request access at niessner.github.io/Matterport, "
    "then `python download_mp.py -o <dir> --type house_segmentations` and unzip, so that "
    "<house_dir>/<scan>/house_segmentations/panorama_to_region.txt exists; <house_dir> is usually "
    "<dir>/v1/scans). Without them use `synthetic_regions`.")
_REGION_FIELDS = ("panorama_index", "viewpoint_id", "region_index", "region_label")


class RegionFormatError(RecordFormatError):
    """A `panorama_to_region.txt` file exists but does not follow the documented format."""


# --------------------------------------------------------------------------------------------
# Regions
# --------------------------------------------------------------------------------------------

def read_region_file(path: str) -> dict[str, tuple[int, str]]:
    """Reads one Matterport3D `house_segmentations/panorama_to_region.txt`.

    Format (one panorama per line, whitespace separated, blank lines ignored):
    `<panorama_index> <viewpoint_id> <region_index> <region_label>`, e.g.
    `12 0a7e1b8f... 3 k`: panorama_index and region_index are integers (region_index as in the
    scan's `.house` file; a negative index means "no region"), viewpoint_id is the skybox prefix
    used as `image_id` in the connectivity files, region_label is Matterport's one-character room
    category code (`k` kitchen, `b` bathroom, `-` none, ...), kept as a string.

    Returns {viewpoint_id: (region_index, region_label)}. A viewpoint listed twice with different
    regions is an error; errors name the file, the line and the field.
    """
    out: dict[str, tuple[int, str]] = {}
    for lineno, line in read_lines(path, RegionFormatError, REGION_HINT):
        fields = line.split()
        if len(fields) != len(_REGION_FIELDS):
            raise RegionFormatError(
                f"{path}: line {lineno}: expected {len(_REGION_FIELDS)} fields "
                f"({' '.join(_REGION_FIELDS)}), got {len(fields)}: {line.strip()!r}")
        for k in (0, 2):
            try:
                int(fields[k])
            except ValueError:
                raise RegionFormatError(
                    f"{path}: line {lineno}: field '{_REGION_FIELDS[k]}' must be an integer, "
                    f"got {fields[k]!r}") from None
        vp, region, label = fields[1], int(fields[2]), fields[3]
        if vp in out and out[vp][0] != region:
            raise RegionFormatError(
                f"{path}: line {lineno}: field 'viewpoint_id': {vp} already listed with "
                f"region {out[vp][0]}, now {region}")
        out[vp] = (region, label)
    return out


def read_panorama_regions(house_dir: str, nodes: NodeTable,
                          scans: Sequence[str] | None = None) -> np.ndarray:
    """Region id [N] int32 of every node of `nodes` (ids `"<scan>/<viewpoint>"`), from
    `<house_dir>/<scan>/house_segmentations/panorama_to_region.txt` of each scan.

    `scans` defaults to the scans of the node ids, in order of first appearance; every node's scan
    must be among them. Region ids are globally unique: the annotated regions get 0..R-1 in order
    of (position of the scan in `scans`, region_index); then every viewpoint that the file does not
    list, or lists with a negative region index, gets its own singleton region R, R+1, ... in node
    order (it is a room of its own, which `room_graph` links to its neighbours' rooms).
    """
    parts = [i.partition("/") for i in nodes.ids]
    for i, (scan, sep, vp) in enumerate(parts):
        if not sep or not vp:
            raise ValueError(f"node id {nodes.ids[i]!r} is not '<scan>/<viewpoint>'")
    if scans is None:
        scans = list(dict.fromkeys(p[0] for p in parts))
    scans = list(scans)
    known = set(scans)
    for i, (scan, _, _) in enumerate(parts):
        if scan not in known:
            raise ValueError(f"node {nodes.ids[i]!r}: scan {scan!r} is not in `scans`")
    annotated = {}
    global_of: dict[tuple[int, int], int] = {}
    for s, scan in enumerate(scans):
        table = read_region_file(os.path.join(house_dir, scan, REGION_FILE))
        annotated[scan] = table
        for r in sorted({r for r, _ in table.values() if r >= 0}):
            global_of[(s, r)] = len(global_of)
    scan_pos = {scan: s for s, scan in enumerate(scans)}
    out = np.empty(len(parts), np.int32)
    next_id = len(global_of)
    for i, (scan, _, vp) in enumerate(parts):
        entry = annotated[scan].get(vp)
        if entry is not None and entry[0] >= 0:
            out[i] = global_of[(scan_pos[scan], entry[0])]
        else:
            out[i] = next_id
            next_id += 1
    return out


def _scan_members(scan_of: np.ndarray) -> list[tuple[int, np.ndarray]]:
    scan_of = np.asarray(scan_of)
    return [(int(s), np.nonzero(scan_of == s)[0]) for s in np.unique(scan_of)]


def _sub_coo(adj: sparse.csr_matrix, idx: np.ndarray):
    sub = adj[idx][:, idx].tocoo()
    return sub.row.astype(np.int64), sub.col.astype(np.int64), sub.data


def floors(z: np.ndarray, floor_gap: float = 1.0) -> np.ndarray:
    """Floor index [n] of heights `z`: sorted heights split wherever two consecutive ones differ
    by more than `floor_gap` metres (staircase viewpoints in between can join two floors)."""
    z = np.asarray(z, np.float64)
    order = np.argsort(z, kind="stable")
    step = np.concatenate([[0], (np.diff(z[order]) > floor_gap).astype(np.int64)])
    out = np.empty(len(z), np.int64)
    out[order] = np.cumsum(step)
    return out


def synthetic_regions(graph: PanoGraph, scan_of: np.ndarray, nodes_per_region: int = 6,
                      seed: int = 0, floor_gap: float = 1.0) -> np.ndarray:
    """A synthetic region partition [N] int32 for graphs without room annotations.

    Per scan, viewpoints are split into floors by gaps of more than `floor_gap` metres in height
    (`floors`). Each connected component (undirected) of a floor's subgraph (edges within the floor
    only) with n viewpoints gets k = max(1, round(n / nodes_per_region)) seeds drawn uniformly
    without replacement, and every viewpoint joins the region of its geodesically nearest seed
    (edge lengths, within the floor; one multi-source Dijkstra, so ties follow the shortest-path
    tree). A region is then graph-connected: the shortest-path tree of a cell stays in the cell.
    Region ids are consecutive, scan by scan, floor by floor, component by component; the result
    is deterministic given `seed` (generator seeded with `[seed, scan index]`).
    """
    if nodes_per_region < 1:
        raise ValueError(f"nodes_per_region must be >= 1, got {nodes_per_region}")
    adj = adjacency(graph, weighted=True)
    z = np.asarray(graph.positions)[:, 2]
    out = np.full(graph.num_nodes, -1, np.int32)
    next_id = 0
    for s, idx in _scan_members(scan_of):
        rng = np.random.default_rng([seed, s])
        n = len(idx)
        floor = floors(z[idx], floor_gap)
        rows, cols, w = _sub_coo(adj, idx)
        keep = floor[rows] == floor[cols]
        sub = sparse.csr_matrix((w[keep], (rows[keep], cols[keep])), shape=(n, n))
        ncomp, comp = csgraph.connected_components(sub, directed=True, connection="weak")
        # Components in order of (floor, lowest member), so ids grow floor by floor.
        first = np.full(ncomp, n, np.int64)
        np.minimum.at(first, comp, np.arange(n))
        comp_order = sorted(range(ncomp), key=lambda c: (floor[first[c]], first[c]))
        seeds = []
        for c in comp_order:
            members = np.nonzero(comp == c)[0]
            k = max(1, int(round(len(members) / nodes_per_region)))
            seeds.extend(np.sort(rng.choice(members, size=k, replace=False)).tolist())
        seeds = np.asarray(seeds, np.int64)
        _, _, sources = csgraph.dijkstra(sub, directed=False, indices=seeds, min_only=True,
                                         return_predecessors=True)
        region_of_seed = np.full(n, -1, np.int64)
        region_of_seed[seeds] = next_id + np.arange(len(seeds))
        out[idx] = region_of_seed[sources]
        next_id += len(seeds)
    return out


# --------------------------------------------------------------------------------------------
# Rooms
# --------------------------------------------------------------------------------------------

def room_graph(graph: PanoGraph, regions: np.ndarray) -> tuple[np.ndarray, list[set[int]]]:
    """(room_of [N] int32, adjacency): rooms are the connected components (edges in either
    direction) of each region's induced subgraph, numbered by their lowest node; `adjacency[a]` is
    the set of rooms joined to room a by an edge (symmetric, never containing a)."""
    regions = np.asarray(regions)
    if regions.shape != (graph.num_nodes,):
        raise ValueError(f"regions has shape {regions.shape}, expected ({graph.num_nodes},)")
    adj = adjacency(graph, weighted=False).tocoo()
    rows, cols = adj.row, adj.col
    same = regions[rows] == regions[cols]
    n = graph.num_nodes
    intra = sparse.csr_matrix((np.ones(int(same.sum())), (rows[same], cols[same])), shape=(n, n))
    num_rooms, room_of = csgraph.connected_components(intra, directed=True, connection="weak")
    room_of = room_of.astype(np.int32)
    rooms: list[set[int]] = [set() for _ in range(num_rooms)]
    ra, rb = room_of[rows], room_of[cols]
    cross = ra != rb
    for a, b in zip(ra[cross].tolist(), rb[cross].tolist()):
        rooms[a].add(b)
        rooms[b].add(a)
    return room_of, rooms


def room_paths(adjacency: Sequence[set[int]], rooms: Sequence[int], max_rooms: int = 5,
               max_room_paths: int | None = None) -> list[tuple[int, ...]]:
    """Simple paths (1 to `max_rooms` rooms) in the room graph starting from each of `rooms`, by
    depth-first search with neighbours in increasing order; with `max_room_paths`, at most
    ceil(max_room_paths / len(rooms)) paths per start room (the first ones in DFS order)."""
    rooms = sorted(rooms)
    per_start = (math.ceil(max_room_paths / max(len(rooms), 1)) if max_room_paths is not None
                 else None)
    out: list[tuple[int, ...]] = []
    nbrs = {r: sorted(adjacency[r]) for r in rooms}
    for start in rooms:
        count = 0
        stack = [(start,)]
        while stack and (per_start is None or count < per_start):
            path = stack.pop()
            out.append(path)
            count += 1
            if len(path) < max_rooms:
                on_path = set(path)
                # Reversed so that the smallest neighbour is popped (explored) first.
                last = path[-1]
                for r in reversed(nbrs[last] if last in nbrs else sorted(adjacency[last])):
                    if r not in on_path:
                        stack.append(path + (r,))
    return out


def _layered(rows, cols, w, n, layer):
    lr, lc = layer[rows], layer[cols]
    keep = (lr >= 0) & (lc >= 0) & ((lc == lr) | (lc == lr + 1))
    return sparse.csr_matrix((w[keep], (rows[keep], cols[keep])), shape=(n, n))


def _walk_back(pred: np.ndarray, end: int) -> list[int]:
    path = [end]
    while pred[path[-1]] >= 0:
        path.append(int(pred[path[-1]]))
    return path[::-1]


def constrained_shortest_path(graph: PanoGraph, room_of: np.ndarray, rooms: Sequence[int],
                              start: int, end: int) -> tuple[list[int], float] | None:
    """(node path, length in metres) of the shortest path from `start` (in rooms[0]) to `end` (in
    rooms[-1]) that only visits viewpoints of `rooms` (a simple room path) and only moves from
    room i to room i or i+1; None if there is none."""
    room_of = np.asarray(room_of)
    if room_of[start] != rooms[0] or room_of[end] != rooms[-1]:
        raise ValueError("start must lie in the first room and end in the last room")
    layer_of_room = {r: i for i, r in enumerate(rooms)}
    if len(layer_of_room) != len(rooms):
        raise ValueError(f"room path {tuple(rooms)} repeats a room")
    layer = np.asarray([layer_of_room.get(int(r), -1) for r in room_of], np.int64)
    adj = adjacency(graph, weighted=True).tocoo()
    m = _layered(adj.row, adj.col, adj.data, graph.num_nodes, layer)
    dist, pred = csgraph.dijkstra(m, directed=True, indices=start, return_predecessors=True)
    if not np.isfinite(dist[end]):
        return None
    return _walk_back(pred, end), float(dist[end])


# --------------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------------

def _scan_candidates(rows, cols, w, n, room_local, adj_rooms, rng, *, max_rooms, max_length,
                     min_steps, max_steps, candidates, max_room_paths, end_tries,
                     batch=256):
    """Candidate paths (local node tuples, lengths) of one scan.

    The layered graphs of a batch of room paths are stacked as disjoint copies of the scan (copy b
    holds nodes b*n .. b*n+n-1) so that one multi-source Dijkstra (`min_only`) gives every copy its
    distances from its own start viewpoint."""
    rooms = sorted(set(room_local.tolist()))
    rpaths = room_paths(adj_rooms, rooms, max_rooms, max_room_paths)
    if not rpaths:
        return [], []
    dense = {r: i for i, r in enumerate(rooms)}
    room_idx = np.asarray([dense[r] for r in room_local.tolist()], np.int64)
    members = [np.nonzero(room_idx == i)[0] for i in range(len(rooms))]
    picks: list[int] = []
    while len(picks) < candidates:
        take = min(candidates - len(picks), len(rpaths))
        picks.extend(rng.choice(len(rpaths), size=take, replace=False).tolist())
    seen, paths, lengths = set(), [], []
    for lo in range(0, len(picks), batch):
        chunk = [[dense[r] for r in rpaths[k]] for k in picks[lo:lo + batch]]
        nb = len(chunk)
        layer_of_room = np.full((nb, len(rooms)), -1, np.int64)
        for b, rp in enumerate(chunk):
            layer_of_room[b, rp] = np.arange(len(rp))
        layer = layer_of_room[:, room_idx]                              # [B, n]
        lr, lc = layer[:, rows], layer[:, cols]                         # [B, E]
        bb, ee = np.nonzero((lr >= 0) & (lc >= 0) & ((lc == lr) | (lc == lr + 1)))
        big = sparse.csr_matrix((w[ee], (rows[ee] + bb * n, cols[ee] + bb * n)),
                                shape=(nb * n, nb * n))
        u = rng.random(nb)
        starts = np.asarray([members[rp[0]][int(u[b] * len(members[rp[0]]))]
                             for b, rp in enumerate(chunk)], np.int64)
        dist, pred, _ = csgraph.dijkstra(big, directed=True, indices=starts + np.arange(nb) * n,
                                         min_only=True, return_predecessors=True,
                                         limit=max_length)
        for b, rp in enumerate(chunk):
            off = b * n
            ends = members[rp[-1]]
            ends = ends[np.isfinite(dist[off + ends]) & (ends != starts[b])]
            for end in rng.permutation(ends)[:end_tries].tolist():
                path = [p - off for p in _walk_back(pred, off + end)]
                steps = len(path) - 1
                if steps < min_steps or (max_steps is not None and steps > max_steps):
                    continue
                key = tuple(path)
                if key not in seen:
                    seen.add(key)
                    paths.append(key)
                    lengths.append(float(dist[off + end]))
                break
    return paths, lengths


def greedy_select(paths: Sequence[Sequence[int]], lengths: Sequence[float],
                  geodesic: Sequence[float], num_nodes: int, k: int) -> list[int]:
    """Indices of up to `k` paths chosen greedily, each time the one minimising
    `geodesic / length + mean coverage of its nodes` (coverage = times a node is on an already
    chosen path; nodes are indices < num_nodes). Ties go to the lower index."""
    c = len(paths)
    if c == 0 or k <= 0:
        return []
    ratio = np.asarray(geodesic, np.float64) / np.asarray(lengths, np.float64)
    size = np.asarray([len(p) for p in paths], np.float64)
    pad = np.full((c, int(size.max())), num_nodes, np.int64)
    for i, p in enumerate(paths):
        pad[i, :len(p)] = p
    cover = np.zeros(num_nodes + 1)
    alive = np.ones(c, bool)
    chosen = []
    for _ in range(min(k, c)):
        score = ratio + cover[pad].sum(1) / size
        score[~alive] = np.inf
        best = int(np.argmin(score))
        chosen.append(best)
        alive[best] = False
        cover[np.asarray(paths[best])] += 1
    return chosen


def sample_paths(graph: PanoGraph, scan_of: np.ndarray, regions: np.ndarray, *,
                 max_rooms: int = 5, max_length: float = 40.0, min_steps: int = 2,
                 max_steps: int | None = None, per_env: int = 100,
                 candidates_per_env: int = 1000, max_room_paths: int = 20_000,
                 end_tries: int = 4, scans: Sequence[int] | None = None,
                 seed: int = 0) -> list[tuple[int, list[int]]]:
    """RxR two-level path sampling (see the module docstring) in every scan of `scan_of` (or the
    scan indices `scans`): returns [(scan index, node indices)], scan by scan in increasing scan
    index, each scan's paths in selection order. Each path is a simple walk along graph edges
    through a simple room path of at most `max_rooms` rooms, with `min_steps` to `max_steps` edges
    and length <= `max_length` metres; no path repeats within a scan."""
    scan_of = np.asarray(scan_of)
    room_of, adj_rooms = room_graph(graph, regions)
    adj = adjacency(graph, weighted=True)
    wanted = None if scans is None else {int(s) for s in scans}
    out: list[tuple[int, list[int]]] = []
    for s, idx in _scan_members(scan_of):
        if wanted is not None and s not in wanted:
            continue
        rng = np.random.default_rng([seed, s])
        n = len(idx)
        rows, cols, w = _sub_coo(adj, idx)
        paths, lengths = _scan_candidates(
            rows, cols, w, n, room_of[idx], adj_rooms, rng, max_rooms=max_rooms,
            max_length=max_length, min_steps=min_steps, max_steps=max_steps,
            candidates=candidates_per_env, max_room_paths=max_room_paths, end_tries=end_tries)
        if not paths:
            continue
        starts = sorted({p[0] for p in paths})
        sub = sparse.csr_matrix((w, (rows, cols)), shape=(n, n))
        geo = csgraph.dijkstra(sub, directed=True, indices=starts)
        row_of = {a: i for i, a in enumerate(starts)}
        d = [geo[row_of[p[0]], p[-1]] for p in paths]
        for k in greedy_select(paths, lengths, d, n, per_env):
            out.append((s, idx[list(paths[k])].tolist()))
    return out


def scan_geodesics(graph: PanoGraph, scan_of: np.ndarray, pairs: Sequence[tuple[int, int]]
                   ) -> np.ndarray:
    """Geodesic distances [P] float64 (metres) between node pairs of the same scan."""
    scan_of = np.asarray(scan_of)
    adj = adjacency(graph, weighted=True)
    out = np.full(len(pairs), np.inf)
    by_scan: dict[int, list[int]] = {}
    for i, (a, _) in enumerate(pairs):
        by_scan.setdefault(int(scan_of[a]), []).append(i)
    for s, items in by_scan.items():
        idx = np.nonzero(scan_of == s)[0]
        local = np.full(graph.num_nodes, -1, np.int64)
        local[idx] = np.arange(len(idx))
        sources = sorted({int(local[pairs[i][0]]) for i in items})
        row = {a: j for j, a in enumerate(sources)}
        dist = csgraph.dijkstra(adj[idx][:, idx], directed=True, indices=sources)
        for i in items:
            a, b = pairs[i]
            if local[b] >= 0:
                out[i] = dist[row[int(local[a])], local[b]]
    return out
