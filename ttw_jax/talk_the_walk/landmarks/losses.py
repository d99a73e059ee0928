"""Landmark classification objective: binary cross-entropy with positives weighted by inverse
class frequency (Talk The Walk, Appendix F)."""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np


def pos_weights(labels, max_weight: float = 100.0) -> np.ndarray:
    """(C,) float32 positive weights `(N - n_c) / n_c` from training labels (N, C), clipped to
    [1 / max_weight, max_weight]; a class without positives (n_c = 0) gets `max_weight`."""
    labels = np.asarray(labels, float)
    n, n_c = labels.shape[0], labels.sum(0)
    w = np.divide(n - n_c, n_c, out=np.full_like(n_c, max_weight), where=n_c > 0)
    return np.clip(w, 1.0 / max_weight, max_weight).astype(np.float32)


def weighted_bce(logits: jax.Array, labels: jax.Array, pos_weight: jax.Array) -> jax.Array:
    """Mean over corners and classes of -(w_c y log s(z) + (1 - y) log(1 - s(z))), s the
    sigmoid. logits, labels (N, C); pos_weight (C,). Returns a scalar."""
    labels = labels.astype(logits.dtype)
    per = -(pos_weight * labels * jax.nn.log_sigmoid(logits)
            + (1.0 - labels) * jax.nn.log_sigmoid(-logits))
    return jnp.mean(per)


def landmark_loss(apply_fn: Callable, pos_weight) -> Callable:
    """Returns loss_fn(params, batch, rng) -> (loss, metrics) for a `LandmarkClassifier` apply.

    batch: features (B, 4, D), labels (B, C). metrics: loss (scalar).
    """
    pos_weight = jnp.asarray(pos_weight, jnp.float32)

    def loss_fn(params, batch, rng):
        logits = apply_fn({"params": params}, batch["features"], train=True, rngs={"dropout": rng})
        loss = weighted_bce(logits, batch["labels"], pos_weight)
        return loss, {"loss": loss}
    return loss_fn
