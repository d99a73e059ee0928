"""Sequence primitives for navigation metrics: de-duplication, Levenshtein distance, DTW.

Each jittable function works on one padded sequence (vmap it for batches): only the first
`length` entries count, the rest is padding and never changes the result. Dynamic programmes
run one `jax.lax.scan` step per row of the DP table; each row is computed with vectorised
prefix operations, so nothing loops over time in Python. The `*_np` twins are plain
NumPy/Python reference versions on unpadded sequences.
"""
from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike


def _mask(size: int, length: ArrayLike) -> jax.Array:
    """[size] bool, True for the first `length` positions (length clipped to [0, size])."""
    return jnp.arange(size, dtype=jnp.int32) < jnp.clip(jnp.asarray(length, jnp.int32), 0, size)


def dedup_consecutive(seq: ArrayLike, length: ArrayLike) -> tuple[jax.Array, jax.Array]:
    """Removes consecutive repeats among the first `length` entries of `seq` [T] (int).

    Returns (out [T] int32, out_length [] int32): the kept entries compacted to the front,
    the rest filled with -1.
    """
    seq = jnp.asarray(seq, jnp.int32)
    size = seq.shape[0]
    valid = _mask(size, length)
    prev = jnp.concatenate([seq[:1], seq[:-1]])
    first = jnp.arange(size) == 0
    keep = valid & (first | (seq != prev))
    # Slot of a kept entry = number of kept entries before it; dropped entries go to `size`.
    slot = jnp.where(keep, jnp.cumsum(keep) - 1, size)
    out = jnp.full((size,), -1, jnp.int32).at[slot].set(seq, mode="drop")
    return out, jnp.sum(keep).astype(jnp.int32)


def dedup_consecutive_np(seq: Sequence[int]) -> list[int]:
    """Returns `seq` with consecutive repeats removed, as a list."""
    out: list[int] = []
    for x in seq:
        if not out or out[-1] != x:
            out.append(x)
    return out


def levenshtein(a: ArrayLike, a_len: ArrayLike, b: ArrayLike, b_len: ArrayLike) -> jax.Array:
    """Edit distance (unit insertion, deletion, substitution) between a[:a_len] and b[:b_len].

    a: [Ta] int, b: [Tb] int. Returns a scalar int32.
    """
    a = jnp.asarray(a, jnp.int32)
    b = jnp.asarray(b, jnp.int32)
    ta, tb = a.shape[0], b.shape[0]
    a_len = jnp.clip(jnp.asarray(a_len, jnp.int32), 0, ta)
    b_len = jnp.clip(jnp.asarray(b_len, jnp.int32), 0, tb)
    cols = jnp.arange(tb + 1, dtype=jnp.int32)

    def row(prev: jax.Array, inp: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, None]:
        i, ai = inp  # row i (1-based) compares a[i-1] = ai with all of b
        sub = prev[:-1] + (b != ai).astype(jnp.int32)
        # Best without an insertion from the left: delete (prev[j] + 1) or substitute/match.
        base = jnp.concatenate([i[None], jnp.minimum(prev[1:] + 1, sub)])
        # Insertions from the left: new[j] = min_k<=j base[k] + (j - k).
        new = jax.lax.cummin(base - cols) + cols
        # Rows past a_len leave the table unchanged, so the final carry is row a_len.
        return jnp.where(i <= a_len, new, prev), None

    rows = (jnp.arange(1, ta + 1, dtype=jnp.int32), a)
    last, _ = jax.lax.scan(row, cols, rows)
    return last[b_len]


def levenshtein_np(a: Sequence[int], b: Sequence[int]) -> int:
    """Edit distance between sequences `a` and `b` by the O(len(a) * len(b)) DP; returns an int."""
    d = np.zeros((len(a) + 1, len(b) + 1), dtype=np.int64)
    d[:, 0] = np.arange(len(a) + 1)
    d[0, :] = np.arange(len(b) + 1)
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i, j] = min(d[i - 1, j] + 1, d[i, j - 1] + 1,
                          d[i - 1, j - 1] + (a[i - 1] != b[j - 1]))
    return int(d[len(a), len(b)])


def _tropical_compose(f: tuple[jax.Array, jax.Array],
                      g: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
    """Composes x -> min(x + s, t) maps: f then g is (s_f + s_g, min(t_f + s_g, t_g))."""
    return f[0] + g[0], jnp.minimum(f[1] + g[0], g[1])


def _dtw_scan(cost: ArrayLike, a_len: ArrayLike, b_len: ArrayLike):
    """(D[a_len, b_len], D[i + 1, b_len] for every row i [Ta]) of the recurrence in `dtw`."""
    cost = jnp.asarray(cost, jnp.float32)
    ta, tb = cost.shape
    a_len = jnp.clip(jnp.asarray(a_len, jnp.int32), 0, ta)
    b_len = jnp.clip(jnp.asarray(b_len, jnp.int32), 0, tb)
    inside = _mask(ta, a_len)[:, None] & _mask(tb, b_len)[None, :]
    cost = jnp.where(inside, cost, 0.0)  # padding (even inf/NaN) never reaches D[a_len, b_len]
    inf = jnp.float32(jnp.inf)
    first = jnp.full((tb + 1,), inf).at[0].set(0.0)

    def row(prev: jax.Array, inp: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        i, c = inp  # c = cost[i-1, :]
        # new[j] = c[j-1] + min(new[j-1], m[j]) with m[j] = min(prev[j], prev[j-1]): a (min, +)
        # linear recurrence, solved with an associative scan of maps x -> min(x + s, t).
        m = jnp.minimum(prev[1:], prev[:-1])
        _, t = jax.lax.associative_scan(_tropical_compose, (c, m + c))
        new = jnp.concatenate([jnp.full((1,), inf), t])  # D[i, 0] = inf so only t survives
        new = jnp.where(i <= a_len, new, prev)
        return new, new[b_len]

    last, rows = jax.lax.scan(row, first, (jnp.arange(1, ta + 1, dtype=jnp.int32), cost))
    return last[b_len], rows


def dtw(cost: ArrayLike, a_len: ArrayLike, b_len: ArrayLike) -> jax.Array:
    """Dynamic time warping cost over cost[:a_len, :b_len].

    cost: [Ta, Tb] float, cost[i, j] the cost of aligning a[i] with b[j]. With D[0, 0] = 0,
    D[i, 0] = D[0, j] = inf and D[i, j] = cost[i-1, j-1] + min(D[i-1, j], D[i, j-1], D[i-1, j-1]),
    returns D[a_len, b_len] as a scalar float32 (inf if exactly one length is 0).
    """
    return _dtw_scan(cost, a_len, b_len)[0]


def dtw_prefixes(cost: ArrayLike, a_len: ArrayLike, b_len: ArrayLike) -> jax.Array:
    """DTW of every prefix of `a` against b[:b_len]: [Ta] float32 with entry i = D[i + 1, b_len]
    (the recurrence of `dtw`); rows at or past `a_len` repeat D[a_len, b_len]."""
    return _dtw_scan(cost, a_len, b_len)[1]


def dtw_np(cost: np.ndarray) -> float:
    """DTW cost (same recurrence as `dtw`) over the whole 2-D `cost`; returns a float."""
    cost = np.asarray(cost, dtype=np.float64)
    n, m = cost.shape
    d = np.full((n + 1, m + 1), np.inf)
    d[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i, j] = cost[i - 1, j - 1] + min(d[i - 1, j], d[i, j - 1], d[i - 1, j - 1])
    return float(d[n, m])
