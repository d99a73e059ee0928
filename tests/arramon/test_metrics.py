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


def test_ctc_worked_examples_under_both_rules():
    final = np.zeros((4, 2), np.float32)                    # agent at (0, 0.525, 0)
    target = np.array([[0, 0.525, 4], [3, 0.525, 0], [0, 0.525, 2], [0, 0.525, 2]], np.float32)
    picked = np.array([False, False, True, True])           # the object picked is the target
    auto = np.array([False, True, False, True])             # picked by the step-limit fallback
    want = {
        # 0: 4 away after picking the wrong object: within 5 and 7 under both rules.
        # 1: exactly 3 away, completed by the fallback: below 5 and 7 by distance, nothing
        #    under the strict rule. 2: its own pick-up of the target, 2 away: everything.
        # 3: 2 away, the fallback took the target: CTC-0 never counts a fallback; CTC-3/5/7 by
        #    distance, nothing under the strict rule.
        "distance": {"ctc0": [0, 0, 1, 0], "ctc3": [0, 0, 1, 1], "ctc5": [1, 1, 1, 1],
                     "ctc7": [1, 1, 1, 1]},
        "strict": {"ctc0": [0, 0, 1, 0], "ctc3": [0, 0, 1, 0], "ctc5": [1, 0, 1, 0],
                   "ctc7": [1, 0, 1, 0]},
    }
    for rule, expected in want.items():
        got = am.ctc(final, target, picked, auto, rule=rule)
        for k, v in expected.items():
            np.testing.assert_array_equal(np.asarray(got[k]), v, err_msg=f"{rule} {k}")
            assert [am.ctc_np(final[i], target[i], picked[i], auto[i], rule=rule)[k]
                    for i in range(4)] == v, (rule, k)
    assert set(am.ctc(final, target, picked, auto)) == {"ctc0", "ctc3", "ctc5", "ctc7"}
    # The default is the paper's distance rule, and the target's height counts: (0, 0.06, 0)
    # is 0.465 away, inside 3, while CTC-0 is the agent's own pick-up of it.
    assert am.ctc_np((0, 0), (0, 0.06, 0), False, False) == {
        "ctc0": 0.0, "ctc3": 1.0, "ctc5": 1.0, "ctc7": 1.0}
    with pytest.raises(ValueError, match="unknown CTC rule 'loose'; choose from"):
        am.ctc(final, target, picked, auto, rule="loose")


def test_collected_is_ctc3_or_also_ctc0_under_the_strict_rule():
    ctcs = {"ctc0": np.array([0, 1, 1, 0.0]), "ctc3": np.array([0, 0, 1, 1.0])}
    np.testing.assert_array_equal(np.asarray(am.collected(ctcs)), [0, 0, 1, 1])
    # A pick-up of the target at the rectangle's far corner (3.04 ahead) is CTC-0 but not CTC-3.
    np.testing.assert_array_equal(np.asarray(am.collected(ctcs, "strict")), [0, 1, 1, 1])


def test_placement_worked_examples_under_both_rules():
    placed = np.array([[2, 1, 3], [3, 2, 3], [3, 2, 3], [3, 2, 3], [0, 1, 0]])
    target = np.array([[3, 2, 3], [3, 2, 3], [3, 2, 3], [3, 2, 3], [4, 2, 3]])
    collected = np.array([True, True, False, True, True])
    auto = np.array([False, False, False, True, False])     # row 3: placed by the fallback
    # D = 1 + 1 + 0 = 2 -> rPOD 1/5; exact -> 1 and PTC 1; not collected -> 0; D = 4 + 1 + 3 = 8
    # -> 1/65. The fallback's placement: 0 under the strict rule; by distance the official
    # evaluation reads it as (100, 100, 100), D = 97 + 98 + 97 = 292 -> 1 / (1 + 292^2).
    want = {"distance": ([0.2, 1.0, 0.0, 1 / (1 + 292 ** 2), 1 / 65], [0, 1, 0, 0, 0]),
            "strict": ([0.2, 1.0, 0.0, 0.0, 1 / 65], [0, 1, 0, 0, 0])}
    for rule, (rpod, ptc) in want.items():
        got = am.placement(placed, target, collected, auto, rule)
        np.testing.assert_allclose(np.asarray(got["rpod"]), rpod, rtol=1e-6, err_msg=rule)
        np.testing.assert_array_equal(np.asarray(got["ptc"]), ptc, err_msg=rule)
        for i in range(5):
            ctcs = {"ctc0": 0.0, "ctc3": float(collected[i])}
            got_np = am.placement_np(placed[i], target[i], ctcs, auto[i], rule)
            assert got_np == pytest.approx({"rpod": rpod[i], "ptc": ptc[i]}), (rule, i)
    # Under the strict rule CTC-0 alone also counts as collected.
    assert am.placement_np([3, 2, 3], [3, 2, 3], {"ctc0": 1.0, "ctc3": 0.0}, False,
                           "strict") == {"rpod": 1.0, "ptc": 1.0}
    assert am.placement_np([3, 2, 3], [3, 2, 3], {"ctc0": 1.0, "ctc3": 0.0}, False) == {
        "rpod": 0.0, "ptc": 0.0}


@pytest.mark.parametrize("rule", am.CTC_RULES)
def test_batched_metrics_match_numpy_twins(rule):
    rng = np.random.default_rng(0)
    b, t, r = 32, 9, 7
    path = rng.normal(size=(b, t, 2)).cumsum(1).astype(np.float32)
    ref = rng.normal(size=(b, r, 2)).cumsum(1).astype(np.float32)
    plen, rlen = rng.integers(1, t + 1, b), rng.integers(1, r + 1, b)
    got = np.asarray(am.ndtw(path, plen, ref, rlen))
    want = [am.ndtw_np(path[i, :plen[i]], ref[i, :rlen[i]]) for i in range(b)]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    final = rng.uniform(-6, 6, (b, 2)).astype(np.float32)
    target = rng.uniform(-6, 6, (b, 3)).astype(np.float32)
    picked, auto = rng.random(b) < 0.5, rng.random(b) < 0.3
    ctcs = am.ctc(final, target, picked, auto, rule=rule)
    per_np = [am.ctc_np(final[i], target[i], picked[i], auto[i], rule=rule) for i in range(b)]
    for i in range(b):
        for k, v in per_np[i].items():
            assert float(ctcs[k][i]) == v, (i, k)
    placed, tgt = rng.integers(0, 4, (b, 3)), rng.integers(0, 4, (b, 3))
    place_auto = rng.random(b) < 0.3
    got = am.placement(placed, tgt, am.collected(ctcs, rule), place_auto, rule)
    for i in range(b):
        for k, v in am.placement_np(placed[i], tgt[i], per_np[i], place_auto[i], rule).items():
            assert float(got[k][i]) == pytest.approx(v), (i, k)
