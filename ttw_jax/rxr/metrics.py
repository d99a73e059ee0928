"""R2R / RxR path metrics (Anderson et al., 2018; nDTW and SDTW from Ilharco et al., 2019).

With goal = ref[-1], start = path[0], final = path[-1] and d the geodesic distance in metres:
PL = sum_t d(path[t], path[t+1]); NE = d(final, goal); SR = [NE < radius] (strict);
OSR = [some visited node has d(node, goal) < radius]; SPL = SR * d(start, goal) /
max(PL, d(start, goal)) (= SR when both are 0); nDTW = exp(-DTW(path, ref) / (radius * |ref|))
with DTW cost d(path[i], ref[j]); SDTW = SR * nDTW.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ttw_jax.core.sequence import dtw, dtw_np

DistFn = Callable[[jax.Array, jax.Array], jax.Array]


def _last(seq: jax.Array, length: jax.Array) -> jax.Array:
    """[B] entry at position length - 1 of each row of seq [B, T] (position 0 if length <= 0)."""
    idx = jnp.clip(length - 1, 0, seq.shape[1] - 1)
    return jnp.take_along_axis(seq, idx[:, None], axis=1)[:, 0]


def path_metrics(path: ArrayLike, path_len: ArrayLike, ref: ArrayLike, ref_len: ArrayLike,
                 dist_fn: DistFn, success_radius: float = 3.0) -> dict[str, jax.Array]:
    """Per-episode path metrics for padded batches (jittable with dist_fn closed over).

    path: [B, T] int node ids, path_len [B] (>= 1); ref: [B, R] int, ref_len [B] (>= 1).
    Entries past the lengths are padding of any value. dist_fn(a, b) maps two int32 arrays of the
    same shape to geodesic distances of that shape. Returns {"pl", "ne", "sr", "osr", "spl",
    "ndtw", "sdtw"}, each [B] float32.
    """
    path = jnp.maximum(jnp.asarray(path, jnp.int32), 0)  # padding -> a valid id; masked below
    ref = jnp.maximum(jnp.asarray(ref, jnp.int32), 0)
    b, t = path.shape
    r = ref.shape[1]
    path_len = jnp.clip(jnp.asarray(path_len, jnp.int32), 1, t)
    ref_len = jnp.clip(jnp.asarray(ref_len, jnp.int32), 1, r)

    def dist(x: jax.Array, y: jax.Array) -> jax.Array:
        x, y = jnp.broadcast_arrays(x, y)
        return jnp.asarray(dist_fn(x, y), jnp.float32)

    steps = jnp.arange(t, dtype=jnp.int32)[None, :]
    visited = steps < path_len[:, None]  # [B, T]
    start, final, goal = path[:, 0], _last(path, path_len), _last(ref, ref_len)

    pl = jnp.sum(jnp.where(visited[:, 1:], dist(path[:, :-1], path[:, 1:]), 0.0), axis=1)
    ne = dist(final, goal)
    sr = (ne < success_radius).astype(jnp.float32)
    near = dist(path, goal[:, None]) < success_radius
    osr = jnp.any(near & visited, axis=1).astype(jnp.float32)
    d0 = dist(start, goal)
    denom = jnp.maximum(pl, d0)
    spl = sr * jnp.where(denom > 0, d0 / jnp.where(denom > 0, denom, 1.0), 1.0)
    cost = dist(path[:, :, None], ref[:, None, :])  # [B, T, R]
    dtw_cost = jax.vmap(dtw)(cost, path_len, ref_len)
    ndtw = jnp.exp(-dtw_cost / (success_radius * ref_len.astype(jnp.float32)))
    return {"pl": pl, "ne": ne, "sr": sr, "osr": osr, "spl": spl.astype(jnp.float32),
            "ndtw": ndtw.astype(jnp.float32), "sdtw": (sr * ndtw).astype(jnp.float32)}


def path_metrics_np(path: Sequence[int], ref: Sequence[int], dist: np.ndarray,
                    success_radius: float = 3.0) -> dict[str, float]:
    """Path metrics of one episode from the definitions; dist is an [N, N] distance matrix.

    Returns {"pl", "ne", "sr", "osr", "spl", "dtw", "ndtw", "sdtw"} as floats (`dtw`: the raw
    DTW cost in metres, which the RxR release's follower `metrics` store beside nDTW).
    """
    dist = np.asarray(dist, dtype=np.float64)
    start, final, goal = path[0], path[-1], ref[-1]
    pl = sum(dist[path[i], path[i + 1]] for i in range(len(path) - 1))
    ne = dist[final, goal]
    sr = 1.0 if ne < success_radius else 0.0
    osr = 1.0 if any(dist[node, goal] < success_radius for node in path) else 0.0
    d0 = dist[start, goal]
    spl = sr if max(pl, d0) == 0 else sr * d0 / max(pl, d0)
    cost = np.array([[dist[p, q] for q in ref] for p in path])
    dtw = dtw_np(cost)
    ndtw = float(np.exp(-dtw / (success_radius * len(ref))))
    return {"pl": float(pl), "ne": float(ne), "sr": sr, "osr": osr, "spl": float(spl),
            "dtw": dtw, "ndtw": ndtw, "sdtw": sr * ndtw}
