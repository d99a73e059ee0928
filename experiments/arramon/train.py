"""Training and evaluation of the ArraMon V/L baseline and its V/O, L/O ablations.

`train_and_evaluate(config, workdir)` imitates the demonstrated actions of both phases with the
simulator inside `lax.scan` (teacher forcing, every turn its own example), checkpoints with orbax
(a killed run resumes with identical results), stops early on the dev split's `eval.metric` of
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
from flax.training import train_state

from ttw_jax.arramon import (dataset as arramon_data, episodes as ae, evaluation as arr_eval,
                             records as arramon_records, views as arramon_view)
from ttw_jax.arramon.losses import imitation_loss
from ttw_jax.arramon.model import PhaseAgent
from ttw_jax.core.train import data_parallel as dp
from ttw_jax.core.train.run import (EVAL, INIT, Run, check_eval, evaluate_best, make_optimizer,
                                    mean_over_seeds, seed_keys, splits)
from ttw_jax.core.vocab import Vocabulary

RESUMABLE_CHANGES = ("patience", "eval.batch_size", "eval.baselines", "eval.baseline_seeds",
                     "data.eval_splits", "data.tfds_dir", "data.manual_dir")
MODELS = ("vl", "vo", "lo")
MODES = ("train", "baselines")
BASELINES = ("random", "random_by_distance")
PAPER_RANDOM = {"navi_ndtw": 0.045, "ctc3": 0.030, "ctc5": 0.054, "ctc7": 0.092}  # Kim et al. 2020
PARTITIONS = ("partition_train", "partition_dev", "partition_test")
NUM_TYPES = len(arramon_records.TYPES)
NUM_ATTRS = (ae.NUM_ATTRIBUTES[0], ae.NUM_ATTRIBUTES[1],
             NUM_TYPES + 1 + arramon_view.NUM_WALLS)


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
    wanted = sorted({d.train_split, d.dev_split, *splits(d.eval_splits)})
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
    make = lambda: PhaseAgent(vocab_size, NUM_ATTRS, m.name, m.embed_dim, m.action_dim, m.hidden,
                              m.dropout)
    return make(), make()


def init_params(models, key: jax.Array) -> dict:
    b, t, m = 2, 2, 3
    args = (jnp.ones((b, 4), jnp.int32), jnp.full((b,), 4, jnp.int32),
            jnp.zeros((b, t, m, 3), jnp.int32), jnp.zeros((b, t, m, arramon_view.GEO_DIM)),
            jnp.ones((b, t, m), bool), jnp.zeros((b, t), jnp.int32))
    k_nav, k_assem = jax.random.split(key)
    init = jax.jit(models[0].init)        # the two modules are alike: one compiled init
    return {"navi": init(k_nav, *args), "assem": init(k_assem, *args)}


def baseline_rollouts(config) -> dict:
    """{name: task rollout} of `eval.baselines`: `random` (CTC-k with the fallback rule: a phase
    that ends without a pick-up scores 0) and `random_by_distance` (CTC-k by final distance)."""
    names = splits(config.eval.baselines)
    unknown = set(names) - set(BASELINES)
    if unknown:
        raise ValueError(f"unknown baselines {sorted(unknown)}; available: {BASELINES}")
    return {name: arr_eval.make_task_rollout(arr_eval.random_factories(), config.eval.horizon,
                                             strict=name == "random") for name in names}


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       hooks: Sequence[Callable[[int], None]] = ()) -> dict:
    """Trains (or, in `baselines` mode, only evaluates) into `workdir`; returns (and writes) the
    results dict. `hooks` are called with the step number after every training step."""
    if config.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {config.mode!r}")
    if config.model.name not in MODELS:
        raise ValueError(f"model.name must be one of {MODELS}, got {config.model.name!r}")
    check_eval(config, arr_eval.METRICS)
    baselines = baseline_rollouts(config)
    run = Run.start(config, workdir, RESUMABLE_CHANGES)
    data = load_data(config, workdir)
    d = config.data

    def run_split(rollout, consts, split, key=None):
        ev = arr_eval.evaluate(rollout, data["walkable"][split], consts, data["episodes"][split],
                               run.key(EVAL) if key is None else key, config.eval.batch_size)
        return {k: v for k, v in ev.items() if k != "episodes"}

    def baseline_results(split):
        out = {}
        for name, rollout in baselines.items():
            res = [run_split(rollout, None, split, k)
                   for k in seed_keys(run.key(EVAL), config.eval.baseline_seeds)]
            out[name] = mean_over_seeds(res, list(res[0]))
        return out

    results = {"config": config.to_dict(), "agent": config.model.name}
    if config.mode == "baselines":
        results["agent"] = "random walk"
        for split in splits(d.eval_splits):
            results[split] = {"episodes": len(data["episodes"][split]["psi0"]),
                              **baseline_results(split)}
        return run.finish(results, format_results(results))

    models = build_models(config, len(data["vocab"]))
    state = train_state.TrainState.create(apply_fn=models[0].apply,
                                          params=init_params(models, run.key(INIT)),
                                          tx=make_optimizer(config.optim, config.num_steps))
    train_walk = run.replicate(data["walkable"][d.train_split])
    train_step = dp.make_train_step(imitation_loss(*models, NUM_TYPES), run.mesh, num_consts=1)
    sample = dp.episode_sampler(ae.turn_examples(data["episodes"][d.train_split]),
                                config.batch_size, run.mesh)
    agent = arr_eval.make_task_rollout(arr_eval.agent_factories(*models, NUM_TYPES),
                                       config.eval.horizon)
    state, best_params, meta = run.fit(state, run.step_fn(train_step, sample, train_walk),
                                       lambda params: run_split(agent, params, d.dev_split),
                                       hooks=hooks)
    results.update(best_step=meta["best_step"], last_step=meta["step"])
    for split in splits(d.eval_splits):
        results[split] = {config.model.name: evaluate_best(
                              meta, split, d.dev_split,
                              lambda: run_split(agent, best_params, split)),
                          "episodes": len(data["episodes"][split]["psi0"]),
                          **baseline_results(split)}
    return run.finish(results, format_results(results))


def format_results(results: dict) -> str:
    names = arr_eval.METRICS
    head = f"best step {results['best_step']}; " if "best_step" in results else ""
    lines = [f"ArraMon ({results['agent']}, {head}overall = mean of the two turns; std over "
             "seeds in brackets):",
             f"{'split':18s} {'agent':18s} " + " ".join(f"{n:>10s}" for n in names)]
    for split, res in results.items():
        if isinstance(res, dict) and "episodes" in res:
            for agent, m in res.items():
                if agent != "episodes":
                    lines.append(f"{split:18s} {agent:18s} " + " ".join(
                        f"{m[n]:10.4f}" + (f" ({m[n + '_std']:.4f})" if n + "_std" in m else "")
                        for n in names))
    if "best_step" not in results:
        lines.append(f"{'paper':18s} {'random walk':18s} " + " ".join(
            f"{PAPER_RANDOM[n]:10.4f}" if n in PAPER_RANDOM else " " * 10 for n in names))
    return "\n".join(lines)
