"""Touchdown navigation metrics (Chen et al., 2019): TC, SPD and SED.

Choices, stated once:
- TC (task completion) is 1 when the final panorama is the goal or one of its neighbours in
  the undirected graph (section 3.1: "the goal position or one of its neighboring nodes"): a
  link in either direction, `final in neighbors[goal]` or `goal in neighbors[final]`, else 0.
- SPD (shortest-path distance) is the hop count from the final panorama to the goal on the
  directed links graph, ignoring heading; the batched version reads it from caller-supplied rows
  `dist_to_goal[b, n]` (hops from n to the goal of episode b), the NumPy twin runs a BFS.
- SED (success-weighted edit distance) is TC * (1 - Lev(p, r) / max(|p|, |r|)), where p and r
  are the predicted and reference panorama sequences with consecutive duplicates removed
  (turning in place repeats a panorama) and |p|, |r| are their de-duplicated lengths. Comparing
  raw per-step sequences, with the repeats from turns, gives lower SED; such numbers are not
  comparable with these.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ttw_jax.core.sequence import (dedup_consecutive, dedup_consecutive_np, levenshtein,
                                   levenshtein_np)


def task_completion(final: ArrayLike, goal: ArrayLike, neighbors: ArrayLike) -> jax.Array:
    """TC per episode: final [B] int, goal [B] int, neighbors [N, K] int (out-links, -1 padded).

    Returns [B] float32, 1.0 where final == goal or a link joins them in either direction.
    """
    final = jnp.asarray(final, jnp.int32)
    goal = jnp.asarray(goal, jnp.int32)
    neighbors = jnp.asarray(neighbors, jnp.int32)
    out_of_goal = jnp.any(neighbors[goal] == final[:, None], axis=-1)                # [B]
    into_goal = (final >= 0) & jnp.any(neighbors[jnp.maximum(final, 0)] == goal[:, None], -1)
    return ((final == goal) | ((final >= 0) & out_of_goal) | into_goal).astype(jnp.float32)


def shortest_path_distance(final: ArrayLike, dist_to_goal: ArrayLike) -> jax.Array:
    """SPD per episode: final [B] int, dist_to_goal [B, N] hops to each episode's goal.

    Returns [B] float32, dist_to_goal[b, final[b]].
    """
    final = jnp.asarray(final, jnp.int32)
    rows = jnp.asarray(dist_to_goal, jnp.float32)
    return jnp.take_along_axis(rows, final[:, None], axis=1)[:, 0]


def success_weighted_edit_distance(pred: ArrayLike, pred_len: ArrayLike, ref: ArrayLike,
                                   ref_len: ArrayLike, tc: ArrayLike) -> jax.Array:
    """SED per episode: pred [B, T] int, ref [B, R] int (padded), lengths [B], tc [B].

    Returns [B] float32, tc * (1 - Lev(p, r) / max(|p|, |r|)) on de-duplicated sequences
    (equal to tc when both are empty).
    """
    p, p_len = jax.vmap(dedup_consecutive)(pred, pred_len)
    r, r_len = jax.vmap(dedup_consecutive)(ref, ref_len)
    lev = jax.vmap(levenshtein)(p, p_len, r, r_len)
    denom = jnp.maximum(jnp.maximum(p_len, r_len), 1)
    return jnp.asarray(tc, jnp.float32) * (1.0 - lev / denom).astype(jnp.float32)


def touchdown_metrics(final: ArrayLike, goal: ArrayLike, neighbors: ArrayLike,
                      dist_to_goal: ArrayLike, pred: ArrayLike, pred_len: ArrayLike,
                      ref: ArrayLike, ref_len: ArrayLike) -> dict[str, jax.Array]:
    """All Touchdown metrics per episode; returns {"tc", "spd", "sed"}, each [B] float32.

    Shapes as in `task_completion`, `shortest_path_distance`, `success_weighted_edit_distance`.
    """
    tc = task_completion(final, goal, neighbors)
    return {"tc": tc,
            "spd": shortest_path_distance(final, dist_to_goal),
            "sed": success_weighted_edit_distance(pred, pred_len, ref, ref_len, tc)}


# NumPy / Python twins for evaluation reports.

def task_completion_np(final: int, goal: int,
                       neighbors: np.ndarray | Mapping[int, Iterable[int]]) -> float:
    """1.0 if final is the goal or linked to it in either direction, else 0.0; neighbors: [N, K]
    int array padded with -1, or a mapping node -> out-neighbours."""
    links = _out_links(neighbors)
    return float(final == goal or final in links.get(goal, []) or goal in links.get(final, []))


def sed_np(pred: Sequence[int], ref: Sequence[int], tc: float) -> float:
    """Returns tc * (1 - Lev(p, r) / max(|p|, |r|)) with consecutive duplicates removed."""
    p, r = dedup_consecutive_np(pred), dedup_consecutive_np(ref)
    denom = max(len(p), len(r), 1)
    return float(tc) * (1.0 - levenshtein_np(p, r) / denom)


def _out_links(neighbors: np.ndarray | Mapping[int, Iterable[int]]) -> Mapping[int, list[int]]:
    if isinstance(neighbors, Mapping):
        return {int(k): [int(n) for n in v if n >= 0] for k, v in neighbors.items()}
    arr = np.asarray(neighbors)
    return {i: [int(n) for n in row if n >= 0] for i, row in enumerate(arr)}


def hop_distance_np(neighbors: np.ndarray | Mapping[int, Iterable[int]], source: int,
                    target: int) -> float:
    """Hop count from `source` to `target` along directed out-links (BFS); inf if unreachable.

    neighbors: [N, K] int array padded with -1, or a mapping node -> out-neighbours.
    """
    links = _out_links(neighbors)
    seen, queue = {source: 0}, deque([source])
    while queue:
        node = queue.popleft()
        if node == target:
            return float(seen[node])
        for nxt in links.get(node, []):
            if nxt not in seen:
                seen[nxt] = seen[node] + 1
                queue.append(nxt)
    return float("inf")


def touchdown_metrics_np(episodes: Iterable[Mapping[str, Sequence[int]]],
                         neighbors: np.ndarray | Mapping[int, Iterable[int]]) -> dict[str, float]:
    """Mean TC, SPD and SED over episodes; returns {"tc", "spd", "sed"} floats.

    Each episode maps "pred" to the predicted panorama sequence (its last entry is the final
    panorama) and "ref" to the reference sequence (its last entry is the goal).
    neighbors: [N, K] int array padded with -1, or a mapping node -> out-neighbours.
    """
    links = _out_links(neighbors)
    tcs, spds, seds = [], [], []
    for ep in episodes:
        pred, ref = list(ep["pred"]), list(ep["ref"])
        final, goal = pred[-1], ref[-1]
        tc = task_completion_np(final, goal, links)
        tcs.append(tc)
        spds.append(hop_distance_np(links, final, goal))
        seds.append(sed_np(pred, ref, tc))
    return {"tc": float(np.mean(tcs)), "spd": float(np.mean(spds)), "sed": float(np.mean(seds))}
