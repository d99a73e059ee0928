"""Talk The Walk with natural-language messages: generated utterances, guide accuracy, full task.

A generated message is what the guide reads: the `<tourist>` speaker token followed by the words
the tourist decoded (`language.losses.utterance_message`), the format of a one-utterance human message.
Walks with T = 0 are padded to one (unused) move so every tourist program has a move axis.
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.core.chunks import map_in_chunks
from ttw_jax.talk_the_walk.full_task import full_task_episodes, run_full_task
from ttw_jax.talk_the_walk.language import tourist as nl_tourist
from ttw_jax.talk_the_walk.language.losses import choose_T, logits_at_T, utterance_message

DECODES = ("greedy", "sample", "beam")


def pad_walk(obs: jax.Array, actions: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """obs (B, T+1, K), actions (B, T) -> (obs (B, S+1, K), actions (B, S), num_moves (B,)) with
    S = max(T, 1): the tourist's inputs for a T-move walk."""
    b, t = actions.shape
    if t == 0:
        obs = jnp.concatenate([obs, jnp.zeros_like(obs)], axis=1)
        actions = jnp.zeros((b, 1), jnp.int32)
    return obs, actions, jnp.full((b,), t, jnp.int32)


def decode_utterances(tourist, params, obs, actions, num_moves, key, decode: str, max_len: int,
                      beam_size: int = 4, temperature: float = 1.0):
    """The tourist's utterances: tokens (B, max_len) int32 ending in EOS, lengths (B,)."""
    if decode == "greedy":
        return nl_tourist.greedy_decode(tourist, params, obs, actions, num_moves, max_len)
    if decode == "sample":
        return nl_tourist.sample_decode(tourist, params, obs, actions, num_moves, key, max_len,
                                        temperature)
    if decode == "beam":
        return nl_tourist.beam_search(tourist, params, obs, actions, num_moves, max_len, beam_size)
    raise ValueError(f"decode must be one of {DECODES}, got {decode!r}")


def generated_batch(tourist, tourist_params, walks: dict, key: jax.Array, decode: str,
                    max_len: int, beam_size: int = 4, temperature: float = 1.0) -> dict:
    """Guide inputs for walks: message (B, max_len+1), message_len, landmarks, target, T (B,).

    `walks` is a random-walk batch (`ttw_jax.talk_the_walk.walks`: obs (B, T+1, K), actions
    (B, T), landmarks, target), T = its number of moves; or a batch of human trajectories with
    padded obs (B, S+1, K) / actions (B, S) and `num_moves` (B,) (the examples of
    `dialogues.encode_examples`), T = walks['T'] when given, else num_moves."""
    if "num_moves" in walks:
        obs, actions = walks["obs"], walks["actions"]
        num_moves = jnp.asarray(walks["num_moves"], jnp.int32)
        T = jnp.asarray(walks["T"], jnp.int32) if "T" in walks else num_moves
    else:
        obs, actions, num_moves = pad_walk(walks["obs"], walks["actions"])
        T = num_moves
    tokens, lengths = decode_utterances(tourist, tourist_params, obs, actions, num_moves, key,
                                        decode, max_len, beam_size, temperature)
    message, message_len = utterance_message(tokens, lengths)
    return {"message": message, "message_len": message_len, "landmarks": walks["landmarks"],
            "target": walks["target"], "T": T}


def expected_T(T_logits: jax.Array) -> jax.Array:
    """(B,) E[T] = sum_t t * softmax(T_logits)_t of a guide's T head (B, T_max+1)."""
    return jnp.sum(jnp.arange(T_logits.shape[-1]) * jax.nn.softmax(T_logits, axis=-1), axis=-1)


def guide_stats(guide, params, batch: dict, T: jax.Array | None) -> dict:
    """correct (B,) bool: the guide's most likely corner is the target, reading T (B,) steps
    (None: the guide's own most likely T); expected_T (B,): E[T] under its T head."""
    out = guide.apply({"params": params}, batch["message"], batch["message_len"],
                      batch["landmarks"], T=T)
    if T is None:
        T = choose_T(out, batch, "predict")   # no rng: the most likely T
    return {"correct": jnp.argmax(logits_at_T(out, T), -1) == batch["target"],
            "expected_T": expected_T(out["T_logits"])}


def guide_correct(guide, params, batch: dict, T: jax.Array | None) -> jax.Array:
    """(B,) bool: `guide_stats`' correct."""
    return guide_stats(guide, params, batch, T)["correct"]


def nl_predict_fn(tourist, tourist_params, guide, guide_params, decode: str, max_len: int,
                  beam_size: int = 4) -> Callable:
    """predict(obs (E, T+1, K), actions (E, T), landmarks, keys (E,)) -> location logits (E, 16)
    for `ttw_jax.talk_the_walk.full_task.run_full_task(..., message_keys=True)`: the tourist
    describes its last T moves in words, the guide reads them with T steps. Sampled decoding draws
    row e's words from keys[e] alone (the full task passes keys fresh for every episode and step,
    as the released tourist samples anew at every step)."""
    def predict(obs, actions, landmarks, keys):
        walks = {"obs": obs, "actions": actions, "landmarks": landmarks,
                 "target": jnp.zeros(obs.shape[:1], jnp.int32)}
        batch = generated_batch(tourist, tourist_params, walks, keys, decode, max_len, beam_size)
        return guide.apply({"params": guide_params}, batch["message"], batch["message_len"],
                           landmarks, T=batch["T"])["logits"]

    return predict


def evaluate_full_task(tourist, tourist_params, guide, guide_params, tables: dict, T: int,
                       key: jax.Array, *, decode: str, max_len: int, beam_size: int, repeats: int,
                       max_steps: int, max_evals: int, greedy: bool, label: str = "final",
                       orientation_aware: bool = False) -> dict:
    """Algorithm 1 with natural-language messages: {split: `FullTaskResult.summary()`} over
    `repeats` episodes per (window, target) of each table (W, X, Y, K) in `tables`; success is
    judged at the corner `label` names (`run_full_task`), the tourist walks and sees as an
    orientation-aware one with `orientation_aware`."""
    @jax.jit
    def run(tp, gp, k, landmarks, target):
        predict = nl_predict_fn(tourist, tp, guide, gp, decode, max_len, beam_size)
        return run_full_task(k, predict, landmarks, target, T, max_steps, max_evals, greedy,
                             label, orientation_aware, message_keys=True)

    out = {}
    for i, (split, table) in enumerate(tables.items()):
        landmarks, target = full_task_episodes(table, repeats)
        out[split] = run(tourist_params, guide_params, jax.random.fold_in(key, i),
                         jnp.asarray(landmarks), jnp.asarray(target)).summary()
    return out


def accuracy(correct: np.ndarray) -> float:
    return float(np.mean(correct)) if len(correct) else float("nan")


def make_guide_evaluator(guide, batch_size: int, predict_T: bool):
    """evaluate(params, examples) -> {accuracy, expected_T} over host examples (message,
    message_len, landmarks, target and, unless `predict_T`, T) in chunks of `batch_size`;
    expected_T is the mean over examples of E[T] under the guide's T head."""
    @jax.jit
    def stats(params, batch):
        return guide_stats(guide, params, batch, None if predict_T else batch["T"])

    def evaluate(params, examples) -> dict:
        out = map_in_chunks(lambda b, _: stats(params, b), examples,
                            ("message", "message_len", "landmarks", "target", "T"), batch_size,
                            jax.random.key(0))
        return {"accuracy": accuracy(out["correct"]),
                "expected_T": float(out["expected_T"].mean())}

    return evaluate


@functools.partial(jax.jit, static_argnames=("tourist", "decode", "max_len", "beam_size"))
def _generated_batch(tourist, tp, batch, key, decode, max_len, beam_size):
    return generated_batch(tourist, tp, batch, key, decode, max_len, beam_size)


def make_generator(tourist, max_len: int, batch_size: int, beam_size: int):
    """generate(tourist_params, walks, decode, key, beam_size=beam_size) -> host guide inputs
    (utterances of at most `max_len` words) for host `walks` (random walks, or human trajectories
    with num_moves and T), decoded in chunks of `batch_size`; one compiled program per decoding
    mode and beam size."""
    default_beam = beam_size

    def generate(tp, walks: dict, decode: str, key, beam_size: int | None = None) -> dict:
        beam = default_beam if beam_size is None else beam_size
        gen = lambda b, k: _generated_batch(tourist, tp, b, k, decode, max_len, beam)
        return map_in_chunks(gen, walks,
                             ("obs", "actions", "num_moves", "T", "landmarks", "target"),
                             batch_size, key)

    return generate


def evaluate_generated(evaluate, generate, gparams, tparams, walks: dict, key,
                       beam_sizes: Sequence[int]) -> dict:
    """{split: {decode: accuracy}} of a generated-utterance guide (`evaluate`, from
    `make_guide_evaluator`) reading the utterances `generate` (`make_generator`) makes for
    `walks` of each split, and `beam_sizes`: {split: {beam size: accuracy}} for each of
    `beam_sizes` (Table 12)."""
    result = {s: {d: evaluate(gparams, generate(tparams, w, d, key))["accuracy"]
                  for d in DECODES} for s, w in walks.items()}
    result["beam_sizes"] = {s: {str(k): evaluate(gparams, generate(
        tparams, w, "beam", key, beam_size=k))["accuracy"] for k in beam_sizes}
        for s, w in walks.items()}
    return result
