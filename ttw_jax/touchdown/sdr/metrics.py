"""Touchdown SDR metrics: accuracy within 40 / 80 / 120 px, consistency, mean distance error.

Predictions are the mode of the predicted distribution over feature pixels. Distances are measured
between pixel centres in feature pixels and converted to panorama-image pixels by
`px_per_feature = image_width / W` (Touchdown panoramas are 3,000 px wide), so the thresholds keep
their meaning at any feature resolution. Horizontal distance does not wrap around the panorama.
Consistency counts a description as correct only if every panorama (main/pre/post view) of it is
within the 80 px threshold.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

THRESHOLDS_PX = (40, 80, 120)
TOUCHDOWN_IMAGE_WIDTH = 3000


def center_to_pixel(center, height: int, width: int):
    """Continuous (row, col) feature-pixel coordinates [..., 2] of normalised (x, y) centres."""
    center = jnp.asarray(center, jnp.float32)
    return jnp.stack([center[..., 1] * height - 0.5, center[..., 0] * width - 0.5], -1)


def predicted_pixel(log_probs) -> jnp.ndarray:
    """(row, col) [B, 2] int32 of the mode of each [H, W] distribution (first on ties)."""
    b, h, w = log_probs.shape
    flat = jnp.argmax(log_probs.reshape(b, h * w), axis=-1)
    return jnp.stack([flat // w, flat % w], -1).astype(jnp.int32)


def distance_px(pred_rc, gold_center, height: int, width: int,
                image_width: int = TOUCHDOWN_IMAGE_WIDTH):
    """Distances [B] in image pixels between predicted pixels and gold centres."""
    gold = center_to_pixel(gold_center, height, width)
    d = jnp.linalg.norm(jnp.asarray(pred_rc, jnp.float32) - gold, axis=-1)
    return d * (image_width / width)


def sdr_metrics_np(distances: np.ndarray, groups: np.ndarray,
                   thresholds=THRESHOLDS_PX, consistency_px: int = 80) -> dict:
    """Means over examples: `acc@{t}` for each threshold, `consistency` over the groups
    (descriptions), `distance` (mean error in px)."""
    distances = np.asarray(distances, np.float64)
    out = {f"acc@{t}": float(np.mean(distances <= t)) for t in thresholds}
    correct = distances <= consistency_px
    _, inverse = np.unique(np.asarray(groups), return_inverse=True)
    all_correct = np.ones(inverse.max() + 1 if len(inverse) else 0, bool)
    np.logical_and.at(all_correct, inverse, correct)
    out["consistency"] = float(all_correct.mean()) if len(all_correct) else 0.0
    out["distance"] = float(distances.mean()) if len(distances) else 0.0
    return out
