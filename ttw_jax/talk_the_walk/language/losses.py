"""Objectives for Talk The Walk with natural language.

All are `loss_fn(params, batch, rng[, *consts]) -> (loss, metrics)` with means over the global
batch (the data-parallel step in `ttw_jax/core/train/data_parallel.py` jits them over a data mesh).
- `tourist_loss`: teacher-forced cross-entropy of the tourist's utterance tokens.
- `guide_loss`: location cross-entropy of the guide, with a fixed T or a sampled T trained by
  REINFORCE (reward -CE, baseline the batch-mean reward).
- `tourist_pg_loss`: the tourist samples utterances, a frozen guide (a const) localizes from them,
  and the tourist is trained by REINFORCE on the guide's reward.
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import optax

from ttw_jax.talk_the_walk.language.guide import NLGuide
from ttw_jax.talk_the_walk.language.tourist import (BOS, EOS, PAD, TOURIST, NLTourist,
                                                    masked_token_sum, sample_decode,
                                                    token_log_probs)

T_MODES = ("fixed", "predict")
PG_REWARDS = ("ce", "correct")


def tourist_token_stats(apply_fn: Callable, params, batch: dict) -> dict:
    """Per utterance: summed token cross-entropy `ce` (B,), correctly predicted tokens `correct`
    (B,) and the number of target tokens `tokens` (B,), under teacher forcing.

    batch: obs (B, S+1, K), actions (B, S), num_moves (B,), utterance (B, L) (words, EOS, PAD),
    utterance_len (B,) incl. EOS.
    """
    target = batch["utterance"]
    inputs = jnp.concatenate([jnp.full_like(target[:, :1], BOS), target[:, :-1]], axis=1)
    logits = apply_fn({"params": params}, batch["obs"], batch["actions"], batch["num_moves"], inputs)
    valid = (jnp.arange(target.shape[1])[None] < batch["utterance_len"][:, None]).astype(jnp.float32)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, target)
    return {"ce": jnp.sum(ce * valid, 1), "correct": jnp.sum((jnp.argmax(logits, -1) == target) * valid, 1),
            "tokens": valid.sum(1)}


def tourist_loss(apply_fn: Callable) -> Callable:
    """Teacher-forced token cross-entropy for a `Tourist` apply function (batch as in
    `tourist_token_stats`); the loss is the mean over all valid tokens of the batch.
    metrics (scalars): loss, ce (= loss), token_accuracy, perplexity.
    """
    def loss_fn(params, batch, rng):
        del rng
        stats = tourist_token_stats(apply_fn, params, batch)
        count = jnp.maximum(stats["tokens"].sum(), 1.0)
        loss = stats["ce"].sum() / count
        acc = stats["correct"].sum() / count
        return loss, {"loss": loss, "ce": loss, "token_accuracy": acc, "perplexity": jnp.exp(loss)}

    return loss_fn


def choose_T(out: dict, batch: dict, T_mode: str, rng: jax.Array | None = None) -> jax.Array | None:
    """(B,) int32 steps for a guide output: 'fixed' -> batch['T'] (None, i.e. T_max, when absent);
    'predict' -> sampled from softmax(T_logits) with `rng`, or the argmax when rng is None."""
    if T_mode == "fixed":
        return None if batch.get("T") is None else jnp.asarray(batch["T"], jnp.int32)
    if T_mode != "predict":
        raise ValueError(f"unknown T_mode {T_mode!r}; expected one of {T_MODES}")
    logits = jax.lax.stop_gradient(out["T_logits"])
    if rng is None:
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)
    return jax.random.categorical(rng, logits).astype(jnp.int32)


def logits_at_T(out: dict, T: jax.Array | None) -> jax.Array:
    """The guide output's location logits (B, 16) at T (B,) steps (None: its own `logits`)."""
    if T is None:
        return out["logits"]
    return jnp.take_along_axis(out["logits_all"], T[:, None, None], axis=1)[:, 0]


def guide_loss(apply_fn: Callable, T_mode: str = "fixed", T_weight: float = 1.0) -> Callable:
    """Location cross-entropy for an `NLGuide` apply function.

    batch: message (B, L), message_len (B,), landmarks (B, 4, 4, K), target (B,) cell index
    (+ T (B,) for T_mode 'fixed'; T_max when absent). For 'predict', T ~ softmax(T_logits) (rng);
    the cross-entropy is taken at that T and the T head gets the REINFORCE loss
    -mean((r - mean(r)) * log p(T)), r = -CE (no gradient), weighted by `T_weight`.
    metrics (scalars): loss, ce, accuracy, mean_T (+ T_loss for 'predict').
    """
    if T_mode not in T_MODES:
        raise ValueError(f"unknown T_mode {T_mode!r}; expected one of {T_MODES}")

    def loss_fn(params, batch, rng):
        out = apply_fn({"params": params}, batch["message"], batch["message_len"], batch["landmarks"],
                       T=batch.get("T") if T_mode == "fixed" else None)
        T = choose_T(out, batch, T_mode, rng if T_mode == "predict" else None)
        logits = logits_at_T(out, T)
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, batch["target"])
        loss = ce.mean()
        t_max = out["T_logits"].shape[-1] - 1
        mean_T = jnp.mean(T) if T is not None else jnp.asarray(t_max, jnp.float32)
        metrics = {"ce": ce.mean(), "accuracy": jnp.mean(jnp.argmax(logits, -1) == batch["target"]),
                   "mean_T": mean_T.astype(jnp.float32)}
        if T_mode == "predict":
            reward = jax.lax.stop_gradient(-ce)
            advantage = reward - reward.mean()
            log_p_T = jnp.take_along_axis(jax.nn.log_softmax(out["T_logits"], -1), T[:, None], 1)[:, 0]
            T_loss = -jnp.mean(advantage * log_p_T)  # descent raises p(T) where CE is below the mean
            loss = loss + T_weight * T_loss
            metrics["T_loss"] = T_loss
        metrics["loss"] = loss
        return loss, metrics

    return loss_fn


def utterance_message(tokens: jax.Array, lengths: jax.Array, prefix: jax.Array | None = None,
                      prefix_len: jax.Array | None = None):
    """The guide's message for decoded utterances: [prefix words] + TOURIST + words (EOS dropped).

    tokens (B, L) / lengths (B,) as returned by the tourist's decoders; prefix (B, P) with
    prefix_len (B,) are earlier context utterances (speaker tokens included). Returns
    message (B, P + L + 1) int32 (0-padded) and message_len (B,) int32.
    """
    b, length = tokens.shape
    has_eos = jnp.take_along_axis(tokens, jnp.maximum(lengths - 1, 0)[:, None], axis=1)[:, 0] == EOS
    words = jnp.where(tokens == EOS, PAD, tokens)
    utt = jnp.concatenate([jnp.full((b, 1), TOURIST, tokens.dtype), words], axis=1).astype(jnp.int32)
    utt_len = (1 + lengths - has_eos.astype(lengths.dtype)).astype(jnp.int32)
    if prefix is None:
        return utt, utt_len
    prefix_len = jnp.asarray(prefix_len, jnp.int32)
    total = prefix.shape[1] + length + 1
    pos = jnp.arange(total)[None]
    from_utt = jnp.take_along_axis(jnp.pad(utt, ((0, 0), (0, prefix.shape[1]))),
                                   jnp.clip(pos - prefix_len[:, None], 0, total - 1), axis=1)
    from_prefix = jnp.pad(prefix.astype(jnp.int32), ((0, 0), (0, length + 1)))
    message = jnp.where(pos < prefix_len[:, None], from_prefix, from_utt)
    message_len = prefix_len + utt_len
    return jnp.where(pos < message_len[:, None], message, PAD), message_len


def tourist_pg_loss(tourist: NLTourist, guide: NLGuide, max_len: int, temperature: float = 1.0,
                    entropy: float = 0.0, reward: str = "ce") -> Callable:
    """REINFORCE for the tourist against a frozen guide.

    Returns loss_fn(params, batch, rng, guide_params) -> (loss, metrics); pass guide_params as a
    const (`make_train_step(..., num_consts=1)`). The tourist samples utterances (no gradient
    through sampling) with `temperature`; the guide reads [prefix +] TOURIST + words (batch keys
    `prefix`, `prefix_len` optional) at the batch's T (its own argmax T when `T` is absent).
    reward 'ce': -CE of the target cell; 'correct': 1[argmax == target]. Baseline: the batch-mean
    reward. loss = -mean((r - b) * log p(utterance)) - entropy * mean(per-utterance entropy).
    batch: obs, actions, num_moves, landmarks, target (+ T, prefix, prefix_len).
    metrics (scalars): loss, reward, accuracy, ce, length, entropy.
    """
    if reward not in PG_REWARDS:
        raise ValueError(f"unknown reward {reward!r}; expected one of {PG_REWARDS}")

    def loss_fn(params, batch, rng, guide_params):
        walk = (batch["obs"], batch["actions"], batch["num_moves"])
        tokens, lengths = sample_decode(tourist, jax.lax.stop_gradient(params), *walk, rng,
                                        max_len, temperature)
        message, message_len = utterance_message(tokens, lengths, batch.get("prefix"),
                                                 batch.get("prefix_len"))
        out = guide.apply({"params": jax.lax.stop_gradient(guide_params)}, message, message_len,
                          batch["landmarks"], T=batch.get("T"))
        if batch.get("T") is None:
            out = dict(out, logits=logits_at_T(out, choose_T(out, batch, "predict")))
        logits = jax.lax.stop_gradient(out["logits"])
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, batch["target"])
        correct = (jnp.argmax(logits, -1) == batch["target"]).astype(jnp.float32)
        r = -ce if reward == "ce" else correct
        logp_all = token_log_probs(tourist, params, *walk, tokens)
        logp = masked_token_sum(jnp.take_along_axis(logp_all, tokens[..., None], -1)[..., 0], lengths)
        ent = masked_token_sum(-jnp.sum(jnp.exp(logp_all) * logp_all, -1), lengths)
        loss = -jnp.mean((r - r.mean()) * logp) - entropy * ent.mean()
        return loss, {"loss": loss, "reward": r.mean(), "accuracy": correct.mean(), "ce": ce.mean(),
                      "length": jnp.mean(lengths.astype(jnp.float32)), "entropy": ent.mean()}

    return loss_fn
