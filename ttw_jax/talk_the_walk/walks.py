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

import functools
import itertools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.core.env import batched
from ttw_jax.core.train import data_parallel as dp
from ttw_jax.talk_the_walk import env as grid, maps

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


@functools.partial(jax.jit, static_argnums=4)
def _replay(landmarks, pos, orientation, actions, orientation_aware: bool) -> grid.Walk:
    """Walks (P,) from corners pos (P, 2) facing `orientation` (P,) on windows (P, X, Y, K)."""
    start = batched(grid.reset, params_axis=0)(landmarks, pos, orientation)
    return jax.vmap(grid.walk, in_axes=(0, 0, 0, None))(landmarks, start, actions,
                                                        orientation_aware)


def _template(nx: int, ny: int) -> np.ndarray:
    """A (1, X, Y, 1) window whose corner (x, y) holds the id `EMPTY_ID + 1 + x * Y + y`."""
    ids = grid.EMPTY_ID + 1 + np.arange(nx * ny, dtype=np.int32).reshape(1, nx, ny, 1)
    return ids


def enumeration_size(T: int, orientation_aware: bool = False,
                     num_windows: int | None = None, k: int = 4) -> tuple[int, int]:
    """(walks, bytes) `enumerate_walks` would make for `num_windows` windows (default: every
    window of every neighbourhood) of at most `k` landmarks per corner: one row per window, start
    corner (and orientation, aware) and action sequence, holding its observations, actions and
    window (int32)."""
    if num_windows is None:
        num_windows = sum((bx + 1) * (by + 1) for bx, by in maps.BOUNDARIES.values())
    starts = maps.WINDOW ** 2 * (4 if orientation_aware else 1)
    rows = num_windows * starts * len(action_set(orientation_aware)) ** T
    per_row = 4 * ((T + 1) * k + T + maps.WINDOW ** 2 * k + 2)
    return rows, rows * per_row


def enumerate_walks(table: np.ndarray, T: int, label: str = "final",
                    orientation_aware: bool = False) -> dict:
    """Every (window, start, action sequence) of `table` (W, X, Y, K) once, as numpy arrays.

    Rows are ordered window-major, then start corner (x-major), then start orientation (aware
    only; agnostic walks start facing north, which they never observe), then action sequence.
    Where the tourist goes, and whether it sees its corner, does not depend on the window: the
    walks are replayed once by the environment on a template window whose ids name the corners,
    and every window's observations are gathered from those (no program per table size).
    """
    table = np.asarray(table)
    w, nx, ny, k = table.shape
    seqs = action_sequences(T, action_set(orientation_aware))
    orientations = np.arange(4 if orientation_aware else 1)
    sx, sy, so, seq = (a.ravel() for a in np.meshgrid(
        np.arange(nx), np.arange(ny), orientations, np.arange(len(seqs)), indexing="ij"))
    template = jnp.asarray(np.broadcast_to(_template(nx, ny), (len(sx), nx, ny, 1)))
    walks = _replay(template, np.stack([sx, sy], -1), so, seqs[seq], orientation_aware)
    positions, seen = np.asarray(walks.positions), np.asarray(walks.obs)[..., 0]   # (P, T+1)
    visible = seen != grid.EMPTY_ID
    empty = np.zeros((k,), table.dtype)
    empty[0] = grid.EMPTY_ID
    obs = table[:, positions[..., 0], positions[..., 1]]                 # (W, P, T+1, K)
    obs = np.where(visible[None, ..., None], obs, empty).reshape(-1, T + 1, k)
    corner = positions[:, -1 if check_label(label) == "final" else 0]
    target = np.tile((corner[:, 0] * ny + corner[:, 1]).astype(np.int32), w)
    return {"obs": obs.astype(np.int32), "actions": np.tile(seqs[seq], (w, 1)),
            "landmarks": np.repeat(table, len(sx), axis=0).astype(np.int32), "target": target}


def epoch_sampler(examples: dict, batch_size: int, key: jax.Array, mesh) -> tuple[Callable, int]:
    """sample(step) over a fixed training set (device arrays with a common leading axis of E
    rows: the enumerated walks, or a dialogue's examples), for `fit`'s 1-based training steps:
    steps `e * n + 1 .. (e + 1) * n` are epoch e, which visits every row once in the order
    `permutation(fold_in(key, e))`, n = ceil(E / batch_size) batches (the last one wraps around to
    the epoch's first rows). Returns (sample, n)."""
    num = len(next(iter(examples.values())))
    per_epoch = -(-num // batch_size)

    @functools.partial(jax.jit, out_shardings=dp.batch_sharded(mesh))
    def sample(step, table):
        epoch, batch = jnp.divmod(step - 1, per_epoch)
        order = jax.random.permutation(jax.random.fold_in(key, epoch), num)
        rows = order[(batch * batch_size + jnp.arange(batch_size)) % num]
        return jax.tree_util.tree_map(lambda x: x[rows], table)

    return (lambda step: sample(step, examples)), per_epoch
