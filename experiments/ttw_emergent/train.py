"""Training and evaluation of Talk The Walk localization with emergent communication.

`train_and_evaluate(config, workdir)` trains a tourist/guide pair on random walks sampled on device
(`data.train_walks="sampled"`, ours) or on the 2018 release's fixed training set, every (window,
start, action sequence) once per epoch in a fresh order (`"enumerated"`, with `num_epochs`; the
README's revision table says which release does which),
checkpoints with orbax (a killed run resumes from its last checkpoint with identical results),
stops early on validation accuracy, then reports train/valid/test accuracy of the best parameters
beside the Bayes upper bounds, and the full-task success rate (Algorithm 1). `data.label` picks
the corner predicted (where the walk ends or starts, `ttw_jax.talk_the_walk.walks`);
`data.orientation_aware` the tourist (section 2: TURNLEFT/TURNRIGHT/FORWARD, landmarks seen only
facing away from the intersection). Discrete messages are scored with greedy and sampled bits.
"""
from __future__ import annotations

import functools
import math
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax.training import train_state

from ttw_jax.core import paths
from ttw_jax.core.train import data_parallel as dp, provenance
from ttw_jax.core.train.epochs import in_steps
from ttw_jax.core.train.run import EVAL, INIT, Run, check_eval, evaluate_best, make_optimizer
from ttw_jax.core.train.precision import with_dtype
from ttw_jax.core.train.workdir import flatten
from ttw_jax.talk_the_walk import env as grid, figures, maps, walks
from ttw_jax.talk_the_walk.emergent.evaluation import evaluate_full_task, make_evaluator
from ttw_jax.talk_the_walk.emergent.losses import REDUCTIONS, localization_loss
from ttw_jax.talk_the_walk.emergent.model import INITS, Localizer
from ttw_jax.talk_the_walk.upper_bound import bayes_rate

MASK_SEQUENCES = ((grid.UP, grid.UP, grid.UP), (grid.RIGHT, grid.RIGHT, grid.RIGHT),
                  (grid.DOWN, grid.LEFT, grid.UP), (grid.LEFT, grid.DOWN, grid.RIGHT))
AWARE_MASK_SEQUENCES = ((grid.FORWARD,) * 3, (grid.TURNLEFT, grid.FORWARD, grid.FORWARD),
                        (grid.TURNRIGHT, grid.FORWARD, grid.FORWARD),
                        (grid.FORWARD, grid.TURNLEFT, grid.FORWARD))
TRAIN_WALKS = ("sampled", "enumerated")
CLIP_SCOPES = ("global", "per_agent")


# Settings that may change when a run is resumed; anything else must match the checkpoints.
# (Not num_steps: it sets the length of the cosine learning-rate schedule.)
RESUMABLE_CHANGES = ("patience", "write_plots", "full_task", "eval.chunk_size")
MODELS = ("masc", "no_masc")


def load_data(config: ml_collections.ConfigDict) -> dict[str, maps.Windows]:
    names = [n for n in config.data.neighborhoods.split(",") if n]
    return maps.load_windows(config.data.maps_dir or None, config.data.synthetic_seed, names)


def maps_data(maps_dir: str, synthetic_seed: int) -> dict:
    """The provenance `data` of maps read from `maps_dir` (the release's), or of the synthetic
    neighbourhoods of `synthetic_seed` when it is empty."""
    return (provenance.release_data(maps_dir) if maps_dir
            else provenance.synthetic_data(synthetic_seed))


def run_provenance(config: ml_collections.ConfigDict, seeds: int = 1) -> dict:
    """The provenance of a run of `config` (or of the mean over `seeds` runs, `sweep.py`). The
    models read the maps' landmark annotations, the paper's perfect perception: no perception
    input; the release ships every split's targets (`maps.HIDDEN_SPLITS`)."""
    return provenance.provenance(config, data=maps_data(config.data.maps_dir,
                                                        config.data.synthetic_seed),
                                 seeds=seeds, hidden_splits=maps.HIDDEN_SPLITS)


MAX_ENUMERATION_BYTES = 16 * 2**30   # host memory the enumerated walks of all splits may take


def count(n: int) -> str:
    """`n` with thousands separators, or in scientific notation when longer than 18 digits
    (Python refuses to write an int of over 4,300 digits)."""
    if n < 10 ** 18:
        return f"{n:,}"
    e = math.log10(n)
    return f"{10 ** (e % 1):.1f}e{int(e)}"


def check_config(config: ml_collections.ConfigDict) -> None:
    """Fails before any work on a value the trainer does not know."""
    m, d = config.model, config.data
    if config.T < 0:
        raise ValueError(f"T (the tourist's moves) must be >= 0, got {config.T}")
    # the walks grow as 4^T: a T past 64 is counted as 64 (its own count: hours of big ints)
    rows, nbytes = walks.enumeration_size(min(config.T, 64), d.orientation_aware)
    if nbytes > MAX_ENUMERATION_BYTES:
        over = config.T > 64
        raise ValueError(f"T={config.T}: evaluation enumerates every walk of every window, "
                         f"{'over' if over else 'up to'} {count(rows)} walks "
                         f"({'over' if over else 'about'} {count(round(nbytes / 2**30))} GiB of "
                         f"host memory, over the {MAX_ENUMERATION_BYTES // 2**30} GiB this trainer "
                         "allows); the paper uses T <= 3")
    for value, allowed, key in ((m.name, MODELS, "model.name"),
                                (m.comm, ("continuous", "discrete"), "model.comm"),
                                (m.init, INITS, "model.init"),
                                (d.label, walks.LABELS, "data.label"),
                                (d.train_walks, TRAIN_WALKS, "data.train_walks"),
                                (config.loss_reduction, REDUCTIONS, "loss_reduction"),
                                (config.optim.clip_scope, CLIP_SCOPES, "optim.clip_scope")):
        if value not in allowed:
            raise ValueError(f"{key} must be one of {allowed}, got {value!r}")
    if d.train_walks == "enumerated" and config.num_epochs <= 0:
        raise ValueError("data.train_walks='enumerated' trains for num_epochs epochs; "
                         f"set num_epochs > 0 (got {config.num_epochs})")


def build_model(config: ml_collections.ConfigDict) -> Localizer:
    check_config(config)
    m = config.model
    return with_dtype(Localizer(
        T=config.T, features=m.features, num_landmark_ids=maps.NUM_LANDMARK_IDS,
        masc=m.name == "masc", discrete=m.comm == "discrete", kernel_init=m.kernel_init,
        tourist_init_std=m.tourist_init_std, tourist_gate_init=m.tourist_gate_init,
        num_actions=grid.NUM_ACTIONS if config.data.orientation_aware
        else grid.NUM_AGNOSTIC_ACTIONS, init_scheme=m.init), config.dtype)


def walk_kwargs(config) -> dict:
    return {"label": config.data.label, "orientation_aware": bool(config.data.orientation_aware)}


def init_params(config, model: Localizer, table: np.ndarray, key: jax.Array):
    k_params, k_comm, k_data = jax.random.split(key, 3)
    ex = walks.sample_batch(k_data, jnp.asarray(table), 2, config.T, **walk_kwargs(config))
    return model.init({"params": k_params, "comm": k_comm}, ex["obs"], ex["actions"],
                      ex["landmarks"])["params"]


def make_tx(config: ml_collections.ConfigDict, num_steps: int) -> optax.GradientTransformation:
    """Adam per `config.optim`; `clip_scope="per_agent"` clips the tourist's (with the baseline)
    and the guide's gradients separately, as the released code's two optimizers do."""
    if config.optim.clip_scope == "global":
        return make_optimizer(config.optim, num_steps)
    agent = lambda params: {k: "guide" if k == "guide" else "tourist" for k in params}
    return optax.multi_transform({a: make_optimizer(config.optim, num_steps)
                                  for a in ("tourist", "guide")}, agent)


def train_sampler(config: ml_collections.ConfigDict, train_table: np.ndarray,
                  train_examples: dict | None, key: jax.Array, mesh
                  ) -> tuple[Callable, bool, int | None]:
    """The training batches of `data.train_walks`: (sample, pass_step, steps per epoch).
    "sampled": `sample(key)`, fresh random walks on the train windows at every step (ours; the
    current release samples too, see the README's revision table); "enumerated":
    `sample(key, step)`, the 2018
    release's fixed training set `train_examples` (`walks.enumerate_walks` of the train windows),
    every walk once per epoch in a fresh order (`walks.epoch_sampler`, drawn from `key`)."""
    if config.data.train_walks == "enumerated":
        sample, per_epoch = walks.epoch_sampler(dp.replicate(train_examples, mesh),
                                                config.batch_size, key, mesh)
        return (lambda k, step: sample(step)), True, per_epoch
    table = dp.replicate(jnp.asarray(train_table), mesh)
    sample_walks = jax.jit(lambda k, tbl: walks.sample_batch(
        k, tbl, config.batch_size, config.T, **walk_kwargs(config)),
        out_shardings=dp.batch_sharded(mesh))
    return (lambda k: sample_walks(k, table)), False, None


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       hooks: Sequence[Callable[[int], None]] = ()) -> dict:
    """Trains, checkpoints into `workdir`, evaluates; returns (and writes) the results dict.

    `hooks` are called with the step number after every training step (tests use one to
    simulate a crash).
    """
    check_eval(config, ("accuracy",))
    model = build_model(config)
    run = Run.start(config, workdir, RESUMABLE_CHANGES, parallel_seeds=True)
    data = load_data(config)
    tables = {s: w.landmarks for s, w in data.items()}
    examples = {s: walks.enumerate_walks(t, config.T, **walk_kwargs(config))
                for s, t in tables.items()}
    sampler = lambda r: train_sampler(config, tables["train"], examples["train"],
                                      jax.random.fold_in(r.key(INIT), 1), run.mesh)
    # Sampled walks come from the step's key alone: one sampler serves every seed; the
    # enumerated epochs are shuffled by each seed's own key.
    sample_batch, pass_step, per_epoch = sampler(run.seed_runs[0] if run.seeds else run)
    if run.seeds and per_epoch is not None:
        sample_batch = [sample_batch] + [sampler(r)[0] for r in run.seed_runs[1:]]
    fit_config = config if per_epoch is None else in_steps(
        config, per_epoch, num_steps=config.num_epochs, eval_every=config.eval_every_epochs)
    tx = make_tx(config, fit_config.num_steps)
    state = run.stack(run.per_seed(lambda r: train_state.TrainState.create(
        apply_fn=model.apply, params=init_params(config, model, tables["train"], r.key(INIT)),
        tx=tx)))
    discrete = config.model.comm == "discrete"
    train_step, _ = run.train_step(localization_loss(model.apply, discrete=discrete,
                                                     reduction=config.loss_reduction))
    evaluators = {greedy: make_evaluator(model, run.mesh, config.eval.chunk_size, greedy)
                  for greedy in ((True, False) if discrete else (True,))}
    selected = config.eval.greedy_messages or not discrete   # the bits that pick the best step
    evaluate = lambda params: {"accuracy": evaluators[selected](params, examples["valid"])}

    state, best_params, meta = run.fit(
        state, run.step_fn(train_step, sample_batch, pass_step=pass_step),
        run.per_seed(lambda r: evaluate), eval_prefix="valid", hooks=hooks, config=fit_config)
    report = functools.partial(report_run, model=model, tables=tables, examples=examples,
                               evaluators=evaluators, selected=selected, per_epoch=per_epoch)
    return run.each_seed(report, best_params, meta, name="ttw_emergent")


def report_run(run: Run, best_params, meta: dict, *, model: Localizer, tables: dict,
               examples: dict, evaluators: dict, selected: bool, per_epoch: int | None) -> dict:
    """One run's results: the best parameters' accuracy on every split (both ways of sending
    discrete bits) beside the Bayes upper bounds, the full task on `full_task.splits`, the
    plots; written by `run.finish`."""
    config = run.config
    discrete = config.model.comm == "discrete"
    step = meta["step"]
    results = {"config": config.to_dict(), "best_step": meta["best_step"], "last_step": step}
    if per_epoch is not None:
        results.update(steps_per_epoch=per_epoch, best_epoch=meta["best_step"] / per_epoch)
    bound = functools.partial(bayes_rate, T=config.T, **walk_kwargs(config))
    for split in maps.SPLITS:
        ex = examples[split]
        correct, total = bound(tables[split], condition_on_actions=True, examples=ex)
        correct_na, _ = bound(tables[split], condition_on_actions=False, examples=ex)
        accuracy = {greedy: fn(best_params, ex) for greedy, fn in evaluators.items()
                    if greedy != selected}
        # the selected bits: on valid, fit's own evaluation at the best step (not a second one)
        accuracy[selected] = evaluate_best(
            meta, split, "valid",
            lambda: {"accuracy": evaluators[selected](best_params, ex)})["accuracy"]
        results[split] = {"accuracy": accuracy[selected],
                          "upper_bound": correct / total, "upper_bound_no_actions": correct_na / total,
                          "examples": total}
        if discrete:   # both ways of sending the bits
            results[split].update(accuracy_greedy_messages=accuracy[True],
                                  accuracy_sampled_messages=accuracy[False])
    ft_key = run.key(EVAL)
    for split in [s for s in config.full_task.splits.split(",") if s]:
        results[split]["full_task"] = evaluate_full_task(
            model, best_params, tables[split],
            jax.random.fold_in(ft_key, maps.SPLITS.index(split)), T=config.T,
            repeats=config.full_task.repeats, max_steps=config.full_task.max_steps,
            max_evals=config.full_task.max_evals, greedy=config.full_task.greedy,
            greedy_messages=config.eval.greedy_messages, **walk_kwargs(config))

    run.writer.write_summary(step, {f"final/{split}/{k}": v for split in maps.SPLITS
                                    for k, v in flatten(results[split]).items()
                                    if isinstance(v, (int, float)) and k != "examples"})
    if jax.process_index() == 0 and config.write_plots:
        write_plots(config, model, best_params, run.writer.history(), results, run.workdir)
    return run.finish(results, format_results(results), run_provenance(config))


def write_plots(config, model: Localizer, params, history, results,
                workdir: paths.PathLike) -> None:
    figures.plot_localization_curve(
        history, paths.resolve(workdir) / "learning_curve.png",
        bounds={"valid upper bound": results["valid"]["upper_bound"],
                "valid upper bound, no actions": results["valid"]["upper_bound_no_actions"]},
        chance=1.0 / maps.WINDOW ** 2)   # one of the window's corners
    if config.model.name == "masc" and config.T > 0:
        aware = config.data.orientation_aware
        pad = grid.FORWARD if aware else grid.UP
        seqs = np.asarray([s[:config.T] + (pad,) * (config.T - len(s))
                           for s in (AWARE_MASK_SEQUENCES if aware else MASK_SEQUENCES)])
        masks = model.apply({"params": params}, jnp.asarray(seqs), method=Localizer.masks)
        labels = ["-".join(grid.ACTION_NAMES[a] for a in s) for s in seqs]
        figures.plot_masks(np.asarray(masks), labels, paths.resolve(workdir) / "masc_masks.png")


def format_results(results: dict) -> str:
    c = results["config"]
    m = c["model"]
    d = c["data"]
    discrete = m["comm"] == "discrete"
    lines = [f"T={c['T']} {m['name']} comm={m['comm']} L={m['features']} label={d['label']} "
             f"tourist={'aware' if d['orientation_aware'] else 'agnostic'} "
             f"(best step {results['best_step']} of {results['last_step']})",
             f"{'split':<6} {'accuracy':>9} "
             + (f"{'greedy bits':>12} {'sampled bits':>13} " if discrete else "")
             + f"{'upper bound':>12} {'UB no actions':>14} {'full-task success':>18} {'mean steps':>11}"]
    for split in maps.SPLITS:
        r = results[split]
        ft = r.get("full_task")
        lines.append(f"{split:<6} {r['accuracy']:9.4f} "
                     + (f"{r['accuracy_greedy_messages']:12.4f} "
                        f"{r['accuracy_sampled_messages']:13.4f} " if discrete else "")
                     + f"{r['upper_bound']:12.4f} {r['upper_bound_no_actions']:14.4f} "
                     + (f"{ft['success_rate']:18.4f} {ft['mean_steps_ended']:11.2f}" if ft else ""))
    return "\n".join(lines)
