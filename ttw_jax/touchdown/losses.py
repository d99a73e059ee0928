"""Teacher forcing through the simulator: the log-likelihood of demonstrated Touchdown actions."""
from __future__ import annotations

import jax.numpy as jnp
import optax

from ttw_jax.core.env import batched, rollout
from ttw_jax.touchdown import env as td
from ttw_jax.touchdown.agents import Navigator, navigator_policy


def imitation_loss(model: Navigator, crop: int, horizon: int, convention: str = "centred"):
    """loss_fn(params, batch, rng, sim, features) -> (CE of the gold actions, metrics).

    The CE is averaged over each episode's gold actions, then over episodes (so every episode
    weighs the same and the loss of equal shards averages to the global loss).

    The gold actions drive the simulator inside `lax.scan` while the model predicts each one from
    the state the simulator reaches; steps past `gold_len` are masked out. `convention`: the
    feature table's column convention (`ttw_jax.touchdown.features`).
    """
    def loss_fn(params, batch, rng, sim, features):
        text = model.apply(params, batch["tokens"], batch["token_len"], method=Navigator.encode)
        policy, carry = navigator_policy(model, params, features, sim.graph.yaw, crop, text,
                                         gold=batch["gold"], convention=convention)
        state = batched(td.reset)(sim, batch["start_pano"], batch["start_heading"])
        _, _, traj = rollout(td.step, sim, state, policy, carry, rng, horizon)
        logits = traj.output                                  # [T, B, 4]
        gold = batch["gold"][:, :horizon].T                   # [T, B]
        mask = (jnp.arange(horizon)[:, None] < batch["gold_len"][None]).astype(jnp.float32)
        weight = mask / jnp.maximum(jnp.sum(mask, 0), 1.0)     # each episode counts once
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, gold)
        loss = jnp.mean(jnp.sum(ce * weight, 0))
        acc = jnp.mean(jnp.sum((jnp.argmax(logits, -1) == gold) * weight, 0))
        return loss, {"loss": loss, "action_accuracy": acc}
    return loss_fn
