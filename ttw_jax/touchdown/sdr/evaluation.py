"""SDR evaluation: the model's metrics over a split in fixed-size chunks, and the non-learning
baselines (a random pixel, the centre pixel, the training set's mean location)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.touchdown.sdr import metrics as sdr_metrics

BASELINES = ("random", "center", "average")


def make_predictor(model):
    """predict(params, tokens, token_len, features) -> log-probabilities [B, H, W], jitted."""
    @jax.jit
    def predict(params, tokens, token_len, features):
        return model.apply(params, tokens, token_len, features.astype(jnp.float32))
    return predict


def evaluate(predict, params, split: dict, batch_size: int, image_width: int,
             keep_maps: int = 0) -> tuple[dict, np.ndarray]:
    """SDR metrics of a split and the first `keep_maps` predicted distributions [k, H, W]."""
    n, h, w = len(split["center"]), *split["features"].shape[1:3]
    dists, maps = [], []
    for start in range(0, n, batch_size):
        idx = np.arange(start, start + batch_size)
        idx = np.where(idx < n, idx, 0)   # pad the last chunk: one compiled shape
        lp = predict(params, split["tokens"][idx], split["token_len"][idx], split["features"][idx])
        d = sdr_metrics.distance_px(sdr_metrics.predicted_pixel(lp), split["center"][idx], h, w,
                                    image_width)
        dists.append(np.asarray(d)[:min(batch_size, n - start)])
        if len(maps) * batch_size < keep_maps:
            maps.append(np.exp(np.asarray(lp)))
    probs = np.concatenate(maps)[:keep_maps] if maps else np.zeros((0, h, w))
    return sdr_metrics.sdr_metrics_np(np.concatenate(dists), split["route_id"]), probs


def baseline_pixels(name: str, split: dict, train: dict, seed: int) -> np.ndarray:
    """(row, col) [E, 2] predicted by a non-learning baseline: a uniformly random pixel, the
    centre pixel, or the pixel of the training set's mean location."""
    n, h, w = len(split["center"]), *split["features"].shape[1:3]
    if name == "random":
        rng = np.random.default_rng(seed)
        return np.stack([rng.integers(0, h, n), rng.integers(0, w, n)], -1)
    if name == "center":
        return np.tile([[h // 2, w // 2]], (n, 1))
    if name == "average":
        rc = np.asarray(sdr_metrics.center_to_pixel(train["center"].mean(0), h, w))
        return np.tile(np.clip(np.round(rc), 0, [h - 1, w - 1]).astype(int), (n, 1))
    raise ValueError(f"unknown SDR baseline {name!r}; choose from {BASELINES}")
