"""Objectives for localization with emergent communication.

Continuous messages: cross-entropy of the guide's location logits, backpropagated into both agents.
Discrete messages: the guide minimises its cross-entropy given sampled bits; the tourist is trained
with REINFORCE, reward r = -(guide's cross-entropy), minus a learned linear baseline b fitted by MSE.
`reduction="sum"` sums the cross-entropy and the REINFORCE term over the batch (the released code's
`loss.sum().backward()`; the baseline's MSE stays a mean there too) instead of averaging them.
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import optax


REDUCTIONS = ("mean", "sum")


def localization_loss(apply_fn: Callable, discrete: bool, baseline_weight: float = 1.0,
                      pg_weight: float = 1.0, reduction: str = "mean") -> Callable:
    """Returns loss_fn(params, batch, rng) -> (loss, metrics) for a `Localizer` apply function.

    batch: obs (B, T+1, K), actions (B, T), landmarks (B, 4, 4, K), target (B,) flat cell index.
    metrics (all scalars): loss, ce, accuracy; and pg_loss, baseline_loss, reward for discrete.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    reduce = jnp.mean if reduction == "mean" else jnp.sum

    def loss_fn(params, batch, rng):
        out = apply_fn({"params": params}, batch["obs"], batch["actions"], batch["landmarks"],
                       rngs={"comm": rng})
        ce = optax.softmax_cross_entropy_with_integer_labels(out["logits"], batch["target"])
        acc = jnp.mean(jnp.argmax(out["logits"], -1) == batch["target"])
        metrics = {"ce": ce.mean(), "accuracy": acc}
        loss = reduce(ce)
        if discrete:
            reward = jax.lax.stop_gradient(-ce)
            advantage = reward - jax.lax.stop_gradient(out["baseline"])
            logp = 0.0
            for z, bits in zip(jax.tree_util.tree_leaves(out["message"]),
                               jax.tree_util.tree_leaves(out["bits"])):
                logp = logp + jnp.sum(bits * jax.nn.log_sigmoid(z) + (1 - bits) * jax.nn.log_sigmoid(-z), -1)
            pg_loss = -jnp.mean(advantage * logp)
            baseline_loss = jnp.mean((out["baseline"] - reward) ** 2)
            loss = loss + pg_weight * -reduce(advantage * logp) + baseline_weight * baseline_loss
            metrics.update(pg_loss=pg_loss, baseline_loss=baseline_loss, reward=reward.mean())
        metrics["loss"] = loss
        return loss, metrics

    return loss_fn
