"""Localization examples: T-step random walks on Talk The Walk windows.

An example is a window (its 4x4xK landmark ids), a uniformly random start corner (and, for an
orientation-aware tourist, orientation) and T uniformly random moves; the tourist observes the T+1
corners it visits. The target is a corner flattened as x * 4 + y, chosen by `label`:

- "final": where the walk ends: the paper's text (the tourist walks, the guide says where it is)
  and the corner the released `compute_upperbound.py` scores;
- "start": where it began: the released training code (`TalkTheWalkEmergent` labels every walk
  with its configuration's `target_location`, the walk's first corner) and its full-task check.

Training batches are sampled on device from a key; evaluation enumerates every (window, start,
action sequence) exactly once, which is the distribution the Bayes upper bound is computed for.
"""
from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.core.env import batched
from ttw_jax.talk_the_walk import env as grid

LABELS = ("final", "start")


def check_label(label: str) -> str:
    if label not in LABELS:
        raise ValueError(f"label must be one of {LABELS}, got {label!r}")
    return label


def _examples(landmarks: jax.Array, walk: grid.Walk, label: str) -> dict:
    ny = landmarks.shape[2]
    corner = walk.positions[:, -1 if check_label(label) == "final" else 0]
    return {"obs": walk.obs, "actions": walk.actions, "landmarks": landmarks,
            "target": (corner[:, 0] * ny + corner[:, 1]).astype(jnp.int32)}


def sample_batch(key: jax.Array, table: jax.Array, batch_size: int, T: int,
                 label: str = "final", orientation_aware: bool = False) -> dict:
    """A batch of random walks on random windows of `table` (W, 4, 4, K).

    Returns obs (B, T+1, K), actions (B, T) (env action ids), landmarks (B, 4, 4, K), target (B,).
    """
    k_win, k_walk = jax.random.split(key)
    idx = jax.random.randint(k_win, (batch_size,), 0, table.shape[0])
    landmarks = table[idx]
    walks = jax.vmap(grid.random_walk, in_axes=(0, 0, None, None))(
        landmarks, jax.random.split(k_walk, batch_size), T, orientation_aware)
    return _examples(landmarks, walks, label)


def action_set(orientation_aware: bool = False) -> tuple[int, ...]:
    """The env action ids a random walk draws from."""
    return grid.AWARE_ACTIONS if orientation_aware else tuple(range(grid.NUM_AGNOSTIC_ACTIONS))


def action_sequences(T: int, actions=tuple(range(grid.NUM_AGNOSTIC_ACTIONS))) -> np.ndarray:
    """All len(actions)**T sequences, (len(actions)**T, T) int32 in lexicographic order."""
    return np.asarray(list(itertools.product(actions, repeat=T)), np.int32).reshape(
        len(actions) ** T, T)


# One jitted program for every enumeration (static: orientation_aware).
_replay = jax.jit(jax.vmap(grid.walk, in_axes=(0, 0, 0, None)), static_argnums=3)


def enumerate_walks(table: np.ndarray, T: int, label: str = "final",
                    orientation_aware: bool = False) -> dict:
    """Every (window, start, action sequence) of `table` (W, X, Y, K) once, as numpy arrays.

    Rows are ordered window-major, then start corner (x-major), then start orientation (aware
    only; agnostic walks start facing north, which they never observe), then action sequence.
    """
    w, nx, ny, _ = table.shape
    seqs = action_sequences(T, action_set(orientation_aware))
    orientations = np.arange(4 if orientation_aware else 1)
    win, sx, sy, so, seq = (a.ravel() for a in np.meshgrid(
        np.arange(w), np.arange(nx), np.arange(ny), orientations, np.arange(len(seqs)),
        indexing="ij"))
    landmarks = jnp.asarray(table)[win]
    start = batched(grid.reset, params_axis=0)(landmarks, jnp.stack([sx, sy], -1), so)
    walks = _replay(landmarks, start, jnp.asarray(seqs[seq]), orientation_aware)
    return jax.tree_util.tree_map(np.asarray, _examples(landmarks, walks, label))
