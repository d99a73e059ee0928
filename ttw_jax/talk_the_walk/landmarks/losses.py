"""Landmark classification objective of the released code: binary cross-entropy with a weight
per (corner, class) from the inverted class frequency of the training corners."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def class_weights(labels, train_labels) -> np.ndarray:
    """(N, C) float32 weights of `labels` (N, C): 1 / n_c where the class is present, 1 / (M - n_c)
    where it is absent, n_c the positives of class c among the M `train_labels` (the released
    `add_weights`, which uses the training counts for validation too). A count of 0 gives weight 0
    (the released code would divide by zero)."""
    train = np.asarray(train_labels, np.float64)
    m, pos = train.shape[0], train.sum(0)
    neg = m - pos
    w_pos = np.divide(1.0, pos, out=np.zeros_like(pos), where=pos > 0)
    w_neg = np.divide(1.0, neg, out=np.zeros_like(neg), where=neg > 0)
    labels = np.asarray(labels) > 0
    return np.where(labels, w_pos, w_neg).astype(np.float32)


def weighted_bce(logits: jax.Array, labels: jax.Array, weights: jax.Array) -> jax.Array:
    """Mean over corners and classes of w * (-y log s(z) - (1 - y) log(1 - s(z))), as torch's
    `BCEWithLogitsLoss(weight=w)`. logits, labels, weights (B, C); returns a scalar."""
    labels = labels.astype(logits.dtype)
    per = -(labels * jax.nn.log_sigmoid(logits) + (1.0 - labels) * jax.nn.log_sigmoid(-logits))
    return jnp.mean(weights * per)
