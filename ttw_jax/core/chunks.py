"""Evaluation over a whole split in fixed-size chunks (one compiled program per shape)."""
from __future__ import annotations

from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np


def map_in_chunks(fn: Callable[[dict, jax.Array], dict], episodes: dict, keys: Sequence[str],
                  batch_size: int, rng: jax.Array) -> dict:
    """Runs fn(batch, fold_in(rng, chunk index)) -> {name: [B, ...]} over `episodes` (host arrays
    with a common leading axis E; only `keys` present are passed) in chunks of `batch_size`, the
    last padded by repeating episode 0; returns {name: [E, ...] numpy}."""
    n = len(next(iter(episodes.values())))
    outs = []
    for i, lo in enumerate(range(0, n, batch_size)):
        idx = np.arange(lo, lo + batch_size)
        idx = np.where(idx < n, idx, 0)
        batch = {k: jnp.asarray(episodes[k][idx]) for k in keys if k in episodes}
        out = jax.device_get(fn(batch, jax.random.fold_in(rng, i)))
        outs.append({k: v[:min(batch_size, n - lo)] for k, v in out.items()})
    return {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}
