"""ArraMon metrics: hand-computed worked examples, and the batched versions against the NumPy
twins."""
import math

import numpy as np
import pytest

from ttw_jax.arramon import metrics as am


def test_ndtw_worked_examples():
    ref = [(0.0, 0.0), (0.0, 1.0), (0.0, 2.0)]
    assert am.ndtw_np(ref, ref) == pytest.approx(1.0)
    # Costs |p_i - r_j|: p0 -> [0, 1, 2], p1 -> [1, 0, 1]; the DTW table's corner is 1, so
    # nDTW = exp(-1 / (3 * 3)).
    path = [(0.0, 0.0), (0.0, 1.0)]
    assert am.ndtw_np(path, ref) == pytest.approx(math.exp(-1 / 9))
    got = am.ndtw(np.array([[[0, 0], [0, 1], [0, 1]]], np.float32), np.array([2]),
                  np.array([ref], np.float32), np.array([3]))
    assert float(got[0]) == pytest.approx(math.exp(-1 / 9), rel=1e-6)
    # A path 6 units off a 2-point reference everywhere: DTW = 12, nDTW = exp(-12 / 6).
    far = am.ndtw(np.array([[[6, 0], [6, 1]]], np.float32), np.array([2]),
                  np.array([[[0, 0], [0, 1]]], np.float32), np.array([2]))
    assert float(far[0]) == pytest.approx(math.exp(-2.0), rel=1e-6)


def test_ctc_worked_examples():
    final = np.zeros((4, 2), np.float32)                    # agent at (0, 0.525, 0)
    target = np.array([[0, 0.525, 4], [3, 0.525, 0], [0, 0.525, 2], [0, 0.525, 2]], np.float32)
    picked = np.array([False, False, True, True])
    auto = np.array([False, False, False, True])
    got = {k: np.asarray(v) for k, v in am.ctc(final, target, picked, auto).items()}
    # distance 4: within 5 and 7, not 3; exactly 3: strictly below 5 and 7 only;
    # distance 2 with the right object: all; the fallback's pick scores nothing.
    np.testing.assert_array_equal(got["ctc0"], [0, 0, 1, 0])
    np.testing.assert_array_equal(got["ctc3"], [0, 0, 1, 0])
    np.testing.assert_array_equal(got["ctc5"], [1, 1, 1, 0])
    np.testing.assert_array_equal(got["ctc7"], [1, 1, 1, 0])
    # The object's height counts: (0, 0.06, 0) is 0.465 away, so inside 3 but CTC-0 is the
    # pick-up itself.
    assert am.ctc_np((0, 0), (0, 0.06, 0), False, False) == {
        "ctc0": 0.0, "ctc3": 1.0, "ctc5": 1.0, "ctc7": 1.0}
    # Without the fallback rule (the paper's numbers, see the README) distance alone counts.
    loose = am.ctc(final, target, picked, auto, strict=False)
    np.testing.assert_array_equal(np.asarray(loose["ctc5"]), [1, 1, 1, 1])


def test_placement_worked_examples():
    placed = np.array([[2, 1, 3], [3, 2, 3], [3, 2, 3], [3, 2, 3], [0, 1, 0]])
    target = np.array([[3, 2, 3], [3, 2, 3], [3, 2, 3], [3, 2, 3], [4, 2, 3]])
    collected = np.array([1, 1, 0, 1, 1], np.float32)
    auto = np.array([False, False, False, True, False])
    got = {k: np.asarray(v) for k, v in am.placement(placed, target, collected, auto).items()}
    # D = 2 -> 1 / 5; exact -> 1; not collected or by the fallback -> 0; D = 4 + 1 + 3 = 8.
    np.testing.assert_allclose(got["rpod"], [0.2, 1.0, 0.0, 0.0, 1 / 65], rtol=1e-6)
    np.testing.assert_array_equal(got["ptc"], [0, 1, 0, 0, 0])


def test_batched_metrics_match_numpy_twins():
    rng = np.random.default_rng(0)
    b, t, r = 16, 9, 7
    path = rng.normal(size=(b, t, 2)).cumsum(1).astype(np.float32)
    ref = rng.normal(size=(b, r, 2)).cumsum(1).astype(np.float32)
    plen, rlen = rng.integers(1, t + 1, b), rng.integers(1, r + 1, b)
    got = np.asarray(am.ndtw(path, plen, ref, rlen))
    want = [am.ndtw_np(path[i, :plen[i]], ref[i, :rlen[i]]) for i in range(b)]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    final = rng.uniform(-6, 6, (b, 2)).astype(np.float32)
    target = rng.uniform(-6, 6, (b, 3)).astype(np.float32)
    picked, auto = rng.random(b) < 0.5, rng.random(b) < 0.3
    got = am.ctc(final, target, picked, auto)
    for i in range(b):
        for k, v in am.ctc_np(final[i], target[i], picked[i], auto[i]).items():
            assert float(got[k][i]) == v, (i, k)
    placed, tgt = rng.integers(0, 4, (b, 3)), rng.integers(0, 4, (b, 3))
    got = am.placement(placed, tgt, picked.astype(np.float32), auto)
    for i in range(b):
        for k, v in am.placement_np(placed[i], tgt[i], picked[i], auto[i]).items():
            assert float(got[k][i]) == pytest.approx(v), (i, k)
