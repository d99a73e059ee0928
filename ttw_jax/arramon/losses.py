"""Teacher forcing through the ArraMon simulator: cross-entropy of the demonstrated actions of
both phases (Kim et al. 2020, section 6)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from ttw_jax.arramon import env
from ttw_jax.arramon.episodes import assembly_start, navigation_start
from ttw_jax.arramon.model import PhaseAgent, assembly_policy, navigation_policy
from ttw_jax.core.env import rollout


def _imitation(logits: jax.Array, gold: jax.Array, length: jax.Array):
    """(mean CE, mean accuracy): each episode's mean over its gold steps, then the batch mean
    (so equal shards average to the global loss). logits [T, B, 4], gold [B, T]."""
    gold = gold.T
    mask = (jnp.arange(gold.shape[0])[:, None] < length[None]).astype(jnp.float32)
    weight = mask / jnp.maximum(jnp.sum(mask, 0), 1.0)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, gold)
    acc = (jnp.argmax(logits, -1) == gold).astype(jnp.float32)
    return jnp.mean(jnp.sum(ce * weight, 0)), jnp.mean(jnp.sum(acc * weight, 0))


def imitation_loss(nav_model: PhaseAgent, assem_model: PhaseAgent, num_types: int):
    """loss_fn(params, batch, rng, walkable) -> (mean of navigation and assembly CE, metrics);
    params = {"navi": ..., "assem": ...}. The gold actions drive the simulator inside
    `lax.scan` while each module predicts them from the views the simulator produces; the
    horizon of each phase is the batch's padded action length."""
    def loss_fn(params, batch, rng, walkable):
        k_nav, k_assem = jax.random.split(rng)
        k_words, k_roll = jax.random.split(k_nav)
        policy, carry = navigation_policy(nav_model, params["navi"], batch,
                                          batch["navi_actions"], k_words)
        _, _, nav = rollout(env.step_navigation, walkable, navigation_start(walkable, batch),
                            policy, carry, k_roll, batch["navi_actions"].shape[1])
        k_words, k_roll = jax.random.split(k_assem)
        policy, carry = assembly_policy(assem_model, params["assem"], batch, num_types,
                                        batch["assem_actions"], k_words)
        _, _, assem = rollout(env.step_assembly, env.ASSEMBLY, assembly_start(env.ASSEMBLY, batch),
                              policy, carry, k_roll, batch["assem_actions"].shape[1])
        nav_ce, nav_acc = _imitation(nav.output, batch["navi_actions"], batch["navi_len"])
        assem_ce, assem_acc = _imitation(assem.output, batch["assem_actions"],
                                         batch["assem_len"])
        loss = (nav_ce + assem_ce) / 2      # the average of the two modules' losses (App. E.2)
        return loss, {"loss": loss, "navi_ce": nav_ce, "assem_ce": assem_ce,
                      "navi_accuracy": nav_acc, "assem_accuracy": assem_acc}
    return loss_fn
