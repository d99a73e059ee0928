"""Sequence primitives: hand-worked examples; jitted/vmapped versions vs the NumPy twins."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ttw_jax.core.sequence import (dedup_consecutive, dedup_consecutive_np, dtw, dtw_np,
                                   levenshtein, levenshtein_np)


def _word(s: str) -> list[int]:
    return [ord(c) - ord("a") for c in s]


def _pad(seqs: list[list[int]], size: int, fill: int = -1) -> tuple[np.ndarray, np.ndarray]:
    out = np.full((len(seqs), size), fill, np.int32)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = s
    return out, np.array([len(s) for s in seqs], np.int32)


def test_dedup_examples():
    seq = jnp.array([1, 1, 2, 2, 2, 3, 1, 1], jnp.int32)
    out, n = dedup_consecutive(seq, 8)
    assert out.tolist() == [1, 2, 3, 1, -1, -1, -1, -1]  # the later 1 is not adjacent: kept
    assert int(n) == 4
    out, n = dedup_consecutive(jnp.array([5, 5, 6, 6, 6, 9, 9, 9]), 4)  # only [5, 5, 6, 6] counts
    assert out.tolist() == [5, 6, -1, -1, -1, -1, -1, -1] and int(n) == 2
    out, n = dedup_consecutive(jnp.array([4, 4, 4]), 0)
    assert out.tolist() == [-1, -1, -1] and int(n) == 0
    assert dedup_consecutive_np([1, 1, 2, 2, 2, 3, 1, 1]) == [1, 2, 3, 1]
    assert dedup_consecutive_np([]) == []


def test_levenshtein_examples():
    # kitten -> sitting: k->s, e->i, insert g = 3.
    a, b = _word("kitten"), _word("sitting")
    assert levenshtein_np(a, b) == 3
    assert int(levenshtein(jnp.array(a), 6, jnp.array(b), 7)) == 3
    # flaw -> lawn: delete f, insert n = 2.
    assert levenshtein_np(_word("flaw"), _word("lawn")) == 2
    assert int(levenshtein(jnp.array(_word("flaw")), 4, jnp.array(_word("lawn")), 4)) == 2
    # Against an empty sequence the distance is the other length.
    assert levenshtein_np([], [1, 2, 3]) == 3
    assert int(levenshtein(jnp.array([7, 7]), 0, jnp.array([1, 2, 3]), 3)) == 3
    assert int(levenshtein(jnp.array([1, 2, 3]), 3, jnp.array([7]), 0)) == 3
    # Lengths cut the sequences: [1, 2] vs [1, 3] -> one substitution.
    assert int(levenshtein(jnp.array([1, 2, 9, 9]), 2, jnp.array([1, 3, 8]), 2)) == 1


def test_dtw_example():
    # cost = [[1, 3, 4],
    #         [2, 1, 5]]
    # D row 1: 1, 1+3=4, 4+4=8
    # D row 2: 2+1=3, 1+min(4, 3, 1)=2, 5+min(8, 2, 4)=7
    cost = np.array([[1.0, 3.0, 4.0], [2.0, 1.0, 5.0]])
    assert dtw_np(cost) == pytest.approx(7.0)
    assert float(dtw(cost, 2, 3)) == pytest.approx(7.0)
    assert float(dtw(cost, 1, 3)) == pytest.approx(8.0)  # D[1][3]
    assert float(dtw(cost, 2, 2)) == pytest.approx(2.0)  # D[2][2]
    assert float(dtw(cost, 0, 0)) == 0.0
    assert float(dtw(cost, 0, 2)) == np.inf
    # Padding (even NaN / inf) beyond the lengths does not reach the result.
    padded = np.full((4, 5), np.nan)
    padded[:2, :3] = cost
    padded[3, 0] = np.inf
    assert float(dtw(padded, 2, 3)) == pytest.approx(7.0)


def _random_seqs(rng: np.random.Generator, n: int, max_len: int, vocab: int) -> list[list[int]]:
    # Small vocabulary so that repeats, matches and empty sequences all occur.
    return [list(rng.integers(0, vocab, rng.integers(0, max_len + 1))) for _ in range(n)]


def test_random_batched_matches_numpy():
    rng = np.random.default_rng(0)
    n, ta, tb = 50, 9, 7
    xs, ys = _random_seqs(rng, n, ta, 4), _random_seqs(rng, n, tb, 4)
    a, a_len = _pad(xs, ta)
    b, b_len = _pad(ys, tb)

    out, out_len = jax.jit(jax.vmap(dedup_consecutive))(a, a_len)
    lev = jax.jit(jax.vmap(levenshtein))(a, a_len, b, b_len)
    cost = rng.random((n, ta, tb)).astype(np.float32) * 5
    d = jax.jit(jax.vmap(dtw))(cost, a_len, b_len)
    for i in range(n):
        want = dedup_consecutive_np(xs[i])
        assert int(out_len[i]) == len(want)
        assert out[i].tolist() == want + [-1] * (ta - len(want))
        assert int(lev[i]) == levenshtein_np(xs[i], ys[i])
        want_d = dtw_np(cost[i, :len(xs[i]), :len(ys[i])])
        if np.isinf(want_d):
            assert np.isinf(float(d[i]))
        else:
            assert float(d[i]) == pytest.approx(want_d, rel=1e-5)
    assert len({int(v) for v in lev}) > 3  # the cases are not degenerate


def test_padding_values_change_nothing():
    rng = np.random.default_rng(1)
    n, ta, tb = 50, 8, 8
    xs, ys = _random_seqs(rng, n, ta, 5), _random_seqs(rng, n, tb, 5)
    a1, a_len = _pad(xs, ta, -1)
    b1, b_len = _pad(ys, tb, -1)
    a2, b2 = a1.copy(), b1.copy()
    pad_a = np.arange(ta)[None] >= a_len[:, None]
    pad_b = np.arange(tb)[None] >= b_len[:, None]
    a2[pad_a] = rng.integers(0, 5, pad_a.sum())  # padding that looks like real symbols
    b2[pad_b] = rng.integers(0, 5, pad_b.sum())
    assert (a1 != a2).any()
    cost1 = rng.random((n, ta, tb)).astype(np.float32)
    cost2 = cost1.copy()
    outside = pad_a[:, :, None] | pad_b[:, None, :]
    cost2[outside] = rng.choice([0.0, 1e6, np.inf, np.nan], outside.sum())

    dedup = jax.jit(jax.vmap(dedup_consecutive))
    lev = jax.jit(jax.vmap(levenshtein))
    d = jax.jit(jax.vmap(dtw))
    np.testing.assert_array_equal(dedup(a1, a_len)[0], dedup(a2, a_len)[0])
    np.testing.assert_array_equal(lev(a1, a_len, b1, b_len), lev(a2, a_len, b2, b_len))
    np.testing.assert_array_equal(d(cost1, a_len, b_len), d(cost2, a_len, b_len))
