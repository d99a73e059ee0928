"""R2R/RxR path metrics: hand-worked examples on a 5-node line, and jitted batches vs the twin."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ttw_jax.rxr.metrics import path_metrics, path_metrics_np

# Five nodes on a line at x = 0, 2, 3, 5, 8 metres; geodesic distance = |x_i - x_j|.
D = np.array([
    [0, 2, 3, 5, 8],
    [2, 0, 1, 3, 6],
    [3, 1, 0, 2, 5],
    [5, 3, 2, 0, 3],
    [8, 6, 5, 3, 0],
], np.float32)
KEYS = ("pl", "ne", "sr", "osr", "spl", "ndtw", "sdtw")

# Hand-computed cases: (path, ref, expected).
CASES = [
    # Detour 0 1 2 1 2 3 to goal 3. PL = 2+1+1+1+2 = 7; NE = 0 -> SR = OSR = 1;
    # d(start, goal) = 5 -> SPL = 5/7. DTW table (rows path, cols ref 0 1 2 3):
    #   p=0: 0  2  5 10 | p=1: 2 0 1 4 | p=2: 5 1 0 2 | p=1: 7 1 1 3 | p=2: 10 2 1 3 | p=3: 15 5 3 1
    # DTW = 1 -> nDTW = exp(-1 / (3 * 4)) = SDTW.
    ([0, 1, 2, 1, 2, 3], [0, 1, 2, 3],
     dict(pl=7, ne=0, sr=1, osr=1, spl=5 / 7, ndtw=math.exp(-1 / 12), sdtw=math.exp(-1 / 12))),
    # Overshoot to 4: NE = d(4, 3) = 3.0 exactly -> not a success (strict <); it passed the goal
    # -> OSR = 1. PL = 2+1+2+3 = 8, SPL = 0. DTW: zero diagonal, then (4 vs 3) = 3 -> exp(-3/12).
    ([0, 1, 2, 3, 4], [0, 1, 2, 3],
     dict(pl=8, ne=3, sr=0, osr=1, spl=0, ndtw=math.exp(-0.25), sdtw=0)),
    # Stops at 2, NE = d(2, 3) = 2 < 3 -> SR = 1. PL = 3 < d(start, goal) = 5 -> SPL = 5/5 = 1.
    # DTW: zero diagonal, then ref 3 against path 2 costs 2 -> exp(-2/12).
    ([0, 1, 2], [0, 1, 2, 3],
     dict(pl=3, ne=2, sr=1, osr=1, spl=1, ndtw=math.exp(-2 / 12), sdtw=math.exp(-2 / 12))),
    # Never moves from 0, goal 4: NE = 8, OSR = 0, PL = 0, SPL = 0.
    # DTW: the single node aligned to every ref node: 0+2+3+5+8 = 18 -> exp(-18 / 15).
    ([0], [0, 1, 2, 3, 4],
     dict(pl=0, ne=8, sr=0, osr=0, spl=0, ndtw=math.exp(-18 / 15), sdtw=0)),
    # Start is the goal and the agent stays: PL = d = 0 -> SPL = SR = 1 (no NaN); DTW = 0.
    ([2], [2], dict(pl=0, ne=0, sr=1, osr=1, spl=1, ndtw=1, sdtw=1)),
    # Wanders off and back: 3 4 3 with goal 3; OSR = 1 and SR = 1, PL = 6, d(start, goal) = 0
    # -> SPL = 0. DTW(path 3 4 3, ref 3): 0 + 3 + 0 = 3 -> exp(-3 / 3).
    ([3, 4, 3], [3], dict(pl=6, ne=0, sr=1, osr=1, spl=0, ndtw=math.exp(-1), sdtw=math.exp(-1))),
]


def _pad(seqs, size, fill):
    out = np.broadcast_to(np.asarray(fill, np.int32), (len(seqs), size)).copy()
    for i, s in enumerate(seqs):
        out[i, :len(s)] = s
    return out, np.array([len(s) for s in seqs], np.int32)


def _dist_fn(dist):
    table = jnp.asarray(dist)
    return lambda a, b: table[a, b]


@pytest.mark.parametrize("path,ref,want", CASES)
def test_hand_examples_numpy(path, ref, want):
    got = path_metrics_np(path, ref, D)
    for key in KEYS:
        assert got[key] == pytest.approx(want[key], abs=1e-6), key


def test_hand_examples_batched():
    path, path_len = _pad([c[0] for c in CASES], 6, -1)
    ref, ref_len = _pad([c[1] for c in CASES], 5, -1)
    got = jax.jit(lambda *a: path_metrics(*a, _dist_fn(D)))(path, path_len, ref, ref_len)
    for key in KEYS:
        assert got[key].shape == (len(CASES),) and got[key].dtype == jnp.float32
        np.testing.assert_allclose(got[key], [c[2][key] for c in CASES], rtol=1e-5, atol=1e-6,
                                   err_msg=key)


def test_success_radius_is_respected():
    # Overshoot case: NE = 3.0; with a 3.5 m radius it succeeds, and nDTW = exp(-3 / (3.5 * 4)).
    got = path_metrics_np([0, 1, 2, 3, 4], [0, 1, 2, 3], D, success_radius=3.5)
    assert got["sr"] == 1.0 and got["spl"] == pytest.approx(5 / 8)
    assert got["ndtw"] == pytest.approx(math.exp(-3 / 14))
    b = path_metrics(jnp.array([[0, 1, 2, 3, 4]]), jnp.array([5]), jnp.array([[0, 1, 2, 3]]),
                     jnp.array([4]), _dist_fn(D), success_radius=3.5)
    assert float(b["sdtw"][0]) == pytest.approx(math.exp(-3 / 14), rel=1e-6)


def _random_cases(seed, b=50, n=10, t=9, r=7):
    rng = np.random.default_rng(seed)
    pos = rng.random((n, 2)) * 8  # random points in an 8 m square; Euclidean distances
    dist = np.linalg.norm(pos[:, None] - pos[None], axis=-1).astype(np.float32)
    paths = [list(rng.integers(0, n, rng.integers(1, t + 1))) for _ in range(b)]
    refs = [list(rng.integers(0, n, rng.integers(1, r + 1))) for _ in range(b)]
    return rng, dist, paths, refs


def test_random_batched_matches_numpy():
    _, dist, paths, refs = _random_cases(0)
    path, path_len = _pad(paths, 9, -1)
    ref, ref_len = _pad(refs, 7, -1)
    got = jax.jit(lambda *a: path_metrics(*a, _dist_fn(dist)))(path, path_len, ref, ref_len)
    for i in range(len(paths)):
        want = path_metrics_np(paths[i], refs[i], dist)
        for key in KEYS:
            assert float(got[key][i]) == pytest.approx(want[key], rel=1e-4, abs=1e-5), (i, key)
    # Non-degenerate: some successes and some failures.
    assert 0 < float(got["sr"].mean()) < 1 and 0 < float(got["osr"].mean()) < 1


def test_padding_values_change_nothing():
    rng, dist, paths, refs = _random_cases(1)
    f = jax.jit(lambda *a: path_metrics(*a, _dist_fn(dist)))
    p1, path_len = _pad(paths, 9, -1)
    r1, ref_len = _pad(refs, 7, -1)
    p2, _ = _pad(paths, 9, rng.integers(0, 10, 9))  # padding that looks like real nodes
    r2, _ = _pad(refs, 7, rng.integers(0, 10, 7))
    assert (p1 != p2).any() and (r1 != r2).any()
    got1, got2 = f(p1, path_len, r1, ref_len), f(p2, path_len, r2, ref_len)
    for key in KEYS:
        np.testing.assert_array_equal(got1[key], got2[key], err_msg=key)
