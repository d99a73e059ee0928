"""Training and evaluation of Touchdown navigation agents (GA, RConcat).

`train_and_evaluate(config, workdir)` imitates the gold actions with the simulator inside
`lax.scan` (teacher forcing), checkpoints with orbax (a killed run resumes with identical
results), stops early on dev SPD, then reports TC / SPD / SED of the best parameters on every
evaluation split beside the Stop / Frequent / Random baselines.
"""
from __future__ import annotations

import os
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import optax
from flax.training import train_state

from ttw_jax.core.train import data_parallel as dp
from ttw_jax.core.train.logging import MetricWriter
from ttw_jax.core.train.loop import fit
from ttw_jax.core.train.workdir import check_workdir_config, write_results
from ttw_jax.core.vocab import Vocabulary
from ttw_jax.touchdown import (env as td, episodes as nav_episodes, evaluation as nav_eval,
                               features as pano_features)
from ttw_jax.touchdown.agents import Navigator, navigator_policy
from ttw_jax.touchdown.dataset import load_touchdown_split_records
from ttw_jax.touchdown.losses import imitation_loss
from ttw_jax.touchdown.reference import TouchdownReference

BATCH_KEYS = ("start_pano", "start_heading", "tokens", "token_len", "gold", "gold_len")
RESUMABLE_CHANGES = ("patience", "eval.", "data.eval_splits", "data.tfds_dir", "data.manual_dir",
                     "data.graph_dir", "data.features")


def load_data(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Graph, features, vocabulary and padded episodes of every split the config names."""
    d = config.data
    splits = sorted({d.train_split, d.dev_split, *[s for s in d.eval_splits.split(",") if s]})
    graph, nodes, links, records = load_touchdown_split_records(
        d.tfds_config, splits, tfds_dir=d.tfds_dir or None, manual_dir=d.manual_dir or None,
        graph_dir=d.graph_dir or None)
    vocab = Vocabulary.load_or_build(
        os.path.join(workdir, "vocab.json"),
        (r["navigation_text"] for r in records[d.train_split]), save=jax.process_index() == 0)
    reference = TouchdownReference(links)
    episodes = {s: nav_episodes.episodes(records[s], nodes, reference, vocab, d.max_tokens,
                                          d.max_route, max(config.train_horizon, config.test_horizon))
                for s in splits}
    if d.features:
        features = pano_features.load_pano_features(d.features, nodes)
    else:
        features = pano_features.synthetic_pano_features(graph, d.feature_width, d.feature_dim,
                                                         d.feature_noise, seed=config.seed)
    return dict(graph=graph, nodes=nodes, vocab=vocab, episodes=episodes, features=features)


def build_model(config: ml_collections.ConfigDict, vocab_size: int) -> Navigator:
    m = config.model
    return Navigator(vocab_size, m.kind, m.embed_dim, m.text_hidden, m.hidden, m.conv_features,
                     m.action_dim)


def create_train_state(config, model: Navigator, feature_dim: int, key: jax.Array):
    b, t = 2, 3
    params = model.init(key, jnp.ones((b, 4), jnp.int32), jnp.full((b,), 4, jnp.int32),
                        jnp.zeros((b, t, config.crop, feature_dim)), jnp.zeros((b, t), jnp.int32))
    tx = optax.chain(optax.clip_by_global_norm(config.grad_clip), optax.adam(config.learning_rate))
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)


def model_factory(model: Navigator, crop: int) -> nav_eval.PolicyFactory:
    """Greedy policy of the model; consts = (params, features, yaw)."""
    def factory(consts, batch):
        params, features, yaw = consts
        text = model.apply(params, batch["tokens"], batch["token_len"], method=Navigator.encode)
        return navigator_policy(model, params, features, yaw, crop, text)
    return factory


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       hooks: Sequence[Callable[[int], None]] = ()) -> dict:
    """Trains, checkpoints into `workdir`, evaluates; returns (and writes) the results dict.
    `hooks` are called with the step number after every training step."""
    os.makedirs(workdir, exist_ok=True)
    check_workdir_config(config, workdir, RESUMABLE_CHANGES)
    data = load_data(config, workdir)
    mesh = dp.make_mesh()
    dp.check_batch_size(config.batch_size, mesh)
    model = build_model(config, len(data["vocab"]))
    base = jax.random.key(config.seed)
    state = create_train_state(config, model, data["features"].shape[-1], jax.random.fold_in(base, 0))
    writer = MetricWriter(workdir)
    sim = dp.replicate(td.compile_sim(data["graph"]), mesh)
    features = dp.replicate(jnp.asarray(data["features"]), mesh)

    loss_fn = imitation_loss(model, config.crop, config.train_horizon)
    train_step = dp.make_train_step(loss_fn, mesh, num_consts=2)
    train_eps = data["episodes"][config.data.train_split]
    sample = dp.episode_sampler({k: train_eps[k] for k in BATCH_KEYS}, config.batch_size, mesh)
    rollout = nav_eval.make_rollout(model_factory(model, config.crop), config.test_horizon)
    eval_splits = [s for s in config.data.eval_splits.split(",") if s]
    hops = {s: nav_episodes.hops_to_goal(data["graph"], data["episodes"][s]["goal"])
            for s in {config.data.dev_split, *eval_splits}}   # [E, N] each: not for train
    eval_key = jax.random.fold_in(base, 2)
    step_key = jax.random.fold_in(base, 1)

    def step_fn(state, step):
        k_data, k_step = jax.random.split(jax.random.fold_in(step_key, step))
        return train_step(state, sample(k_data), k_step, sim, features)

    def evaluate(params):
        ev = nav_eval.evaluate(rollout, sim, (params, features, sim.graph.yaw),
                               data["episodes"][config.data.dev_split],
                               hops[config.data.dev_split], eval_key, config.eval.batch_size)
        return {k: ev[k] for k in ("tc", "spd", "sed")}

    state, best_params, meta = fit(
        state, config=config, workdir=workdir, writer=writer,
        place=lambda tree: dp.replicate(tree, mesh), step_fn=step_fn, evaluate=evaluate,
        metric="spd", mode="min", eval_prefix="dev", hooks=hooks)
    step = meta["step"]

    results = {"config": config.to_dict(), "best_step": meta["best_step"], "last_step": step,
               "agent": config.model.kind}
    consts = (best_params, features, sim.graph.yaw)
    baselines = {name: nav_eval.make_rollout(nav_eval.baseline_factory(name), config.test_horizon)
                 for name in config.eval.baselines.split(",") if name}   # compiled once each
    for split in eval_splits:
        ev = nav_eval.evaluate(rollout, sim, consts, data["episodes"][split], hops[split],
                               eval_key, config.eval.batch_size)
        results[split] = {config.model.kind: {k: ev[k] for k in ("tc", "spd", "sed")},
                          "episodes": len(data["episodes"][split]["goal"])}
        for name, run in baselines.items():
            ev = nav_eval.evaluate(run, sim, None, data["episodes"][split], hops[split],
                                   eval_key, config.eval.batch_size)
            results[split][name] = {k: ev[k] for k in ("tc", "spd", "sed")}
    write_results(workdir, results, format_results(results))
    writer.close()
    return results


def format_results(results: dict) -> str:
    lines = [f"Touchdown navigation ({results['agent']}, best step {results['best_step']}):",
             f"{'split':8s} {'agent':10s} {'TC':>7s} {'SPD':>7s} {'SED':>7s}"]
    for split, res in results.items():
        if isinstance(res, dict) and "episodes" in res:
            for agent, m in res.items():
                if agent != "episodes":
                    lines.append(f"{split:8s} {agent:10s} {m['tc']:7.3f} {m['spd']:7.2f} "
                                 f"{m['sed']:7.3f}")
    return "\n".join(lines)
