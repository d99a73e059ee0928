"""Teacher forcing through the ArraMon simulator: cross-entropy of the demonstrated actions of
both phases (Kim et al. 2020, section 6)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from ttw_jax.arramon import env
from ttw_jax.arramon.model import PhaseAgent, encode_words, phase_policy
from ttw_jax.arramon.views import assembly_view, navigation_view


def _imitation(logits: jax.Array, gold: jax.Array, length: jax.Array):
    """(mean CE, mean accuracy): each episode's mean over its gold steps, then the batch mean
    (so equal shards average to the global loss). logits [T, B, 4], gold [B, T]."""
    gold = gold.T
    mask = (jnp.arange(gold.shape[0])[:, None] < length[None]).astype(jnp.float32)
    weight = mask / jnp.maximum(jnp.sum(mask, 0), 1.0)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, gold)
    acc = (jnp.argmax(logits, -1) == gold).astype(jnp.float32)
    return jnp.mean(jnp.sum(ce * weight, 0)), jnp.mean(jnp.sum(acc * weight, 0))


def navigation_start(batch: dict) -> env.NavState:
    """The navigation state a turn-level `batch` (keys of `episodes.turn_examples`)
    starts from."""
    return env.reset_navigation(batch["start"], batch["psi0"], batch["objects"],
                                batch["present"], batch["map_index"], batch["heading"])


def navigation_rollout(model: PhaseAgent, params, walkable: env.Walkable, batch: dict,
                       rng: jax.Array, horizon: int, gold: jax.Array | None = None,
                       train: bool = False):
    """Runs the navigation phase of turn-level `batch` (keys of
    `episodes.turn_examples`); returns (final state, trajectory)."""
    k_words, k_roll = jax.random.split(rng)
    words = encode_words(model, params, batch["navi_tokens"], batch["navi_token_len"],
                         k_words if train else None)
    policy, carry = phase_policy(
        model, params, words, lambda s: navigation_view(s, batch["object_attrs"],
                                                        batch["object_mask"]),
        gold=gold, train=train)
    final, _, traj = env.navigate(walkable, navigation_start(batch), policy, carry, k_roll,
                                  horizon)
    return final, traj


def assembly_rollout(model: PhaseAgent, params, batch: dict, rng: jax.Array, horizon: int,
                     num_types: int, gold: jax.Array | None = None, train: bool = False):
    """Runs the assembly phase of turn-level `batch`; returns (final state, trajectory)."""
    k_words, k_roll = jax.random.split(rng)
    words = encode_words(model, params, batch["assem_tokens"], batch["assem_token_len"],
                         k_words if train else None)
    policy, carry = phase_policy(
        model, params, words, lambda s: assembly_view(s, batch["grid_attrs"], num_types),
        gold=gold, train=train)
    final, _, traj = env.assemble(env.reset_assembly(batch["heights"]), policy, carry, k_roll,
                                  horizon)
    return final, traj


def imitation_loss(nav_model: PhaseAgent, assem_model: PhaseAgent, num_types: int):
    """loss_fn(params, batch, rng, walkable) -> (navigation CE + assembly CE, metrics);
    params = {"navi": ..., "assem": ...}. The gold actions drive the simulator inside
    `lax.scan` while each module predicts them from the views the simulator produces; the
    horizon of each phase is the batch's padded action length."""
    def loss_fn(params, batch, rng, walkable):
        k_nav, k_assem = jax.random.split(rng)
        _, nav = navigation_rollout(nav_model, params["navi"], walkable, batch, k_nav,
                                    batch["navi_actions"].shape[1], batch["navi_actions"], True)
        _, assem = assembly_rollout(assem_model, params["assem"], batch, k_assem,
                                    batch["assem_actions"].shape[1], num_types,
                                    batch["assem_actions"], True)
        nav_ce, nav_acc = _imitation(nav["output"], batch["navi_actions"], batch["navi_len"])
        assem_ce, assem_acc = _imitation(assem["output"], batch["assem_actions"],
                                         batch["assem_len"])
        loss = nav_ce + assem_ce
        return loss, {"loss": loss, "navi_ce": nav_ce, "assem_ce": assem_ce,
                      "navi_accuracy": nav_acc, "assem_accuracy": assem_acc}
    return loss_fn
