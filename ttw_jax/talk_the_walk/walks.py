"""Localization examples: T-step random walks on Talk The Walk windows.

An example is a window (its 4x4xK landmark ids), a uniformly random start corner and T uniformly
random agnostic moves; the tourist observes the T+1 corners it visits and the target is the corner
where it ends, flattened as x * 4 + y. Training batches are sampled on device from a key; evaluation
enumerates every (window, start, action sequence) exactly once, which is the distribution the Bayes
upper bound is computed for.
"""
from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.core.env import batched
from ttw_jax.talk_the_walk import env as grid


def _examples(landmarks: jax.Array, walk: grid.Walk) -> dict:
    ny = landmarks.shape[2]
    final = walk.positions[:, -1]
    return {"obs": walk.obs, "actions": walk.actions, "landmarks": landmarks,
            "target": (final[:, 0] * ny + final[:, 1]).astype(jnp.int32)}


def sample_batch(key: jax.Array, table: jax.Array, batch_size: int, T: int) -> dict:
    """A batch of random walks on random windows of `table` (W, 4, 4, K).

    Returns obs (B, T+1, K), actions (B, T), landmarks (B, 4, 4, K), target (B,) int32.
    """
    k_win, k_walk = jax.random.split(key)
    idx = jax.random.randint(k_win, (batch_size,), 0, table.shape[0])
    landmarks = table[idx]
    walks = jax.vmap(grid.random_walk, in_axes=(0, 0, None))(
        landmarks, jax.random.split(k_walk, batch_size), T)
    return _examples(landmarks, walks)


def action_sequences(T: int, num_actions: int = grid.NUM_AGNOSTIC_ACTIONS) -> np.ndarray:
    """All num_actions**T sequences, (num_actions**T, T) int32 in lexicographic order."""
    return np.asarray(list(itertools.product(range(num_actions), repeat=T)), np.int32).reshape(num_actions ** T, T)


def enumerate_walks(table: np.ndarray, T: int) -> dict:
    """Every (window, start corner, action sequence) of `table` (W, X, Y, K) once, as numpy arrays.

    Rows are ordered window-major, then start (x-major), then action sequence.
    """
    w, nx, ny, _ = table.shape
    seqs = action_sequences(T)
    win, sx, sy, seq = (a.ravel() for a in np.meshgrid(
        np.arange(w), np.arange(nx), np.arange(ny), np.arange(len(seqs)), indexing="ij"))
    landmarks = jnp.asarray(table)[win]
    start = batched(grid.reset, params_axis=0)(landmarks, jnp.stack([sx, sy], -1),
                                               jnp.zeros_like(sx))
    walks = jax.jit(jax.vmap(grid.walk))(landmarks, start, jnp.asarray(seqs[seq]))
    return jax.tree_util.tree_map(np.asarray, _examples(landmarks, walks))
