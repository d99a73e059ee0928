"""R2R / RxR evaluation: batched on-device rollouts, then PL / NE / SR / OSR / SPL / nDTW / SDTW,
overall, per language and per annotator, for agents and the simple baselines of Ku et al. (2020), Table 4.

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
from ttw_jax.rxr.records import ANNOTATORS

METRICS = ("pl", "ne", "sr", "spl", "ndtw", "sdtw")
EPISODE_KEYS = ("start", "heading", "path", "path_len", "gold", "tokens", "token_len",
                "text_features")
BASELINES = ("random_walk", "random_heading", "first_step")
NEEDS_REFERENCE = ("first_step",)   # baselines that read the reference path


def _wrap(angle):
    return jnp.mod(angle + math.pi, 2 * math.pi) - math.pi


STRAIGHT = ("forward", "fixed", "nearest")
# MatterSim's default camera (640 x 480, 60-degree vertical field of view) sees 75.2 degrees
# across: its navigable locations lie within 37.6 degrees of the heading.
MATTERSIM_HALF_FOV = math.atan(math.tan(math.radians(30.0)) * 4 / 3)


def baseline_factory(name: str, num_steps: int, straight: str = "fixed",
                     half_fov: float = MATTERSIM_HALF_FOV) -> PolicyFactory:
    """Non-learning baselines that move `num_steps` times, then STOP:
    'random_walk' (a uniformly random neighbour each step), 'random_heading' (turn to a uniformly
    random heading, then go straight), 'first_step' (the reference path's first step, then go
    straight). "Go straight" (`straight`, the readings Ku et al.'s wording allows):
    - "fixed" (default, the most literal): keep the heading and move to the neighbour closest
      to it in any direction, so that, as the paper says, the only stopping criterion is N
      moves;
    - "forward": keep the heading (a MatterSim agent does not turn when it moves) and move to
      the navigable neighbour closest to it within the camera's field of view (+-`half_fov`);
      stop early when there is none (nothing lies straight ahead);
    - "nearest": move to the neighbour closest to the current heading in any direction, then
      face the edge taken (so the agent follows corridors, and may turn back at a dead end).
    The kept heading is the random one, or the edge heading of the first step."""
    if name not in BASELINES:
        raise ValueError(f"unknown baseline {name!r}; choose from {BASELINES}")
    if straight not in STRAIGHT:
        raise ValueError(f"unknown 'go straight' reading {straight!r}; choose from {STRAIGHT}")

    def factory(graph, consts, batch):
        def policy(kept, state, t, key):
            nb = graph.neighbors[state.node]
            valid = nb >= 0
            k_head, k_walk = jax.random.split(key)
            first = t == 0
            if name == "random_walk":
                score = jnp.where(valid, jax.random.uniform(k_walk, valid.shape), -1.0)
                allowed = valid
            else:
                random_heading = jax.random.uniform(k_head, state.heading.shape,
                                                    maxval=2 * math.pi)
                current = state.heading if straight == "nearest" else kept
                aim = jnp.where(first, random_heading, current)
                diff = jnp.abs(_wrap(graph.headings[state.node] - aim[:, None]))
                allowed = valid & (diff <= half_fov) if straight == "forward" else valid
                score = jnp.where(allowed, -diff, -jnp.inf)
            action = jnp.argmax(score, -1).astype(jnp.int32) + 1
            if name == "first_step":
                action = jnp.where(first, batch["gold"][:, 0], action)
                allowed = jnp.where(first[..., None], valid, allowed)
                slot = jnp.maximum(batch["gold"][:, 0] - 1, 0)
                first_heading = jnp.take_along_axis(graph.headings[state.node], slot[:, None],
                                                    1)[:, 0]
                kept = jnp.where(first, first_heading, kept)
            elif name == "random_heading":
                kept = jnp.where(first, random_heading, kept)
            action = jnp.where((t >= num_steps) | ~jnp.any(allowed, -1), mp.STOP, action)
            return kept, action, None

        return policy, jnp.zeros_like(batch["heading"])
    return factory


def make_rollout(factory: PolicyFactory, horizon: int, success_radius: float = 3.0):
    """Jitted run(graph, geodesic, consts, batch, rng) -> per-episode [B] metrics (`METRICS`,
    `osr`), `num_steps`, `final`, and the visited nodes `path` [B, horizon + 1] (-1 padded)
    with their number `path_len` [B]."""
    @jax.jit
    def run(graph, geodesic, consts, batch, rng):
        final, path, length = _walk(factory, horizon, graph, consts, batch, rng)
        out = path_metrics(path, length, batch["path"], batch["path_len"], geodesic,
                           success_radius)
        return dict(out, num_steps=final.num_steps, final=final.node, path=path,
                    path_len=length)
    return run


def _walk(factory: PolicyFactory, horizon: int, graph, consts, batch, rng):
    """(final state, visited nodes [B, horizon + 1], their number [B]) of one batched rollout."""
    policy, carry = factory(graph, consts, batch)
    state = batched(mp.reset)(graph, batch["start"], batch["heading"])
    final, _, traj = rollout(mp.step, graph, state, policy, carry, rng, horizon)
    return (final, *mp.path_of(traj, final))


def make_path_rollout(factory: PolicyFactory, horizon: int):
    """Jitted run(graph, consts, batch, rng) -> the visited nodes `path` [B, horizon + 1] (-1
    padded) and `path_len` [B]; no reference path is read and no metric computed (a split whose
    references are withheld)."""
    @jax.jit
    def run(graph, consts, batch, rng):
        _, path, length = _walk(factory, horizon, graph, consts, batch, rng)
        return {"path": path, "path_len": length}
    return run


def predict_paths(run, graph, consts, episodes: dict, rng: jax.Array,
                  batch_size: int = 256) -> dict:
    """{"path" [E, T], "path_len" [E]} of a `make_path_rollout` run over every episode."""
    keys = tuple(k for k in EPISODE_KEYS if k not in ("path", "path_len", "gold"))
    return map_in_chunks(lambda batch, key: run(graph, consts, batch, key), episodes, keys,
                         batch_size, rng)


def language_group(language: str) -> str:
    """The language as the paper's results tables give it: "en" for en-IN and en-US together,
    "hi", "te" (the part before the locale)."""
    return language.split("-", 1)[0]


def group_means(per: dict, groups: np.ndarray, names: Sequence[str]) -> dict:
    """{name: {metric: mean over the episodes whose `groups` entry is name}} for the names that
    have episodes (per: per-episode [E] metric arrays; groups [E])."""
    groups = np.asarray(groups)
    return {n: {k: float(per[k][groups == n].mean()) for k in METRICS}
            for n in names if np.any(groups == n)}


def evaluate(run, graph, geodesic, consts, episodes: dict, rng: jax.Array, batch_size: int = 256,
             languages: Sequence[str] = (), per_annotator: bool = False) -> dict:
    """Means of every metric over all episodes and the per-episode arrays under 'episodes'.
    When `languages` names the episodes' language ids: `per_language` means as the paper
    reports them (`language_group`: en, hi, te) and `per_locale` (en-IN, en-US, ...) where a
    language carries a locale. `per_annotator`: means per annotator (guide, follower, ...;
    `episodes["annotator"]` indexes `records.ANNOTATORS`). Chunks are padded to `batch_size`
    (one compile)."""
    per = map_in_chunks(lambda batch, key: run(graph, geodesic, consts, batch, key), episodes,
                        EPISODE_KEYS, batch_size, rng)
    result = {k: float(per[k].mean()) for k in (*METRICS, "osr")}
    if languages:
        locale = np.asarray(languages)[episodes["language"]]
        group = np.asarray([language_group(lang) for lang in languages])[episodes["language"]]
        result["per_language"] = group_means(per, group, sorted(set(group)))
        with_locale = [lang for lang in languages if "-" in lang]
        if with_locale:
            result["per_locale"] = group_means(per, locale, with_locale)
    if per_annotator:
        names = np.asarray(ANNOTATORS)[episodes["annotator"]]
        result["per_annotator"] = group_means(per, names, ANNOTATORS)
    result["episodes"] = per
    return result


def human_followers(followers: Sequence[dict], guides: Sequence[dict], nodes, geodesic,
                    success_radius: float = 3.0) -> dict:
    """The human reference of Ku et al. (2020), Tables 5 and 8 (row H): each follower annotation's
    path scored as a prediction against its guide's path (the guide record with the same
    instruction_id): means of `METRICS` (and `osr`) over the followers, `per_language` as the
    paper groups them (`language_group` of the guide's language) and `per_locale`, and the
    number of `followers`. Records are those of `ttw_jax.rxr.records`; ValueError naming a
    follower whose guide is not among `guides`."""
    guide_of = {g["instruction_id"]: g for g in guides if g["annotator"] == "guide"}
    rows = [f for f in followers if f["annotator"] == "follower"]
    if not rows:
        raise ValueError("no follower annotations to score (a config with followers: "
                         "data.tfds_config=guide_follower)")
    lost = [f["instruction_id"] for f in rows if f["instruction_id"] not in guide_of]
    if lost:
        raise ValueError(f"{len(lost)} follower annotations have no guide annotation in the "
                         f"split, e.g. instruction_id {lost[:5]}")

    def node_paths(recs):
        ids = [nodes.lookup([f"{r['scan']}/{v}" for v in r["path"]], "viewpoint") for r in recs]
        out = np.zeros((len(ids), max(len(p) for p in ids)), np.int32)
        for i, p in enumerate(ids):
            out[i, :len(p)] = p
        return out, np.asarray([len(p) for p in ids], np.int32)
    path, path_len = node_paths(rows)
    ref, ref_len = node_paths([guide_of[f["instruction_id"]] for f in rows])
    per = jax.jit(path_metrics, static_argnums=(5,))(path, path_len, ref, ref_len, geodesic,
                                                      success_radius)
    per = {k: np.asarray(v) for k, v in per.items()}
    out = {k: float(per[k].mean()) for k in (*METRICS, "osr")}
    locale = np.asarray([guide_of[f["instruction_id"]]["language"] for f in rows])
    group = np.asarray([language_group(x) for x in locale])
    out["per_language"] = group_means(per, group, sorted(set(group)))
    with_locale = sorted({x for x in locale if "-" in x})
    if with_locale:
        out["per_locale"] = group_means(per, locale, with_locale)
    out["followers"] = len(rows)
    return out
