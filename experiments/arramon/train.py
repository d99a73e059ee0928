"""Training and evaluation of the ArraMon V/L baseline and its V/O, L/O ablations.

`train_and_evaluate(config, workdir)` imitates the demonstrated actions of both phases with the
simulator inside `lax.scan` (teacher forcing, every turn its own example), checkpoints with orbax
(a killed run resumes with identical results), stops early on the dev split's `config.metric` of
the full cascaded task, then reports the task metrics of the best parameters on every
evaluation split beside the random walk.
"""
from __future__ import annotations

import os
import zlib
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import optax
from flax.training import train_state

from ttw_jax.arramon import (dataset as arramon_data, episodes as ae, evaluation as arr_eval,
                             records as arramon_records, views as arramon_view)
from ttw_jax.arramon.losses import imitation_loss
from ttw_jax.arramon.model import PhaseAgent
from ttw_jax.core.train import data_parallel as dp
from ttw_jax.core.train.logging import MetricWriter
from ttw_jax.core.train.loop import fit
from ttw_jax.core.train.workdir import check_workdir_config, write_results
from ttw_jax.core.vocab import Vocabulary

RESUMABLE_CHANGES = ("patience", "eval.", "data.eval_splits", "data.tfds_dir", "data.manual_dir")
PARTITIONS = ("partition_train", "partition_dev", "partition_test")
NUM_TYPES = len(arramon_records.TYPES)
NUM_ATTRS = (ae.NUM_ATTRIBUTES[0], ae.NUM_ATTRIBUTES[1],
             NUM_TYPES + 1 + arramon_view.NUM_WALLS)


def _splits(spec: str) -> list[str]:
    return [s for s in spec.split(",") if s]


def partition(records: Sequence[dict], fractions: Sequence[float]) -> dict[str, list[dict]]:
    """{partition_train, partition_dev, partition_test}: records split by crc32 of `code`
    (stable across runs and machines) with the given (train, dev) fractions."""
    lo, hi = round(100 * fractions[0]), round(100 * (fractions[0] + fractions[1]))
    out: dict[str, list[dict]] = {name: [] for name in PARTITIONS}
    for r in records:
        bucket = zlib.crc32(r["code"].encode()) % 100
        out[PARTITIONS[0 if bucket < lo else 1 if bucket < hi else 2]].append(r)
    return out


def load_data(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Vocabulary, padded episodes and walkable maps of every split the config names."""
    d = config.data
    wanted = sorted({d.train_split, d.dev_split, *_splits(d.eval_splits)})
    sources = sorted({s for s in wanted if s not in PARTITIONS}
                     | ({d.partition_split} if d.partition_split else set()))
    records = arramon_data.load_split_records(d.tfds_config, sources, tfds_dir=d.tfds_dir or None,
                                              manual_dir=d.manual_dir or None)
    walk_source = {s: s for s in sources}
    if d.partition_split:
        records.update(partition(records[d.partition_split], d.partition))
        walk_source.update({p: d.partition_split for p in PARTITIONS})
    elif any(s in PARTITIONS for s in wanted):
        raise ValueError("partition_* splits need config.data.partition_split")
    vocab = Vocabulary.load_or_build(
        os.path.join(workdir, "vocab.json"),
        (s for r in records[d.train_split] for key in ("navi_inst_gt", "assem_inst_gt")
         for s in r["instructions"][key]), save=jax.process_index() == 0)
    # The walkable map belongs to the source split (a partition shares its split's map).
    maps = {s: ae.walkable_for(records[s]) for s in sorted(set(walk_source[w] for w in wanted))}
    episodes, walkable = {}, {}
    for s in wanted:
        src = walk_source[s]
        walk, index = maps[src]
        if src != s:                  # a partition: map indices of its records in the source
            pos = {id(r): i for i, r in enumerate(records[src])}
            index = index[[pos[id(r)] for r in records[s]]]
        episodes[s] = ae.episodes(records[s], vocab, d.max_tokens, d.max_objects, index)
        walkable[s] = walk
    return dict(vocab=vocab, episodes=episodes, walkable=walkable)


def build_models(config: ml_collections.ConfigDict, vocab_size: int):
    m = config.model
    make = lambda: PhaseAgent(vocab_size, NUM_ATTRS, m.kind, m.embed_dim, m.action_dim, m.hidden,
                              m.dropout)
    return make(), make()


def create_train_state(config, models, key: jax.Array):
    b, t, m = 2, 2, 3
    args = (jnp.ones((b, 4), jnp.int32), jnp.full((b,), 4, jnp.int32),
            jnp.zeros((b, t, m, 3), jnp.int32), jnp.zeros((b, t, m, arramon_view.GEO_DIM)),
            jnp.ones((b, t, m), bool), jnp.zeros((b, t), jnp.int32))
    k_nav, k_assem = jax.random.split(key)
    params = {"navi": jax.jit(models[0].init)(k_nav, *args),
              "assem": jax.jit(models[1].init)(k_assem, *args)}
    tx = optax.chain(optax.clip_by_global_norm(config.grad_clip), optax.adam(config.learning_rate))
    return train_state.TrainState.create(apply_fn=models[0].apply, params=params, tx=tx)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       hooks: Sequence[Callable[[int], None]] = ()) -> dict:
    """Trains, checkpoints into `workdir`, evaluates; returns (and writes) the results dict.
    `hooks` are called with the step number after every training step."""
    os.makedirs(workdir, exist_ok=True)
    check_workdir_config(config, workdir, RESUMABLE_CHANGES)
    if config.metric not in arr_eval.METRICS:
        raise ValueError(f"config.metric must be one of {arr_eval.METRICS}, got {config.metric!r}")
    data = load_data(config, workdir)
    mesh = dp.make_mesh()
    dp.check_batch_size(config.batch_size, mesh)
    models = build_models(config, len(data["vocab"]))
    base = jax.random.key(config.seed)
    state = create_train_state(config, models, jax.random.fold_in(base, 0))
    writer = MetricWriter(workdir)
    d = config.data

    train_walk = dp.replicate(data["walkable"][d.train_split], mesh)
    loss_fn = imitation_loss(*models, NUM_TYPES)
    train_step = dp.make_train_step(loss_fn, mesh, num_consts=1)
    turns = ae.turn_examples(data["episodes"][d.train_split])
    sample = dp.episode_sampler(turns, config.batch_size, mesh)
    agent = arr_eval.make_task_rollout(arr_eval.agent_runners(*models, NUM_TYPES), config.horizon)
    eval_key = jax.random.fold_in(base, 2)
    step_key = jax.random.fold_in(base, 1)

    def step_fn(state, step):
        k_data, k_step = jax.random.split(jax.random.fold_in(step_key, step))
        return train_step(state, sample(k_data), k_step, train_walk)

    def run_split(run, consts, split):
        return arr_eval.evaluate(run, data["walkable"][split], consts, data["episodes"][split],
                                 eval_key, config.eval.batch_size)

    def evaluate(params):
        ev = run_split(agent, params, d.dev_split)
        return {k: ev[k] for k in arr_eval.METRICS}

    state, best_params, meta = fit(
        state, config=config, workdir=workdir, writer=writer,
        place=lambda tree: dp.replicate(tree, mesh), step_fn=step_fn, evaluate=evaluate,
        metric=config.metric, mode="max", eval_prefix="dev", hooks=hooks)

    results = {"config": config.to_dict(), "best_step": meta["best_step"],
               "last_step": meta["step"], "agent": config.model.kind}
    baselines = {name: arr_eval.make_task_rollout(arr_eval.random_runners(), config.horizon)
                 for name in _splits(config.eval.baselines) if name == "random"}
    unknown = set(_splits(config.eval.baselines)) - {"random"}
    if unknown:
        raise ValueError(f"unknown baselines {sorted(unknown)}; available: random")
    for split in _splits(d.eval_splits):
        ev = run_split(agent, best_params, split)
        results[split] = {config.model.kind: _summary(ev),
                          "episodes": len(data["episodes"][split]["psi0"])}
        for name, run in baselines.items():
            results[split][name] = _summary(run_split(run, None, split))
    write_results(workdir, results, format_results(results))
    writer.close()
    return results


def _summary(ev: dict) -> dict:
    return {k: v for k, v in ev.items() if k != "episodes"}


def format_results(results: dict) -> str:
    names = arr_eval.METRICS
    lines = [f"ArraMon ({results['agent']}, best step {results['best_step']}); overall = mean "
             "of the two turns:",
             f"{'split':16s} {'agent':7s} " + " ".join(f"{n:>10s}" for n in names)]
    for split, res in results.items():
        if isinstance(res, dict) and "episodes" in res:
            for agent, m in res.items():
                if agent != "episodes":
                    lines.append(f"{split:16s} {agent:7s} "
                                 + " ".join(f"{m[n]:10.4f}" for n in names))
    return "\n".join(lines)
