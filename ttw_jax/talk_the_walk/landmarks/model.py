"""Landmark classifier (Talk The Walk, Appendix F): which landmark types stand at a corner, given
the features of its 4 views."""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


class LandmarkClassifier(nn.Module):
    """Per-view Dense + ReLU, max (or mean) pooling over the views, Dense to one logit per class.

    __call__(views (B, V, D), train) -> logits (B, num_classes); dropout (rate `dropout`, rng
    stream 'dropout') on the pooled vector when `train`.
    """
    hidden: int = 128
    num_classes: int = 9
    pool: str = "max"  # max | mean
    dropout: float = 0.0

    @nn.compact
    def __call__(self, views: jax.Array, train: bool = False) -> jax.Array:
        h = nn.relu(nn.Dense(self.hidden, name="view")(views))
        if self.pool == "max":
            h = jnp.max(h, axis=-2)
        elif self.pool == "mean":
            h = jnp.mean(h, axis=-2)
        else:
            raise ValueError(f"pool must be 'max' or 'mean', got {self.pool!r}")
        h = nn.Dropout(self.dropout, deterministic=not train)(h)
        return nn.Dense(self.num_classes, name="out")(h)
