"""SDR evaluation: the model's metrics over a split in fixed-size chunks, and the non-learning
baselines (a random point, the centre, the training set's mean location), at the official
evaluation's scale (`metrics`)."""
from __future__ import annotations

from typing import Sequence

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


def groups_of(split: dict) -> np.ndarray:
    """What consistency groups by: the descriptions' texts (the official evaluation's unique
    sentences), else their route ids."""
    return np.asarray(split["text"] if "text" in split else split["route_id"])


def evaluate(predict, params, split: dict, batch_size: int,
             keep: Sequence[int] = ()) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    """(SDR metrics of a split, the predicted distributions [k, H, W] of the examples `keep`,
    every example's distance in px [E], every example's predicted feature pixel (row, col)
    [E, 2])."""
    n, h, w = len(split["center"]), *split["features"].shape[1:3]
    keep = np.asarray(keep, int)
    dists, pixels, maps = [], [], np.zeros((len(keep), h, w), np.float32)
    for start in range(0, n, batch_size):
        idx = np.arange(start, start + batch_size)
        idx = np.where(idx < n, idx, 0)   # pad the last chunk: one compiled shape
        lp = predict(params, split["tokens"][idx], split["token_len"][idx], split["features"][idx])
        rc = sdr_metrics.predicted_pixel(lp)
        d = sdr_metrics.distance_px(rc, split["center"][idx], h, w)
        dists.append(np.asarray(d)[:min(batch_size, n - start)])
        pixels.append(np.asarray(rc)[:min(batch_size, n - start)])
        here = (keep >= start) & (keep < start + batch_size)
        if here.any():
            maps[here] = np.exp(np.asarray(lp)[keep[here] - start])
    dists = np.concatenate(dists)
    return (sdr_metrics.sdr_metrics_np(dists, groups_of(split)), maps, dists,
            np.concatenate(pixels).astype(np.int32))


def baseline_points(name: str, split: dict, train: dict, seed: int) -> np.ndarray:
    """Normalised (x, y) [E, 2] predicted by a non-learning baseline (the official
    `predict_baselines`): a uniformly random point, the centre, or the training set's mean
    location."""
    n = len(split["center"])
    if name == "random":
        return np.random.default_rng(seed).uniform(0.0, 1.0, (n, 2))
    if name == "center":
        return np.full((n, 2), 0.5)
    if name == "average":
        return np.tile(np.asarray(train["center"], np.float64).mean(0), (n, 1))
    raise ValueError(f"unknown SDR baseline {name!r}; choose from {BASELINES}")


def baseline_metrics(name: str, split: dict, train: dict, seed: int) -> dict:
    """SDR metrics of a non-learning baseline, measured on the panorama in image pixels."""
    d = sdr_metrics.image_distance_px(baseline_points(name, split, train, seed), split["center"])
    return sdr_metrics.sdr_metrics_np(d, groups_of(split))
