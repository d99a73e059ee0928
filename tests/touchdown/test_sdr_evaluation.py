"""SDR evaluation on hand-computed cases at the official scale (800 x 3,680 px panoramas): the
chunked model evaluation and the baselines."""
import jax.numpy as jnp
import numpy as np
import pytest

from ttw_jax.touchdown.sdr.evaluation import (baseline_metrics, baseline_points, evaluate,
                                              groups_of)

# A 10 x 46 feature map: 800 / 10 = 80 px per feature pixel. Gold centres (x, y) in [0, 1] inside
# the feature pixels (row 0, col 1), (row 1, col 3) and (row 0, col 2).
H, W = 10, 46
CENTERS = np.asarray([[1.3 / W, 0.6 / H], [3.9 / W, 1.1 / H], [2.5 / W, 0.2 / H]], np.float32)


def split(route_id=(0, 1, 1), text=("a", "b", "b")):
    n = len(CENTERS)
    return {"center": CENTERS, "features": np.zeros((n, H, W, 1), np.float16),
            "tokens": np.zeros((n, 3), np.int32), "token_len": np.ones(n, np.int32),
            "route_id": np.asarray(route_id), "text": list(text)}


def always_row0_col1(params, tokens, token_len, features):
    """Log-probabilities [B, H, W] with their mode at (row 0, col 1) for every example."""
    one_hot = jnp.zeros((len(tokens), H, W)).at[:, 0, 1].set(1.0)
    return jnp.log(0.99 * one_hot + 0.01 / (H * W))


def test_chunked_evaluation_on_a_worked_example():
    # Gold pixels (0, 1), (1, 3), (0, 2): errors 0, sqrt(1 + 4) = 2.236 and 1 feature pixel,
    # i.e. 0, 178.9 and 80 px. 80 px is not within 80 (the official d < t). Chunks of 2 pad the
    # last chunk with example 0, which must not be counted.
    metrics, probs, dists, pixels = evaluate(always_row0_col1, None, split(), batch_size=2, keep=[2, 1])
    assert metrics["acc_40"] == pytest.approx(1 / 3)
    assert metrics["acc_80"] == pytest.approx(1 / 3)
    assert metrics["acc_120"] == pytest.approx(2 / 3)
    assert metrics["distance"] == pytest.approx((0 + 80 * 5 ** 0.5 + 80) / 3, rel=1e-5)
    # Description "a" (example 0) is right at every threshold; "b" (examples 1, 2) never is:
    # example 1 is 178.9 px off.
    assert metrics["consistency_40"] == metrics["consistency_80"] == pytest.approx(0.5)
    assert metrics["consistency_120"] == pytest.approx(0.5)
    np.testing.assert_allclose(dists, [0, 80 * 5 ** 0.5, 80], rtol=1e-5)
    assert probs.shape == (2, H, W) and np.allclose(probs.sum((1, 2)), 1.0, atol=1e-5)
    assert np.argmax(probs[0]) == np.argmax(probs[1]) == 1


def test_consistency_groups_by_description_text():
    # Examples 0 and 2 share a text: 0 px and 80 px off -> the text is consistent at 120 only.
    metrics, _, _, _ = evaluate(always_row0_col1, None, split(route_id=(0, 1, 2), text="aba"),
                             batch_size=3)
    assert metrics["consistency_80"] == 0.0 and metrics["consistency_120"] == pytest.approx(0.5)
    assert groups_of({"route_id": np.arange(2)}).tolist() == [0, 1]     # no texts: route ids


def test_baselines_on_a_worked_example():
    s = split()
    np.testing.assert_allclose(baseline_points("center", s, s, 0), [[0.5, 0.5]] * 3)
    train = {"center": np.asarray([[0.25, 0.5], [0.75, 0.7]], np.float32)}
    np.testing.assert_allclose(baseline_points("average", s, train, 0), [[0.5, 0.6]] * 3,
                               rtol=1e-6)
    rand = baseline_points("random", s, train, 3)
    assert rand.shape == (3, 2) and (rand >= 0).all() and (rand <= 1).all()
    np.testing.assert_array_equal(rand, baseline_points("random", s, train, 3))
    # The centre of the panorama (1840, 400) px against gold at (1840 + 40, 400 - 30) px: 50 px;
    # and at (1840, 400 + 120): 120 px, not within 120.
    gold = {"center": np.asarray([[0.5 + 40 / 3680, 0.5 - 30 / 800], [0.5, 0.5 + 120 / 800]]),
            "route_id": np.array([0, 1])}
    m = baseline_metrics("center", gold, gold, 0)
    assert m["distance"] == pytest.approx(85.0)
    assert (m["acc_40"], m["acc_80"], m["acc_120"]) == (0.0, 0.5, 0.5)
    assert (m["consistency_40"], m["consistency_80"], m["consistency_120"]) == (0.0, 0.5, 0.5)


def test_unknown_baseline_is_rejected():
    with pytest.raises(ValueError, match="unknown SDR baseline"):
        baseline_points("oracle", {"center": np.zeros((1, 2))}, {}, 0)
