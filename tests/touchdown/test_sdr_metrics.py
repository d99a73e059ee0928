"""SDR metrics, target and loss: hand-computed examples."""
import jax.numpy as jnp
import numpy as np
import pytest

from ttw_jax.touchdown.sdr import metrics as sdr
from ttw_jax.touchdown.sdr.losses import gaussian_target, kl_loss


def test_distances_thresholds_and_consistency_by_hand():
    # H=10, W=30, a 3,000 px panorama: one feature pixel is 100 image pixels.
    h, w = 10, 30
    gold = np.asarray([[(5 + 0.5) / w, (2 + 0.5) / h]] * 4, np.float32)   # pixel (row 2, col 5)
    pred = np.asarray([[2, 5], [2, 6], [3, 6], [2, 4]])
    d = np.asarray(sdr.distance_px(pred, gold, h, w, image_width=3000))
    np.testing.assert_allclose(d, [0.0, 100.0, 100 * np.sqrt(2), 100.0], rtol=1e-5)
    # Descriptions: A = examples 0, 1; B = 2; C = 3.
    m = sdr.sdr_metrics_np(d, np.asarray([7, 7, 8, 9]))
    assert m["acc@40"] == 0.25 and m["acc@80"] == 0.25 and m["acc@120"] == 0.75
    assert m["consistency"] == 0.0                     # nobody has every view within 80 px
    m = sdr.sdr_metrics_np(np.asarray([10.0, 70.0, 90.0]), np.asarray([1, 1, 2]))
    assert m["consistency"] == 0.5 and m["distance"] == pytest.approx(170 / 3)


def test_predicted_pixel_is_the_mode():
    lp = jnp.log(jnp.full((1, 3, 4), 1e-3).at[0, 2, 1].set(0.5))
    assert sdr.predicted_pixel(lp).tolist() == [[2, 1]]


def test_gaussian_target_and_kl():
    h, w = 6, 8
    center = jnp.asarray([[(3 + 0.5) / w, (1 + 0.5) / h]])
    t = gaussian_target(center, h, w, sigma=1.0)
    assert float(t.sum()) == pytest.approx(1.0, abs=1e-6)
    assert np.unravel_index(int(jnp.argmax(t)), (h, w)) == (1, 3)
    # Neighbours one pixel away carry exp(-1/2) of the peak, diagonal ones exp(-1).
    assert float(t[0, 1, 4] / t[0, 1, 3]) == pytest.approx(np.exp(-0.5), rel=1e-5)
    assert float(t[0, 2, 4] / t[0, 1, 3]) == pytest.approx(np.exp(-1.0), rel=1e-5)
    assert float(kl_loss(t, jnp.log(t))[0]) == pytest.approx(0.0, abs=1e-5)
    uniform = jnp.full((1, h, w), -np.log(h * w))
    entropy = -float(jnp.sum(t * jnp.log(t)))
    assert float(kl_loss(t, uniform)[0]) == pytest.approx(np.log(h * w) - entropy, rel=1e-5)
