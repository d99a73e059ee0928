"""Exact Bayes-rate upper bound on localization accuracy (Talk The Walk, section 5.1).

Examples are uniform over (window, start, action sequence), as in `enumerate_walks`. A guide
that sees the observation sequence (and, if conditioned, the action sequence) can do no better than
predicting, for each such evidence class, the labelled corner (`label`: where the walk ends or
where it starts, see `walks`) that occurs most often in it; the bound is sum over classes of that
count, divided by the number of examples. Observations are compared as bags (multisets) of
landmark ids unless `order_sensitive` (which reproduces a known mistake). `orientation_aware`
walks start on every corner in each of the 4 orientations and take TURNLEFT/TURNRIGHT/FORWARD,
seeing landmarks only when facing away from the intersection (`env.VISIBLE`).
"""
from __future__ import annotations

import numpy as np

from ttw_jax.talk_the_walk.walks import enumerate_walks


def bayes_rate(table: np.ndarray, T: int, condition_on_actions: bool = True,
               order_sensitive: bool = False, label: str = "final",
               orientation_aware: bool = False, examples: dict | None = None) -> tuple[int, int]:
    """Returns (correct, total) of the Bayes-optimal guide on windows `table` (W, 4, 4, K).

    `examples`: `enumerate_walks(table, T, label, orientation_aware)` when already computed.
    """
    table = np.asarray(table)
    ex = examples if examples is not None else enumerate_walks(table, T, label, orientation_aware)
    obs = ex["obs"]  # (E, T+1, K)
    if not order_sensitive:
        obs = np.sort(obs, axis=-1)
    n = len(obs)
    window = np.arange(n) // (n // table.shape[0])   # rows are window-major
    cols = [window[:, None], obs.reshape(n, -1)]
    if condition_on_actions:
        cols.append(ex["actions"])
    group = row_ids(np.concatenate(cols, axis=1))
    cells = table.shape[1] * table.shape[2]
    pairs, counts = np.unique(group * cells + ex["target"], return_counts=True)
    best = np.zeros(group.max() + 1, np.int64)
    np.maximum.at(best, pairs // cells, counts)
    return int(best.sum()), n


def row_ids(rows: np.ndarray) -> np.ndarray:
    """(E,) int64 ids of the distinct rows of the integer array (E, D): equal rows, equal ids.

    Column by column, (id so far, next column) pairs are renumbered densely with a 1-D unique,
    which is much faster than `np.unique(axis=0)` and never overflows (ids stay below E).
    """
    rows = np.asarray(rows, np.int64)
    ids = np.zeros(len(rows), np.int64)
    for col in rows.T:
        col = col - col.min()
        _, ids = np.unique(ids * (int(col.max()) + 1) + col, return_inverse=True)
    return ids.ravel().astype(np.int64)
