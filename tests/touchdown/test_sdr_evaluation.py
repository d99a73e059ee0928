"""SDR evaluation on hand-computed cases: the chunked model evaluation and the baselines."""
import jax.numpy as jnp
import numpy as np
import pytest

from ttw_jax.touchdown.sdr.evaluation import baseline_pixels, evaluate

# A 2 x 4 feature map of a 400 px wide image: 100 px per feature pixel. Centres (x, y) in [0, 1]
# of the pixel centres (row 0, col 1), (row 1, col 3) and (row 0, col 2).
CENTERS = np.asarray([[1.5 / 4, 0.5 / 2], [3.5 / 4, 1.5 / 2], [2.5 / 4, 0.5 / 2]], np.float32)


def split(route_id=(0, 1, 1)):
    n = len(CENTERS)
    return {"center": CENTERS, "features": np.zeros((n, 2, 4, 1), np.float16),
            "tokens": np.zeros((n, 3), np.int32), "token_len": np.ones(n, np.int32),
            "route_id": np.asarray(route_id)}


def always_row0_col1(params, tokens, token_len, features):
    """Log-probabilities [B, 2, 4] with their mode at (row 0, col 1) for every example."""
    one_hot = jnp.zeros((len(tokens), 2, 4)).at[:, 0, 1].set(1.0)
    return jnp.log(0.99 * one_hot + 0.01 / 8)


def test_chunked_evaluation_on_a_worked_example():
    # Errors: 0, sqrt(1 + 4) feature px = 223.6 px, 1 feature px = 100 px. Chunks of 2 pad the
    # last chunk with example 0, which must not be counted.
    metrics, probs = evaluate(always_row0_col1, None, split(), batch_size=2, image_width=400,
                              keep_maps=2)
    assert metrics["acc@40"] == pytest.approx(1 / 3)
    assert metrics["acc@80"] == pytest.approx(1 / 3)
    assert metrics["acc@120"] == pytest.approx(2 / 3)
    assert metrics["distance"] == pytest.approx((0 + 100 * 5 ** 0.5 + 100) / 3, rel=1e-5)
    # Description 0 (example 0) is right; description 1 (examples 1, 2) is not.
    assert metrics["consistency"] == pytest.approx(0.5)
    assert probs.shape == (2, 2, 4) and np.allclose(probs.sum((1, 2)), 1.0, atol=1e-5)
    assert np.argmax(probs[1]) == 1


def test_baselines_on_a_worked_example():
    s = split()
    assert baseline_pixels("center", s, s, 0).tolist() == [[1, 2]] * 3
    # Training mean (x, y) = (0.625, 0.625) -> (row 0.75, col 2.0) -> pixel (1, 2).
    train = {"center": np.asarray([[0.375, 0.25], [0.875, 1.0]], np.float32)}
    assert baseline_pixels("average", s, train, 0).tolist() == [[1, 2]] * 3
    rand = baseline_pixels("random", s, train, 3)
    assert rand.shape == (3, 2) and (rand >= 0).all() and (rand[:, 0] < 2).all()
    assert (rand[:, 1] < 4).all()
    np.testing.assert_array_equal(rand, baseline_pixels("random", s, train, 3))


def test_unknown_baseline_is_rejected():
    with pytest.raises(ValueError, match="unknown SDR baseline"):
        baseline_pixels("oracle", {"center": np.zeros((1, 2)),
                                   "features": np.zeros((1, 2, 2, 1))}, {}, 0)
