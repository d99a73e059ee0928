"""Touchdown SDR metrics at the official evaluation's scale (Chen et al. 2019, section 3.2 and
App. D; the official `sdr/predict.py` and `sdr/train.py`): accuracy within 40 / 80 / 120 px,
consistency at each of the three thresholds, and the mean distance error in px.

The official evaluation measures on a panorama of `IMAGE_HEIGHT` x `IMAGE_WIDTH` = 800 x 3,680 px:
- A model's prediction is the mode of its distribution over feature pixels; it is compared with
  the feature pixel that holds the gold location ("in the same scaling as the predicted
  probability distribution", App. D), and the feature-pixel distance is converted to image
  pixels at `IMAGE_HEIGHT / H` px per feature pixel (8 for the official 100 x 464 maps, whose
  pixels the official code takes as square: 8 px in both axes).
- The non-learning baselines predict a point of the image and are measured in image pixels
  directly (`image_distance_px`).
- A prediction is correct when its distance is strictly below the threshold (`d < t`).
- Consistency at t counts a unique description as correct only if every one of its panoramas is
  correct at t; the groups are the descriptions' texts (or any ids standing for them).
Horizontal distance does not wrap around the panorama (as in the official code).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

THRESHOLDS_PX = (40, 80, 120)
IMAGE_HEIGHT, IMAGE_WIDTH = 800, 3680        # px, the official SDR evaluation's panorama
NAMES = tuple(f"{m}_{t}" for m in ("acc", "consistency") for t in THRESHOLDS_PX) + ("distance",)


def center_to_pixel(center, height: int, width: int):
    """Continuous (row, col) feature-pixel coordinates [..., 2] of normalised (x, y) centres
    (pixel centres at integers)."""
    center = jnp.asarray(center, jnp.float32)
    return jnp.stack([center[..., 1] * height - 0.5, center[..., 0] * width - 0.5], -1)


def gold_pixel(center, height: int, width: int):
    """(row, col) [..., 2] int32 of the feature pixel holding each normalised (x, y) centre."""
    center = jnp.asarray(center, jnp.float32)
    row = jnp.clip(jnp.floor(center[..., 1] * height), 0, height - 1)
    col = jnp.clip(jnp.floor(center[..., 0] * width), 0, width - 1)
    return jnp.stack([row, col], -1).astype(jnp.int32)


def px_per_feature(height: int) -> float:
    """Image pixels per feature pixel of a map `height` feature pixels tall (8 for 100)."""
    return IMAGE_HEIGHT / height


def predicted_pixel(log_probs) -> jnp.ndarray:
    """(row, col) [B, 2] int32 of the mode of each [H, W] distribution (first on ties)."""
    b, h, w = log_probs.shape
    flat = jnp.argmax(log_probs.reshape(b, h * w), axis=-1)
    return jnp.stack([flat // w, flat % w], -1).astype(jnp.int32)


def distance_px(pred_rc, gold_center, height: int, width: int):
    """Distances [B] in image pixels between predicted feature pixels pred_rc [B, 2] and the
    feature pixels holding the gold centres [B, 2] (normalised x, y)."""
    gold = gold_pixel(gold_center, height, width).astype(jnp.float32)
    d = jnp.linalg.norm(jnp.asarray(pred_rc, jnp.float32) - gold, axis=-1)
    return d * px_per_feature(height)


def image_distance_px(pred_xy, gold_center) -> np.ndarray:
    """Distances [B] in image pixels between predicted points and gold centres, both normalised
    (x, y) [B, 2] on the IMAGE_WIDTH x IMAGE_HEIGHT panorama (the official baselines)."""
    scale = np.array([IMAGE_WIDTH, IMAGE_HEIGHT], np.float64)
    diff = (np.asarray(pred_xy, np.float64) - np.asarray(gold_center, np.float64)) * scale
    return np.linalg.norm(diff, axis=-1)


def sdr_metrics_np(distances: np.ndarray, groups, thresholds=THRESHOLDS_PX) -> dict:
    """`acc_{t}` (mean of d < t) and `consistency_{t}` (share of groups, e.g. description texts,
    whose every example has d < t) for each threshold, and `distance` (mean error in px)."""
    distances = np.asarray(distances, np.float64)
    _, inverse = np.unique(np.asarray(groups), return_inverse=True)
    num_groups = inverse.max() + 1 if len(inverse) else 0
    correct = {t: distances < t for t in thresholds}
    out = {f"acc_{t}": float(np.mean(c)) if len(c) else 0.0 for t, c in correct.items()}
    for t, c in correct.items():
        all_correct = np.ones(num_groups, bool)
        np.logical_and.at(all_correct, inverse, c)
        out[f"consistency_{t}"] = float(all_correct.mean()) if num_groups else 0.0
    out["distance"] = float(distances.mean()) if len(distances) else 0.0
    return out
