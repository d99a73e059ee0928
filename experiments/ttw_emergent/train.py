"""Training and evaluation of Talk The Walk localization with emergent communication.

`train_and_evaluate(config, workdir)` trains a tourist/guide pair on random walks sampled on device,
checkpoints with orbax (a killed run resumes from its last checkpoint with identical results),
stops early on validation accuracy, then reports train/valid/test accuracy of the best parameters
beside the Bayes upper bounds, and the full-task success rate (Algorithm 1).
"""
from __future__ import annotations

import json
import os
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax.training import train_state

from ttw_jax.core import viz
from ttw_jax.core.train import data_parallel as dp
from ttw_jax.core.train.logging import MetricWriter
from ttw_jax.core.train.loop import fit
from ttw_jax.core.train.workdir import check_workdir_config
from ttw_jax.talk_the_walk import env as grid, figures, maps, walks
from ttw_jax.talk_the_walk.emergent.evaluation import evaluate_full_task, make_evaluator
from ttw_jax.talk_the_walk.emergent.losses import localization_loss
from ttw_jax.talk_the_walk.emergent.model import Localizer
from ttw_jax.talk_the_walk.upper_bound import bayes_rate

MASK_SEQUENCES = ((grid.UP, grid.UP, grid.UP), (grid.RIGHT, grid.RIGHT, grid.RIGHT),
                  (grid.DOWN, grid.LEFT, grid.UP), (grid.LEFT, grid.DOWN, grid.RIGHT))


# Settings that may change when a run is resumed; anything else must match the checkpoints.
# (Not num_steps: it sets the length of the cosine learning-rate schedule.)
RESUMABLE_CHANGES = ("patience", "write_plots", "full_task", "eval.chunk_size")


def load_data(config: ml_collections.ConfigDict) -> dict[str, maps.Windows]:
    names = [n for n in config.data.neighborhoods.split(",") if n]
    return maps.load_windows(config.data.maps_dir or None, config.data.synthetic_seed, names)


def build_model(config: ml_collections.ConfigDict) -> Localizer:
    if config.comm not in ("continuous", "discrete"):
        raise ValueError(f"config.comm must be 'continuous' or 'discrete', got {config.comm!r}")
    return Localizer(T=config.T, features=config.features, num_landmark_ids=maps.NUM_LANDMARK_IDS,
                     masc=config.masc, discrete=config.comm == "discrete",
                     kernel_init=config.kernel_init, tourist_init_std=config.tourist_init_std,
                     tourist_gate_init=config.tourist_gate_init)


def create_train_state(config, model: Localizer, table: np.ndarray, key: jax.Array):
    k_params, k_comm, k_data = jax.random.split(key, 3)
    ex = walks.sample_batch(k_data, jnp.asarray(table), 2, config.T)
    params = model.init({"params": k_params, "comm": k_comm}, ex["obs"], ex["actions"],
                        ex["landmarks"])["params"]
    return train_state.TrainState.create(apply_fn=model.apply, params=params,
                                         tx=optax.adam(learning_rate_schedule(config)))


def learning_rate_schedule(config: ml_collections.ConfigDict):
    """'constant', or 'cosine': linear warm-up then cosine decay to 1% over `num_steps`."""
    if config.lr_schedule == "constant":
        return config.learning_rate
    if config.lr_schedule == "cosine":
        return optax.warmup_cosine_decay_schedule(
            0.0, config.learning_rate, config.warmup_steps, max(config.num_steps, config.warmup_steps + 1),
            end_value=0.01 * config.learning_rate)
    raise ValueError(f"config.lr_schedule must be 'constant' or 'cosine', got {config.lr_schedule!r}")


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       hooks: Sequence[Callable[[int], None]] = ()) -> dict:
    """Trains, checkpoints into `workdir`, evaluates; returns (and writes) the results dict.

    `hooks` are called with the step number after every training step (tests use one to
    simulate a crash).
    """
    os.makedirs(workdir, exist_ok=True)
    model = build_model(config)
    learning_rate_schedule(config)            # bad settings fail before any work is done
    data = load_data(config)
    tables = {s: w.landmarks for s, w in data.items()}
    mesh = dp.make_mesh()
    dp.check_batch_size(config.batch_size, mesh)
    base = jax.random.key(config.seed)
    state = create_train_state(config, model, tables["train"], jax.random.fold_in(base, 0))
    check_workdir_config(config, workdir, RESUMABLE_CHANGES)
    writer = MetricWriter(workdir)

    loss_fn = localization_loss(model.apply, discrete=config.comm == "discrete")
    train_step = dp.make_train_step(loss_fn, mesh)
    train_table = dp.replicate(jnp.asarray(tables["train"]), mesh)
    sample = jax.jit(lambda k, tbl: walks.sample_batch(k, tbl, config.batch_size, config.T),
                     out_shardings=dp.batch_sharded(mesh))
    evaluate = make_evaluator(model, mesh, config.eval.chunk_size, config.eval.greedy_messages)
    examples = {s: walks.enumerate_walks(t, config.T) for s, t in tables.items()}
    step_key = jax.random.fold_in(base, 1)

    def step_fn(state, step):
        k_data, k_comm = jax.random.split(jax.random.fold_in(step_key, step))
        return train_step(state, sample(k_data, train_table), k_comm)

    state, best_params, meta = fit(
        state, config=config, workdir=workdir, writer=writer,
        place=lambda tree: dp.replicate(tree, mesh), step_fn=step_fn,
        evaluate=lambda params: {"accuracy": evaluate(params, examples["valid"])},
        metric="accuracy", mode="max", eval_prefix="valid", hooks=hooks)
    step = meta["step"]

    results = {"config": config.to_dict(), "best_step": meta["best_step"], "last_step": step}
    for split in maps.SPLITS:
        correct, total = bayes_rate(tables[split], config.T, condition_on_actions=True)
        correct_na, _ = bayes_rate(tables[split], config.T, condition_on_actions=False)
        results[split] = {"accuracy": evaluate(best_params, examples[split]),
                          "upper_bound": correct / total, "upper_bound_no_actions": correct_na / total,
                          "examples": total}
    ft_key = jax.random.fold_in(base, 2)
    for split in [s for s in config.full_task.splits.split(",") if s]:
        results[split]["full_task"] = evaluate_full_task(
            model, best_params, tables[split],
            jax.random.fold_in(ft_key, maps.SPLITS.index(split)), T=config.T,
            repeats=config.full_task.repeats, max_steps=config.full_task.max_steps,
            max_evals=config.full_task.max_evals, greedy=config.full_task.greedy,
            greedy_messages=config.eval.greedy_messages)

    if jax.process_index() == 0:
        with open(os.path.join(workdir, "results.json"), "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
        if config.write_plots:
            write_plots(config, model, best_params, writer.history(), results, workdir)
        print(format_results(results))
    writer.close()
    return results


def write_plots(config, model: Localizer, params, history, results, workdir: str) -> None:
    viz.plot_learning_curve(history, os.path.join(workdir, "learning_curve.png"),
                            hlines={"valid upper bound": results["valid"]["upper_bound"]})
    if config.masc and config.T > 0:
        seqs = np.asarray([s[:config.T] + (grid.UP,) * (config.T - len(s)) for s in MASK_SEQUENCES])
        masks = model.apply({"params": params}, jnp.asarray(seqs), method=Localizer.masks)
        labels = ["-".join(grid.ACTION_NAMES[a] for a in s) for s in seqs]
        figures.plot_masks(np.asarray(masks), labels, os.path.join(workdir, "masc_masks.png"))


def format_results(results: dict) -> str:
    c = results["config"]
    lines = [f"T={c['T']} comm={c['comm']} masc={c['masc']} L={c['features']} "
             f"(best step {results['best_step']} of {results['last_step']})",
             f"{'split':<6} {'accuracy':>9} {'upper bound':>12} {'UB no actions':>14} {'full-task success':>18} {'mean steps':>11}"]
    for split in maps.SPLITS:
        r = results[split]
        ft = r.get("full_task")
        lines.append(f"{split:<6} {r['accuracy']:9.4f} {r['upper_bound']:12.4f} "
                     f"{r['upper_bound_no_actions']:14.4f} "
                     + (f"{ft['success_rate']:18.4f} {ft['mean_steps_ended']:11.2f}" if ft else ""))
    return "\n".join(lines)
