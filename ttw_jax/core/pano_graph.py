"""A navigation graph compiled once into padded device arrays, and shortest-path distances.

Every graph (Touchdown's Street View graph, Matterport3D scans) becomes a `PanoGraph`: per node, its
out-edges padded to the maximum out-degree K and sorted by heading (ascending; equal headings keep
source-file order). `link_rank` remembers each edge's position in the source file's out-edge list,
which is what every "first edge on ties" rule refers to. Distances come from
`scipy.sparse.csgraph` for the sources that are needed, never all pairs.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import jax
import numpy as np
from flax import struct
from scipy import sparse
from scipy.sparse import csgraph


@struct.dataclass
class PanoGraph:
    """Padded out-edge tables. N nodes, K = max out-degree; padding has neighbor -1.

    neighbors: [N, K] int32 end node of each out-edge, sorted by heading.
    headings: [N, K] edge heading (int32 degrees for Touchdown, float32 radians for Matterport),
      clockwise from north (+y).
    elevations: [N, K] float32 radians (0 for Touchdown).
    lengths: [N, K] float32 metres.
    link_rank: [N, K] int32 position of the edge in the source's out-edge order (padding: K).
    degree: [N] int32 out-degree.
    positions: [N, 3] float32 metres (x east, y north, z up).
    yaw: [N] float32 degrees, heading at a panorama image's centre (Touchdown `pano_yaw_angle`).
    """
    neighbors: jax.Array
    headings: jax.Array
    elevations: jax.Array
    lengths: jax.Array
    link_rank: jax.Array
    degree: jax.Array
    positions: jax.Array
    yaw: jax.Array

    @property
    def num_nodes(self) -> int:
        return self.neighbors.shape[0]

    @property
    def max_degree(self) -> int:
        return self.neighbors.shape[1]


@dataclasses.dataclass(frozen=True)
class NodeTable:
    """Host-side node ids <-> row indices of a `PanoGraph`."""
    ids: tuple[str, ...]
    index: dict[str, int]

    @classmethod
    def from_ids(cls, ids: Sequence[str]) -> "NodeTable":
        return cls(tuple(ids), {n: i for i, n in enumerate(ids)})

    def lookup(self, ids: Sequence[str], what: str = "node") -> np.ndarray:
        """Row indices [len(ids)] int32; a KeyError names the first unknown id."""
        try:
            return np.asarray([self.index[i] for i in ids], np.int32)
        except KeyError as e:
            raise KeyError(f"unknown {what} id {e.args[0]!r} (not in the graph's "
                           f"{len(self.ids)} nodes)") from None

    def __len__(self) -> int:
        return len(self.ids)


def build_graph(num_nodes: int, src: np.ndarray, dst: np.ndarray, headings: np.ndarray,
                lengths: np.ndarray, positions: np.ndarray, elevations: np.ndarray | None = None,
                yaw: np.ndarray | None = None) -> PanoGraph:
    """Compiles a directed edge list (in source-file order) into a host `PanoGraph` (numpy).

    Out-edges of each node are sorted by (heading, file order). Headings keep their dtype
    (integers stay integers so the Touchdown rules compare them exactly).
    """
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    headings = np.asarray(headings)
    elevations = np.zeros(len(src), np.float32) if elevations is None else np.asarray(elevations)
    degree = np.bincount(src, minlength=num_nodes).astype(np.int32)
    k = max(int(degree.max()) if len(src) else 0, 1)
    # File order within each source node, then sort by (source, heading, file order).
    order_in_file = np.argsort(src, kind="stable")
    start = np.concatenate([[0], np.cumsum(degree)[:-1]])
    rank = np.empty(len(src), np.int64)
    rank[order_in_file] = np.arange(len(src)) - start[src[order_in_file]]
    order = np.lexsort((rank, headings, src))
    slot = np.empty(len(src), np.int64)
    slot[order] = np.arange(len(src)) - start[src[order]]

    def table(values, fill, dtype):
        out = np.full((num_nodes, k), fill, dtype)
        out[src, slot] = values
        return out

    hdtype = np.int32 if np.issubdtype(headings.dtype, np.integer) else np.float32
    return PanoGraph(
        neighbors=table(dst, -1, np.int32),
        headings=table(headings, 0, hdtype),
        elevations=table(elevations, 0, np.float32),
        lengths=table(lengths, 0, np.float32),
        link_rank=table(rank, k, np.int32),
        degree=degree,
        positions=np.asarray(positions, np.float32),
        yaw=np.zeros(num_nodes, np.float32) if yaw is None else np.asarray(yaw, np.float32),
    )


def adjacency(graph: PanoGraph, weighted: bool) -> sparse.csr_matrix:
    """[N, N] sparse matrix of out-edges; weights are lengths (metres) or 1 (hops)."""
    nb = np.asarray(graph.neighbors)
    rows, cols = np.nonzero(nb >= 0)
    w = np.asarray(graph.lengths)[rows, cols] if weighted else np.ones(len(rows), np.float64)
    n = nb.shape[0]
    # Zero-length edges would vanish from a sparse matrix; keep them as a tiny positive length.
    w = np.maximum(w.astype(np.float64), 1e-9)
    return sparse.csr_matrix((w, (rows, nb[rows, cols])), shape=(n, n))


def distances_from(graph: PanoGraph, sources: Sequence[int] | np.ndarray, weighted: bool,
                   reverse: bool = False) -> np.ndarray:
    """Shortest-path distances [S, N] float32 from each source (or, with reverse=True, from every
    node *to* each source, following edge directions). Unreachable: inf. Hops if not weighted."""
    adj = adjacency(graph, weighted)
    if reverse:
        adj = adj.T.tocsr()
    sources = np.asarray(sources, np.int64)
    if len(sources) == 0:
        return np.zeros((0, graph.num_nodes), np.float32)
    d = csgraph.shortest_path(adj, method="D", directed=True, unweighted=not weighted,
                              indices=sources)
    return d.astype(np.float32)


def to_device(graph: PanoGraph) -> PanoGraph:
    return jax.tree.map(jax.numpy.asarray, graph)
