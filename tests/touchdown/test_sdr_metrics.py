"""SDR metrics, target and loss: hand-computed examples."""
import jax.numpy as jnp
import numpy as np
import pytest

from ttw_jax.touchdown.sdr import metrics as sdr
from ttw_jax.touchdown.sdr.losses import gaussian_target, kl_loss


def test_distances_thresholds_and_consistency_by_hand():
    # The official 100 x 464 feature map: 8 px per feature pixel; gold inside pixel (row 20,
    # col 50), not at its centre (the official evaluation compares pixels, not points).
    h, w = 100, 464
    gold = np.asarray([[(50 + 0.9) / w, (20 + 0.1) / h]] * 5, np.float32)
    pred = np.asarray([[20, 50], [20, 55], [23, 54], [20, 60], [29, 62]])
    d = np.asarray(sdr.distance_px(pred, gold, h, w))
    np.testing.assert_allclose(d, [0.0, 40.0, 40.0, 80.0, 8 * np.sqrt(81 + 144)], rtol=1e-5)
    # Descriptions: A = examples 0, 1; B = 2, 3; C = 4. Correct means strictly within.
    m = sdr.sdr_metrics_np(d, np.asarray(["A", "A", "B", "B", "C"]))
    assert (m["acc_40"], m["acc_80"], m["acc_120"]) == (0.2, 0.6, 0.8)
    assert m["consistency_40"] == 0.0                    # A's second view is 40 px off
    assert m["consistency_80"] == pytest.approx(1 / 3)   # A; B's second view is 80 px off
    assert m["consistency_120"] == pytest.approx(2 / 3)  # A, B; C is 120 px off
    assert m["distance"] == pytest.approx((0 + 40 + 40 + 80 + 120) / 5)
    assert set(m) == set(sdr.NAMES)


def test_scale_follows_the_feature_map_height():
    # A 25 x 116 map: 800 / 25 = 32 px per feature pixel in both axes.
    gold = np.asarray([[0.5 / 116, 0.5 / 25]], np.float32)
    d = np.asarray(sdr.distance_px(np.asarray([[3, 4]]), gold, 25, 116))
    assert float(d[0]) == pytest.approx(32 * 5)
    assert sdr.gold_pixel(np.asarray([[1.0, 1.0]]), 25, 116).tolist() == [[24, 115]]


def test_image_distance_of_points_on_the_official_panorama():
    d = sdr.image_distance_px([[0.0, 0.0], [0.25, 0.5]], [[1.0, 0.0], [0.25, 0.5 + 0.1]])
    np.testing.assert_allclose(d, [3680.0, 80.0])


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
