"""Matterport3D navigation graphs (R2R / RxR) from the `<scan>_connectivity.json` files.

All requested scans compile into one `PanoGraph` (edges never cross scans) with float headings in
radians, clockwise from +y, and elevations, both computed from the pose translations. Node ids are
`"<scan>/<viewpoint>"`. Geodesic distances are exact all-pairs Dijkstra *within* each scan (scans
have at most a few hundred viewpoints), stored as a padded [S, M, M] table and gathered on device.
"""
from __future__ import annotations

import math
import os
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from scipy.sparse import csgraph

from ttw_jax.core import paths
from ttw_jax.core.pano_graph import NodeTable, PanoGraph, adjacency, build_graph
from ttw_jax.core.records import (QUANTITIES, RecordFormatError, is_nonempty_string, list_of,
                                  quantity_problem, read_json_list, shown)

SOURCE_HINT = ("Matterport3D connectivity graphs are in the Matterport3DSimulator repository "
               "(github.com/peteanderson80/Matterport3DSimulator, `connectivity/`); see BUILD.md.")


class ConnectivityFormatError(RecordFormatError):
    """A connectivity file exists but does not follow the documented format."""


def node_id(scan: str, viewpoint: str) -> str:
    return f"{scan}/{viewpoint}"


def read_connectivity(path: str) -> list[dict]:
    """The list of viewpoint annotations of one scan, validated (errors name file, entry, field):
    at least one viewpoint, each an object with `image_id` a unique non-empty string, `pose` 16
    numbers (a row-major 4x4 matrix; coordinates under the shared rule, `QUANTITIES`),
    `included` a bool, `unobstructed` (and `visible`, where present) one bool per viewpoint of
    the file, `height` (where present) a height in metres (a distance under the shared rule)."""
    data = read_json_list(path, "viewpoints", ConnectivityFormatError,
                          f"(a Matterport connectivity file) {SOURCE_HINT}")
    if not data:
        raise ConnectivityFormatError(f"{path}: no viewpoint (an empty list)")
    bools = (list_of(lambda v: isinstance(v, bool), len(data), len(data)),
             f"{len(data)} booleans (one per viewpoint of the file)")
    checks = {"image_id": (is_nonempty_string, "a non-empty string"),
              "pose": (list_of(lambda v: not quantity_problem(v, "coordinate"), 16, 16),
                       "16 finite numbers (a row-major 4x4 matrix, each within +-1e7)"),
              "included": (lambda v: isinstance(v, bool), "true or false"),
              "unobstructed": bools, "visible": bools,
              "height": (lambda v: not quantity_problem(v, "distance"),
                         QUANTITIES["distance"][2])}
    optional = ("visible", "height")
    seen = {}
    for i, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise ConnectivityFormatError(f"{path}: viewpoint {i}: expected a JSON object, got "
                                          f"{type(entry).__name__}")
        for field, (check, expected) in checks.items():
            if field not in entry:
                if field in optional:
                    continue
                raise ConnectivityFormatError(f"{path}: viewpoint {i}: missing field '{field}'")
            if not check(entry[field]):
                raise ConnectivityFormatError(f"{path}: viewpoint {i}: field '{field}': expected "
                                              f"{expected}, got {shown(entry[field])}")
        if entry["unobstructed"][i]:
            raise ConnectivityFormatError(f"{path}: viewpoint {i}: field 'unobstructed': the "
                                          "viewpoint is linked to itself (a self-link)")
        if entry["image_id"] in seen:
            raise ConnectivityFormatError(f"{path}: viewpoint {i}: field 'image_id': "
                                          f"{entry['image_id']!r} is also viewpoint "
                                          f"{seen[entry['image_id']]}")
        seen[entry["image_id"]] = i
    return data


def list_scans(connectivity_dir: str) -> list[str]:
    """Scan ids with a connectivity file, sorted."""
    if not paths.isdir(connectivity_dir):
        raise FileNotFoundError(f"Matterport connectivity directory missing: {connectivity_dir}. "
                                f"{SOURCE_HINT}")
    suffix = "_connectivity.json"
    return sorted(f[:-len(suffix)] for f in paths.listdir(connectivity_dir) if f.endswith(suffix))


def edge_angles(delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(heading in [0, 2pi) clockwise from +y, elevation) of displacement vectors [..., 3]."""
    heading = np.mod(np.arctan2(delta[..., 0], delta[..., 1]), 2 * math.pi)
    elevation = np.arctan2(delta[..., 2], np.hypot(delta[..., 0], delta[..., 1]))
    return heading, elevation


def load_matterport_graph(connectivity_dir: str, scans: Sequence[str] | None = None
                          ) -> tuple[PanoGraph, NodeTable, np.ndarray]:
    """Compiles the `included` viewpoints of `scans` (default: all) and their `unobstructed` edges.

    Returns (graph, node table, scan index per node [N] int32, in the order of `scans`).
    """
    scans = list_scans(connectivity_dir) if scans is None else list(scans)
    ids, pos, scan_of, src, dst = [], [], [], [], []
    for s, scan in enumerate(scans):
        data = read_connectivity(os.path.join(connectivity_dir, f"{scan}_connectivity.json"))
        local = {}
        for i, entry in enumerate(data):
            if entry["included"]:
                local[i] = len(ids)
                ids.append(node_id(scan, entry["image_id"]))
                p = entry["pose"]
                pos.append((p[3], p[7], p[11]))
                scan_of.append(s)
        for i, entry in enumerate(data):
            if i not in local:
                continue
            for j, ok in enumerate(entry["unobstructed"]):
                if ok and j in local and j != i:
                    src.append(local[i])
                    dst.append(local[j])
    pos = np.asarray(pos, np.float64).reshape(-1, 3)
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    delta = pos[dst] - pos[src]
    heading, elevation = edge_angles(delta)
    graph = build_graph(len(ids), src, dst, heading, np.linalg.norm(delta, axis=-1), pos,
                        elevations=elevation)
    return graph, NodeTable.from_ids(ids), np.asarray(scan_of, np.int32)


@struct.dataclass
class GeodesicTable:
    """Within-scan shortest-path lengths: `table[scan[a], local[a], local[b]]` (metres).

    table: [S, M, M] float32 (inf between unreachable viewpoints and in padding).
    scan: [N] int32 scan of each node; local: [N] int32 index within its scan.
    """
    table: jax.Array
    scan: jax.Array
    local: jax.Array

    def __call__(self, a, b):
        """Geodesic distance between nodes `a` and `b` (same scan), broadcasting; jittable."""
        a = jnp.maximum(a, 0)
        b = jnp.maximum(b, 0)
        return self.table[self.scan[a], self.local[a], self.local[b]]

    def np(self, a, b) -> np.ndarray:
        table, scan, local = (np.asarray(x) for x in (self.table, self.scan, self.local))
        return table[scan[a], local[a], local[b]]


def geodesic_table(graph: PanoGraph, scan_of: np.ndarray) -> GeodesicTable:
    """All-pairs Dijkstra within each scan (host, scipy), packed into a `GeodesicTable`."""
    scan_of = np.asarray(scan_of)
    num_scans = int(scan_of.max()) + 1 if len(scan_of) else 0
    members = [np.nonzero(scan_of == s)[0] for s in range(num_scans)]
    m = max((len(x) for x in members), default=1)
    table = np.full((num_scans, m, m), np.inf, np.float32)
    local = np.zeros(len(scan_of), np.int32)
    adj = adjacency(graph, weighted=True)
    for s, idx in enumerate(members):
        local[idx] = np.arange(len(idx))
        sub = adj[idx][:, idx]
        table[s, :len(idx), :len(idx)] = csgraph.shortest_path(sub, method="D", directed=True)
    return GeodesicTable(table=table, scan=scan_of.astype(np.int32), local=local)
