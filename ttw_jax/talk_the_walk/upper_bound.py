"""Exact Bayes-rate upper bound on localization accuracy (Talk The Walk, section 5.1).

Examples are uniform over (window, start corner, action sequence), as in `enumerate_walks`. A guide
that sees the observation sequence (and, if conditioned, the action sequence) can do no better than
predicting, for each such evidence class, the final corner that occurs most often in it; the bound
is sum over classes of that count, divided by the number of examples. Observations are compared as
bags (multisets) of landmark ids unless `order_sensitive` (which reproduces a known mistake).
"""
from __future__ import annotations

import numpy as np

from ttw_jax.talk_the_walk.walks import enumerate_walks


def bayes_rate(table: np.ndarray, T: int, condition_on_actions: bool = True,
               order_sensitive: bool = False) -> tuple[int, int]:
    """Returns (correct, total) of the Bayes-optimal guide on windows `table` (W, 4, 4, K)."""
    ex = enumerate_walks(np.asarray(table), T)
    obs = ex["obs"]  # (E, T+1, K)
    if not order_sensitive:
        obs = np.sort(obs, axis=-1)
    _, obs_id = np.unique(obs.reshape(-1, obs.shape[-1]), axis=0, return_inverse=True)
    obs_id = obs_id.reshape(obs.shape[:2])
    n = len(obs_id)
    num_seqs = 4 ** T
    window = np.arange(n) // (table.shape[1] * table.shape[2] * num_seqs)
    cols = [window[:, None], obs_id]
    if condition_on_actions:
        cols.append(ex["actions"])
    _, group = np.unique(np.concatenate(cols, axis=1), axis=0, return_inverse=True)
    cells = table.shape[1] * table.shape[2]
    pairs, counts = np.unique(group.ravel() * cells + ex["target"], return_counts=True)
    best = np.zeros(group.max() + 1, np.int64)
    np.maximum.at(best, pairs // cells, counts)
    return int(best.sum()), n
