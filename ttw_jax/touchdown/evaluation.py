"""Touchdown navigation evaluation: batched on-device rollouts, then TC / SPD / SED.

Policies come from factories `(sim, consts, batch) -> (policy, carry)` (`ttw_jax.core.env`) built
inside the jitted rollout, so baselines and models share one code path and compile once per shape.
"""
from __future__ import annotations

import jax
import numpy as np

from ttw_jax.core.chunks import map_in_chunks
from ttw_jax.core.env import PolicyFactory, batched, rollout
from ttw_jax.touchdown import env as td
from ttw_jax.touchdown.metrics import success_weighted_edit_distance, task_completion

EPISODE_KEYS = ("start_pano", "start_heading", "goal", "route", "route_len", "tokens", "token_len",
                "gold", "gold_len")


def baseline_factory(name: str) -> PolicyFactory:
    """The paper's non-learning baselines: 'stop', 'frequent' (always FORWARD), 'random'."""
    policies = {"stop": td.constant_policy(td.STOP), "frequent": td.constant_policy(td.FORWARD),
                "random": td.random_policy}
    if name not in policies:
        raise ValueError(f"unknown baseline {name!r}; choose from {sorted(policies)}")
    return lambda sim, consts, batch: (policies[name], None)


def make_rollout(factory: PolicyFactory, horizon: int):
    """Jitted run(sim, consts, batch, rng) -> dict of per-episode [B] `final`, `tc`, `sed`,
    `num_steps` and `path` [B, horizon + 1]."""
    @jax.jit
    def run(sim, consts, batch, rng):
        policy, carry = factory(sim, consts, batch)
        state = batched(td.reset)(sim, batch["start_pano"], batch["start_heading"])
        final, _, traj = rollout(td.step, sim, state, policy, carry, rng, horizon)
        path, path_len = td.path_of(traj, final)
        tc = task_completion(final.pano, batch["goal"], sim.graph.neighbors)
        sed = success_weighted_edit_distance(path, path_len, batch["route"], batch["route_len"], tc)
        return dict(final=final.pano, tc=tc, sed=sed, num_steps=final.num_steps, path=path)
    return run


def evaluate(run, sim: td.TouchdownSim, consts, episodes: dict, goal_hops: np.ndarray, rng: jax.Array,
             batch_size: int = 256) -> dict:
    """Means of TC, SPD (hops from the final panorama to the goal) and SED over all episodes,
    plus per-episode arrays under 'episodes'. Chunks are padded to `batch_size` (one compile)."""
    n = len(episodes["goal"])
    per = map_in_chunks(lambda batch, key: run(sim, consts, batch, key), episodes, EPISODE_KEYS,
                        batch_size, rng)
    hops = goal_hops[np.arange(n), per["final"]].astype(np.float32)
    per["spd"] = np.where(hops >= 0, hops, np.inf)
    return {"tc": float(per["tc"].mean()), "spd": float(per["spd"].mean()),
            "sed": float(per["sed"].mean()), "episodes": per}
