"""Training and evaluation of Talk The Walk localization with emergent communication.

`train_and_evaluate(config, workdir)` trains a tourist/guide pair on random walks sampled on device,
checkpoints with orbax (a killed run resumes from its last checkpoint with identical results),
stops early on validation accuracy, then reports train/valid/test accuracy of the best parameters
beside the Bayes upper bounds, and the full-task success rate (Algorithm 1).
"""
from __future__ import annotations

import os
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax.training import train_state

from ttw_jax.core.train import data_parallel as dp
from ttw_jax.core.train.run import EVAL, INIT, Run, check_eval, make_optimizer
from ttw_jax.core.train.workdir import flatten
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
MODELS = ("masc", "no_masc")


def load_data(config: ml_collections.ConfigDict) -> dict[str, maps.Windows]:
    names = [n for n in config.data.neighborhoods.split(",") if n]
    return maps.load_windows(config.data.maps_dir or None, config.data.synthetic_seed, names)


def build_model(config: ml_collections.ConfigDict) -> Localizer:
    m = config.model
    if m.name not in MODELS:
        raise ValueError(f"model.name must be one of {MODELS}, got {m.name!r}")
    if m.comm not in ("continuous", "discrete"):
        raise ValueError(f"model.comm must be 'continuous' or 'discrete', got {m.comm!r}")
    return Localizer(T=config.T, features=m.features, num_landmark_ids=maps.NUM_LANDMARK_IDS,
                     masc=m.name == "masc", discrete=m.comm == "discrete",
                     kernel_init=m.kernel_init, tourist_init_std=m.tourist_init_std,
                     tourist_gate_init=m.tourist_gate_init)


def init_params(config, model: Localizer, table: np.ndarray, key: jax.Array):
    k_params, k_comm, k_data = jax.random.split(key, 3)
    ex = walks.sample_batch(k_data, jnp.asarray(table), 2, config.T)
    return model.init({"params": k_params, "comm": k_comm}, ex["obs"], ex["actions"],
                      ex["landmarks"])["params"]


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       hooks: Sequence[Callable[[int], None]] = ()) -> dict:
    """Trains, checkpoints into `workdir`, evaluates; returns (and writes) the results dict.

    `hooks` are called with the step number after every training step (tests use one to
    simulate a crash).
    """
    check_eval(config, ("accuracy",))
    model = build_model(config)
    tx = make_optimizer(config.optim, config.num_steps)  # bad settings fail before any work
    run = Run.start(config, workdir, RESUMABLE_CHANGES)
    data = load_data(config)
    tables = {s: w.landmarks for s, w in data.items()}
    state = train_state.TrainState.create(
        apply_fn=model.apply, params=init_params(config, model, tables["train"], run.key(INIT)),
        tx=tx)
    discrete = config.model.comm == "discrete"
    train_step = dp.make_train_step(localization_loss(model.apply, discrete=discrete), run.mesh)
    train_table = run.replicate(jnp.asarray(tables["train"]))
    sample_walks = jax.jit(lambda k, tbl: walks.sample_batch(k, tbl, config.batch_size, config.T),
                           out_shardings=dp.batch_sharded(run.mesh))
    sample = lambda k: sample_walks(k, train_table)
    evaluate = make_evaluator(model, run.mesh, config.eval.chunk_size, config.eval.greedy_messages)
    examples = {s: walks.enumerate_walks(t, config.T) for s, t in tables.items()}

    state, best_params, meta = run.fit(
        state, run.step_fn(train_step, sample),
        lambda params: {"accuracy": evaluate(params, examples["valid"])},
        eval_prefix="valid", hooks=hooks)
    step = meta["step"]

    results = {"config": config.to_dict(), "best_step": meta["best_step"], "last_step": step}
    for split in maps.SPLITS:
        correct, total = bayes_rate(tables[split], config.T, condition_on_actions=True)
        correct_na, _ = bayes_rate(tables[split], config.T, condition_on_actions=False)
        results[split] = {"accuracy": evaluate(best_params, examples[split]),
                          "upper_bound": correct / total, "upper_bound_no_actions": correct_na / total,
                          "examples": total}
    ft_key = run.key(EVAL)
    for split in [s for s in config.full_task.splits.split(",") if s]:
        results[split]["full_task"] = evaluate_full_task(
            model, best_params, tables[split],
            jax.random.fold_in(ft_key, maps.SPLITS.index(split)), T=config.T,
            repeats=config.full_task.repeats, max_steps=config.full_task.max_steps,
            max_evals=config.full_task.max_evals, greedy=config.full_task.greedy,
            greedy_messages=config.eval.greedy_messages)

    run.writer.write_summary(step, {f"final/{split}/{k}": v for split in maps.SPLITS
                                    for k, v in flatten(results[split]).items()
                                    if isinstance(v, (int, float)) and k != "examples"})
    if jax.process_index() == 0 and config.write_plots:
        write_plots(config, model, best_params, run.writer.history(), results, workdir)
    return run.finish(results, format_results(results))


def write_plots(config, model: Localizer, params, history, results, workdir: str) -> None:
    figures.plot_localization_curve(
        history, os.path.join(workdir, "learning_curve.png"),
        bounds={"valid upper bound": results["valid"]["upper_bound"],
                "valid upper bound, no actions": results["valid"]["upper_bound_no_actions"]},
        chance=1.0 / maps.WINDOW ** 2)   # one of the window's corners
    if config.model.name == "masc" and config.T > 0:
        seqs = np.asarray([s[:config.T] + (grid.UP,) * (config.T - len(s)) for s in MASK_SEQUENCES])
        masks = model.apply({"params": params}, jnp.asarray(seqs), method=Localizer.masks)
        labels = ["-".join(grid.ACTION_NAMES[a] for a in s) for s in seqs]
        figures.plot_masks(np.asarray(masks), labels, os.path.join(workdir, "masc_masks.png"))


def format_results(results: dict) -> str:
    c = results["config"]
    m = c["model"]
    lines = [f"T={c['T']} {m['name']} comm={m['comm']} L={m['features']} "
             f"(best step {results['best_step']} of {results['last_step']})",
             f"{'split':<6} {'accuracy':>9} {'upper bound':>12} {'UB no actions':>14} {'full-task success':>18} {'mean steps':>11}"]
    for split in maps.SPLITS:
        r = results[split]
        ft = r.get("full_task")
        lines.append(f"{split:<6} {r['accuracy']:9.4f} {r['upper_bound']:12.4f} "
                     f"{r['upper_bound_no_actions']:14.4f} "
                     + (f"{ft['success_rate']:18.4f} {ft['mean_steps_ended']:11.2f}" if ft else ""))
    return "\n".join(lines)
