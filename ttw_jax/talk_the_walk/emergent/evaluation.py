"""Evaluation of emergent-communication localizers: exact accuracy over enumerated walks, and the
full task (Algorithm 1) with the localizer's messages."""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.core.train import data_parallel as dp
from ttw_jax.talk_the_walk.emergent.model import Localizer
from ttw_jax.talk_the_walk.full_task import full_task_episodes, run_full_task


FULL_TASK_SLOTS = 256   # episodes played at a time (the results do not depend on it)


def make_evaluator(model: Localizer, mesh, chunk_size: int, greedy: bool, seed: int = 0):
    """Returns evaluate(params, examples) -> accuracy over all examples (numpy dict from
    `walks.enumerate_walks`), computed in padded chunks sharded over the mesh. Sampled discrete
    messages (`greedy=False`) draw their bits from `fold_in(key(seed), first row of the chunk)`:
    the same examples get the same bits in every evaluation."""
    key = jax.random.key(seed)
    chunk = max(mesh.size, chunk_size // mesh.size * mesh.size)

    @jax.jit
    def correct(params, batch, weight, key):
        out = model.apply({"params": params}, batch["obs"], batch["actions"], batch["landmarks"],
                          greedy=greedy, rngs={"comm": key})
        return jnp.sum((jnp.argmax(out["logits"], -1) == batch["target"]) * weight)

    def evaluate(params, examples: dict) -> float:
        n = len(examples["target"])
        total = 0.0
        for start in range(0, n, chunk):
            part = {k: v[start:start + chunk] for k, v in examples.items()}
            m = len(part["target"])
            pad = lambda x: np.pad(x, [(0, chunk - m)] + [(0, 0)] * (x.ndim - 1))
            batch = dp.shard_global({k: pad(v) for k, v in part.items()}, dp.batch_sharded(mesh))
            weight = dp.shard_global(pad(np.ones(m, np.float32)), dp.batch_sharded(mesh))
            total += float(correct(params, batch, weight, jax.random.fold_in(key, start)))
        return total / n

    return evaluate


def make_predict_fn(model: Localizer, params, greedy_messages: bool) -> Callable:
    """predict(obs, actions, landmarks, keys) -> location logits (S, 16) for `run_full_task`
    (`message_keys=True`): sampled bits (`greedy_messages=False`) are drawn from each slot's own
    key, fresh at every step of every episode, as the released code samples them anew."""
    def apply(obs, actions, landmarks, key):
        return model.apply({"params": params}, obs, actions, landmarks, greedy=greedy_messages,
                           rngs={"comm": key})["logits"]

    def predict(obs, actions, landmarks, keys):
        if greedy_messages:         # the most likely bits: no randomness
            return apply(obs, actions, landmarks, keys[0])
        one = lambda o, a, lm, k: apply(o[None], a[None], lm[None], k)[0]
        return jax.vmap(one)(obs, actions, landmarks, keys)
    return predict


def evaluate_full_task(model: Localizer, params, table: np.ndarray, key: jax.Array, *, T: int,
                       repeats: int, max_steps: int, max_evals: int, greedy: bool,
                       greedy_messages: bool, label: str = "final",
                       orientation_aware: bool = False) -> dict:
    """Algorithm 1 over `repeats` episodes per (window, target) of `table` (W, X, Y, K): the
    `FullTaskResult.summary()` dict (success rate, mean steps, mean evaluations)."""
    landmarks, target = full_task_episodes(table, repeats)
    predict = make_predict_fn(model, params, greedy_messages)
    run = jax.jit(lambda k, lm, tg: run_full_task(k, predict, lm, tg, T, max_steps, max_evals,
                                                  greedy, label, orientation_aware,
                                                  slots=min(len(tg), FULL_TASK_SLOTS),
                                                  message_keys=True))
    return run(key, jnp.asarray(landmarks), jnp.asarray(target)).summary()
