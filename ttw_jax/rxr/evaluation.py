"""R2R / RxR evaluation: batched on-device rollouts, then PL / NE / SR / OSR / SPL / nDTW / SDTW,
overall and per language, for agents and the simple baselines of Ku et al. (2020), Table 4.

Policies come from factories `(graph, consts, batch) -> (policy, carry)` (`ttw_jax.core.env`)
built inside the jitted rollout, so baselines and models share one code path and compile once per
shape.
"""
from __future__ import annotations

import math
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.core.chunks import map_in_chunks
from ttw_jax.core.env import PolicyFactory, batched, rollout
from ttw_jax.rxr import env as mp
from ttw_jax.rxr.metrics import path_metrics

METRICS = ("pl", "ne", "sr", "spl", "ndtw", "sdtw")
EPISODE_KEYS = ("start", "heading", "path", "path_len", "gold", "tokens", "token_len",
                "text_features")
BASELINES = ("random_walk", "random_heading", "first_step")


def _wrap(angle):
    return jnp.mod(angle + math.pi, 2 * math.pi) - math.pi


def baseline_factory(name: str, num_steps: int) -> PolicyFactory:
    """Non-learning baselines that move `num_steps` times, then STOP:
    'random_walk' (a uniformly random neighbour each step), 'random_heading' (turn to a uniformly
    random heading, then go straight), 'first_step' (the reference path's first step, then go
    straight). Going straight = moving to the neighbour whose edge heading is closest to the
    agent's heading (which becomes that edge's heading)."""
    if name not in BASELINES:
        raise ValueError(f"unknown baseline {name!r}; choose from {BASELINES}")

    def factory(graph, consts, batch):
        def policy(carry, state, t, key):
            nb = graph.neighbors[state.node]
            valid = nb >= 0
            k_head, k_walk = jax.random.split(key)
            if name == "random_walk":
                score = jnp.where(valid, jax.random.uniform(k_walk, valid.shape), -1.0)
            else:
                random_heading = jax.random.uniform(k_head, state.heading.shape,
                                                    maxval=2 * math.pi)
                target = jnp.where(t == 0, random_heading, state.heading)
                score = jnp.where(valid, -jnp.abs(_wrap(graph.headings[state.node]
                                                        - target[:, None])), -jnp.inf)
            action = jnp.argmax(score, -1).astype(jnp.int32) + 1
            if name == "first_step":
                action = jnp.where(t == 0, batch["gold"][:, 0], action)
            action = jnp.where((t >= num_steps) | ~jnp.any(valid, -1), mp.STOP, action)
            return carry, action, None

        return policy, None
    return factory


def make_rollout(factory: PolicyFactory, horizon: int, success_radius: float = 3.0):
    """Jitted run(graph, geodesic, consts, batch, rng) -> per-episode [B] metrics (`METRICS`,
    `osr`), `num_steps`, `final`."""
    @jax.jit
    def run(graph, geodesic, consts, batch, rng):
        policy, carry = factory(graph, consts, batch)
        state = batched(mp.reset)(graph, batch["start"], batch["heading"])
        final, _, traj = rollout(mp.step, graph, state, policy, carry, rng, horizon)
        path, length = mp.path_of(traj, final)
        out = path_metrics(path, length, batch["path"], batch["path_len"], geodesic,
                           success_radius)
        return dict(out, num_steps=final.num_steps, final=final.node)
    return run


def evaluate(run, graph, geodesic, consts, episodes: dict, rng: jax.Array, batch_size: int = 256,
             languages: Sequence[str] = ()) -> dict:
    """Means of every metric over all episodes, `per_language` means (when `languages` names the
    episodes' language ids) and the per-episode arrays under 'episodes'. Chunks are padded to
    `batch_size` (one compile)."""
    per = map_in_chunks(lambda batch, key: run(graph, geodesic, consts, batch, key), episodes,
                        EPISODE_KEYS, batch_size, rng)
    result = {k: float(per[k].mean()) for k in (*METRICS, "osr")}
    if languages:
        result["per_language"] = {
            lang: {k: float(per[k][episodes["language"] == i].mean()) for k in METRICS}
            for i, lang in enumerate(languages) if np.any(episodes["language"] == i)}
    result["episodes"] = per
    return result
