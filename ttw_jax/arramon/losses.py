"""Imitation through the ArraMon simulator: cross-entropy of the demonstrated actions of both
phases (teacher forcing, Kim et al. 2020, section 6), or for navigation optionally of the
student-forcing labels along the agent's own partly sampled path (`student_prob` > 0: the
demonstration while the agent is on it, `ttw_jax.arramon.expert` after it left it). The two
modules train on the mean of their losses (one update per batch), or as the official
`main_nosim.py` does, each on its own loss with its own clipping, per turn
(`per_module_updates`)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from ttw_jax.arramon import env
from ttw_jax.arramon.episodes import assembly_start, navigation_start
from ttw_jax.arramon.expert import batch_expert
from ttw_jax.arramon.model import (PhaseAgent, assembly_policy, navigation_policy,
                                   navigation_student_policy, teacher_forced_logits)
from ttw_jax.core.env import rollout


def _per_episode(logits: jax.Array, labels: jax.Array, mask: jax.Array):
    """(CE [B], accuracy [B]): each episode's mean over its steps in mask [T, B]; logits
    [T, B, 4], labels [T, B]."""
    mask = mask.astype(jnp.float32)
    weight = mask / jnp.maximum(jnp.sum(mask, 0), 1.0)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    acc = (jnp.argmax(logits, -1) == labels).astype(jnp.float32)
    return jnp.sum(ce * weight, 0), jnp.sum(acc * weight, 0)


def _masked_imitation(logits: jax.Array, labels: jax.Array, mask: jax.Array):
    """(mean CE, mean accuracy): `_per_episode`, then the batch mean (so equal shards average
    to the global loss)."""
    ce, acc = _per_episode(logits, labels, mask)
    return jnp.mean(ce), jnp.mean(acc)


def _gold_mask(gold: jax.Array, length: jax.Array):
    """(labels [T, B], mask [T, B]) of the first length [B] steps of gold [B, T]."""
    gold = gold.T
    return gold, jnp.arange(gold.shape[0])[:, None] < length[None]


def _imitation(logits: jax.Array, gold: jax.Array, length: jax.Array):
    """`_masked_imitation` over the first length [B] steps of gold [B, T]."""
    return _masked_imitation(logits, *_gold_mask(gold, length))


def imitation_loss(nav_model: PhaseAgent, assem_model: PhaseAgent, num_types: int,
                   student_prob: float = 0.0, nav_horizon: int = 0, perceive: tuple | None = None):
    """loss_fn(params, batch, rng, walkable) -> (mean of navigation and assembly CE, metrics);
    params = {"navi": ..., "assem": ...}. The gold actions drive the simulator inside
    `lax.scan` while each module predicts them from the views the simulator produces; the
    horizon of each phase is the batch's padded action length.

    With `student_prob` > 0 navigation is student-forced instead (`model.student_policy`): each
    step executes the module's own sample with that probability, else the label (the
    demonstration while the agent is on it, the expert's action after it left it), over
    `nav_horizon` steps (0: the padded action length); the loss covers every step taken before
    the phase ended. Assembly stays teacher-forced. `perceive`: the (navigation, assembly)
    view builders of `render.perception`, else the modules' own."""
    if not 0.0 <= student_prob <= 1.0:
        raise ValueError(f"student_prob must be in [0, 1], got {student_prob}")
    see_nav, see_assem = perceive or (None, None)

    def navigation(params, batch, k_nav, walkable):
        k_words, k_roll = jax.random.split(k_nav)
        start = navigation_start(walkable, batch)
        if student_prob == 0.0:
            policy, carry = navigation_policy(nav_model, params, batch, batch["navi_actions"],
                                              k_words, see_nav)
            _, _, nav = rollout(env.step_navigation, walkable, start, policy, carry, k_roll,
                                batch["navi_actions"].shape[1])
            return _imitation(nav.output, batch["navi_actions"], batch["navi_len"])
        policy, carry = navigation_student_policy(
            nav_model, params, batch, batch_expert(walkable, batch), student_prob, k_words,
            see_nav)
        _, _, nav = rollout(env.step_navigation, walkable, start, policy, carry, k_roll,
                            nav_horizon or batch["navi_actions"].shape[1])
        logits, labels = nav.output
        return _masked_imitation(logits, labels, ~nav.state.done)

    def loss_fn(params, batch, rng, walkable):
        k_nav, k_assem = jax.random.split(rng)
        nav_ce, nav_acc = navigation(params["navi"], batch, k_nav, walkable)
        k_words, k_roll = jax.random.split(k_assem)
        policy, carry = assembly_policy(assem_model, params["assem"], batch, num_types,
                                        batch["assem_actions"], k_words, see_assem)
        _, _, assem = rollout(env.step_assembly, env.ASSEMBLY, assembly_start(env.ASSEMBLY, batch),
                              policy, carry, k_roll, batch["assem_actions"].shape[1])
        assem_ce, assem_acc = _imitation(assem.output, batch["assem_actions"],
                                         batch["assem_len"])
        loss = (nav_ce + assem_ce) / 2      # the average of the two modules' losses (App. E.2)
        return loss, {"loss": loss, "navi_ce": nav_ce, "assem_ce": assem_ce,
                      "navi_accuracy": nav_acc, "assem_accuracy": assem_acc}
    return loss_fn


def feature_imitation_loss(nav_model: PhaseAgent, assem_model: PhaseAgent):
    """loss_fn(params, batch, rng) -> (mean of navigation and assembly CE, metrics) of teacher
    forcing over the release's recorded views (`batch["navi_feats"]` / `["assem_feats"]`
    [B, T, 49, 2048], `features.PackedFeatures.turn_rows`), without the simulator: the official
    `main_nosim.py`. Each module's loss is its per-episode mean over the demonstrated steps."""
    def phase(model, params, batch, name, key):
        logits = teacher_forced_logits(model, params, batch[f"{name}_tokens"],
                                       batch[f"{name}_token_len"], batch[f"{name}_feats"],
                                       batch[f"{name}_actions"], key)
        return _imitation(logits, batch[f"{name}_actions"], batch[f"{name}_len"])

    def loss_fn(params, batch, rng):
        k_nav, k_assem = jax.random.split(rng)
        nav_ce, nav_acc = phase(nav_model, params["navi"], batch, "navi", k_nav)
        assem_ce, assem_acc = phase(assem_model, params["assem"], batch, "assem", k_assem)
        loss = (nav_ce + assem_ce) / 2
        return loss, {"loss": loss, "navi_ce": nav_ce, "assem_ce": assem_ce,
                      "navi_accuracy": nav_acc, "assem_accuracy": assem_acc}
    return loss_fn


def teacher_forced_accuracy(nav_model: PhaseAgent, assem_model: PhaseAgent):
    """accuracy(params, batch) -> {navi_tf_accuracy, assem_tf_accuracy, navi_tf_ce,
    assem_tf_ce}: [B] per-episode means over the demonstrated steps of a batch of
    `feature_imitation_loss`'s keys (no dropout)."""
    def phase(model, params, batch, name):
        logits = teacher_forced_logits(model, params, batch[f"{name}_tokens"],
                                       batch[f"{name}_token_len"], batch[f"{name}_feats"],
                                       batch[f"{name}_actions"])
        ce, acc = _per_episode(logits, *_gold_mask(batch[f"{name}_actions"],
                                                  batch[f"{name}_len"]))
        return acc, ce

    @jax.jit
    def accuracy(params, batch):
        out = {}
        for name, model in (("navi", nav_model), ("assem", assem_model)):
            out[f"{name}_tf_accuracy"], out[f"{name}_tf_ce"] = phase(model, params[name], batch,
                                                                     name)
        return out
    return accuracy


MODULES = ("navi", "assem")
TRAIN_UPDATES = ("joint", "per_module_per_turn")


def per_module_updates(loss_fn, tx: optax.GradientTransformation, grad_clip: float):
    """update(params, opt_state, batch, rng, *consts) -> (params, opt_state, metrics): the
    training of one batch of instances in the official `main_nosim.py` (`train_update =
    "per_module_per_turn"`; "joint" is one `tx` update on `loss_fn`'s mean of both modules).

    For turn 1, then turn 2, the navigation module, then the assembly module: the gradient of
    that module's own CE on the turn's rows (`loss_fn`'s metric `{module}_ce`, the other
    module's parameters held), clipped to `grad_clip` (when > 0) by its own global norm, then
    one `tx` update of both modules' parameters with a zero gradient for the other module: four
    updates per batch. The official code steps one Adam over both modules after each backward
    pass, the other module's gradients zeroed by `zero_grad()` (to zeros, not None, in PyTorch
    1.x, which its README names), so the other module moves by its Adam momentum as here;
    PyTorch skips the assembly module in the very first update (no gradient yet), where here
    its update is 0 (its bias correction then counts one update more).

    `batch`: instance rows, every array [B, 2, ...] (axis 1 the turn); `loss_fn(params,
    turn_batch, rng, *consts) -> (loss, metrics)` a joint loss of turn-level rows
    (`imitation_loss`, `feature_imitation_loss`), whose other module XLA then leaves out of each
    gradient. metrics: each module's CE and accuracy (before its update) and gradient norm
    (`{module}_grad_norm`, before clipping), averaged over the two turns, and `loss` the mean of
    the two CEs."""
    clip = optax.clip_by_global_norm(grad_clip) if grad_clip > 0 else optax.identity()

    def module_loss(name):
        def f(module_params, params, batch, rng, *consts):
            _, m = loss_fn({**params, name: module_params}, batch, rng, *consts)
            return m[f"{name}_ce"], {k: m[f"{name}_{k}"] for k in ("ce", "accuracy")}
        return jax.value_and_grad(f, has_aux=True)

    grads = {name: module_loss(name) for name in MODULES}

    def update(params, opt_state, batch, rng, *consts):
        def turn_updates(carry, xs):
            params, opt_state = carry
            turn, key = xs
            out = {}
            for j, name in enumerate(MODULES):
                (_, m), g = grads[name](params[name], params, turn, jax.random.fold_in(key, j),
                                        *consts)
                out.update({f"{name}_{k}": v for k, v in m.items()})
                out[f"{name}_grad_norm"] = optax.global_norm(g)
                g, _ = clip.update(g, clip.init(g))
                full = {k: g if k == name else jax.tree.map(jnp.zeros_like, v)
                        for k, v in params.items()}
                updates, opt_state = tx.update(full, opt_state, params)
                params = optax.apply_updates(params, updates)
            return (params, opt_state), out

        turns = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), batch)      # [2, B, ...]
        (params, opt_state), per_turn = jax.lax.scan(
            turn_updates, (params, opt_state), (turns, jax.random.split(rng, 2)))
        metrics = {k: jnp.mean(v) for k, v in per_turn.items()}
        metrics["loss"] = (metrics["navi_ce"] + metrics["assem_ce"]) / 2
        return params, opt_state, metrics
    return update
