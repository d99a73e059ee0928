"""Training and evaluation of the ArraMon V/L baseline and its V/O, L/O ablations.

`train_and_evaluate(config, workdir)` imitates the demonstrated actions of both phases with the
simulator inside `lax.scan` (teacher forcing, every turn its own example, the loss the mean of
the two modules'; or, `train_update="per_module_per_turn"`, the official script's four updates
per batch of instances, `make_train_step`; navigation optionally by student forcing,
`config.student_forcing`),
checkpoints with orbax (a killed run resumes with identical results), stops early on the dev
split's `eval.metric` of the full cascaded task, then reports the task metrics of the best
parameters on every evaluation split (overall and per turn, both CTC rules) beside
the baselines, the assembly after perfect navigation (the paper's Table 6) when
`eval.perfect_navigation`, the parameter counts, writes `predictions_<split>.json` per evaluated
split (each instance's paths, pick-up and placement; `ttw_jax.arramon.predictions`, scored back
by `python -m experiments.arramon.score`) and draws `trajectories.png` (dev instances).

A hidden split of the release (`dataset.HIDDEN_SPLITS`, test_unseen: its references go to a
leaderboard) is only rolled out: its predictions file is checked against the split's complete
instance set and written, and no metric is computed for it (`hidden_predictions`); a config that
would train or select on it is refused (`check_data_config`). results.json's provenance says
what produced the numbers (`run_provenance`): rollouts on the release's recorded features are
the proxy protocol `NEAREST_POSE`, and the simulator's symbolic views with the release's
instructions are refused unless `data.allow_synthetic_perception`.
"""
from __future__ import annotations

from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax.training import train_state

from ttw_datasets.arramon import arramon_dataset_builder as arramon_builder
from ttw_jax.core import tfds as ttw_tfds
from ttw_jax.arramon import (dataset as arramon_data, episodes as ae, evaluation as arr_eval,
                             figures, metrics as arramon_metrics, predictions,
                             records as arramon_records, views as arramon_view)
from ttw_jax.arramon import features as arramon_features, losses, render
from ttw_jax.arramon.model import PhaseAgent, num_params
from ttw_jax.arramon.report import NEAREST_POSE, format_results, run_protocol
from ttw_jax.arramon.training_data import (TF_KEYS, feature_turn_examples, load_data,
                                           rendered_views, symbolic_views, uses_features)
from ttw_jax.core.chunks import map_in_chunks
from ttw_jax.core.stream import BatchStream
from ttw_jax.core.train import data_parallel as dp, provenance
from ttw_jax.core.train.run import (EVAL, INIT, STEPS, DataWait, Run, check_eval, make_optimizer,
                                    mean_over_seeds, seed_keys, splits)
from ttw_jax.core.train.precision import with_dtype
from ttw_jax.core.train.seeds import sequential_seeds

RESUMABLE_CHANGES = ("patience", "eval.batch_size", "eval.baselines", "eval.baseline_seeds",
                     "eval.perfect_navigation", "eval.num_figures",
                     "data.eval_splits", "data.tfds_dir", "data.manual_dir",
                     "data.features_dir", "data.features_cache", "data.stream_threads")
MODELS = ("vl", "vo", "lo")
MODES = ("train", "baselines")
# random: the uniform random walk; shortest_path: the ground truth's actions in both phases
# (the paper's S/P row: its paths are A* shortest paths).
BASELINES = ("random", "shortest_path")
REMOVED_BASELINES = {"random_by_distance": "every result now holds both CTC rules: `random` "
                                           "under eval.ctc_rule, and {metric}_distance / "
                                           "{metric}_strict"}
# An entity of the simulator's symbolic view (`views`): pattern, colour, type ids and geometry.
SYMBOLIC_WIDTH = 3 + arramon_view.GEO_DIM
NUM_TYPES = len(arramon_records.TYPES)
NUM_ATTRS = (ae.NUM_ATTRIBUTES[0], ae.NUM_ATTRIBUTES[1],
             NUM_TYPES + 1 + arramon_view.NUM_WALLS)


def perceptions(config: ml_collections.ConfigDict) -> dict:
    """{mode: (navigation, assembly) view builders} of a `rendered_views` run (`render.PERCEPTIONS`);
    empty otherwise (the modules' own views)."""
    if not rendered_views(config):
        return {}
    codes = render.codebook(NUM_ATTRS, config.data.render_width, config.data.render_seed)
    return {mode: render.perception(codes, NUM_ATTRS, NUM_TYPES, mode)
            for mode in render.PERCEPTIONS}


def hidden_splits(config: ml_collections.ConfigDict) -> tuple[str, ...]:
    """The splits of the run's data whose references are withheld (`dataset.hidden_splits`)."""
    return arramon_data.hidden_splits(config.data.tfds_config)


def check_data_config(config: ml_collections.ConfigDict) -> None:
    """Refuses, before any work, the symbolic views with the release's instructions (unless
    `data.allow_synthetic_perception`) and any use of a hidden split that needs its references
    (training, model selection, partitions, the baselines mode's metrics)."""
    d = config.data
    if d.rendered_views and d.tfds_config != "synthetic":
        raise ValueError("data.rendered_views renders synthetic cities (ttw_jax.arramon.render); "
                         f"data.tfds_config={d.tfds_config!r} is the release, whose views are "
                         "its recorded features (data.features_dir)")
    provenance.check_perception(
        d.tfds_config != "synthetic", symbolic_views(config), d.allow_synthetic_perception,
        f"model.name={config.model.name!r} without data.features_dir (the simulator's "
        "symbolic views)")
    uses = {"data.train_split (training)": d.train_split,
            "data.dev_split (model selection)": d.dev_split,
            "data.partition_split (training and selection partitions)": d.partition_split or ()}
    if config.mode == "baselines":
        uses["data.eval_splits (the baselines mode only computes metrics)"] = splits(
            d.eval_splits)
    provenance.check_hidden(hidden_splits(config), uses)


def run_provenance(config: ml_collections.ConfigDict, hidden: Sequence[str],
                   max_tokens: int | None = None) -> dict:
    """results.json's provenance: the release folder (`data.manual_dir`, else the prepared
    dataset's) or the synthetic generator's seed (of the training split), what the agent sees,
    the protocol, the hidden splits evaluated (predictions only), the instructions' padded
    length `max_tokens` (where given)."""
    d = config.data
    if d.tfds_config == "synthetic":
        data = provenance.synthetic_data(
            arramon_data.synthetic_seed(d.partition_split or d.train_split))
    else:
        data = provenance.release_data(
            d.manual_dir or ttw_tfds.prepared_dir(arramon_builder.Builder, d.tfds_config,
                                                     d.tfds_dir or None))
    if uses_features(config):
        seen = provenance.perception_file(d.features_dir, arramon_features.FEATURE_SHAPE[-1])
    elif symbolic_views(config):
        seen = provenance.synthetic_perception(data.get("seed", config.seed), SYMBOLIC_WIDTH)
    elif rendered_views(config):
        seen = provenance.synthetic_perception(d.render_seed, d.render_width)
    else:
        seen = provenance.NONE
    seeds = config.eval.baseline_seeds if config.mode == "baselines" else 1
    return provenance.provenance(config, data=data, perception=seen,
                                 protocol=run_protocol(config), seeds=seeds,
                                 hidden_splits=hidden,
                                 token_limits={"data.max_tokens": max_tokens})


def build_models(config: ml_collections.ConfigDict, vocab_size: int):
    m = config.model
    visual = "features" if uses_features(config) or rendered_views(config) else "symbolic"
    make = lambda: PhaseAgent(vocab_size, NUM_ATTRS, m.name, m.embed_dim, m.action_dim, m.hidden,
                              m.dropout, m.logits_from_state, visual,
                              dropout_placement=m.dropout_placement)
    return with_dtype(make(), config.dtype), with_dtype(make(), config.dtype)


def feature_width(config: ml_collections.ConfigDict) -> int:
    """Channels of the feature maps a "features" model reads: the rendered ones'
    (`data.render_width`) or the release's (2048)."""
    return (config.data.render_width if rendered_views(config)
            else arramon_features.FEATURE_SHAPE[-1])


def optimizer(config: ml_collections.ConfigDict):
    """Adam of `config.optim` (`make_optimizer`); under the per-turn updates without the
    clipping, which each module's update does by itself, and over the 4 updates of a step."""
    if config.train_update == "joint":
        return make_optimizer(config.optim, config.num_steps)
    optim = ml_collections.ConfigDict(config.optim.to_dict())
    optim.grad_clip = 0.0
    return make_optimizer(optim, 2 * len(losses.MODULES) * config.num_steps)


def make_train_step(config: ml_collections.ConfigDict, loss_fn, mesh, num_consts: int = 0,
                    seed_axes: tuple | None = None, num_seeds: int = 0):
    """step(state, batch, rng, *consts) -> (state, metrics), jitted over `mesh`, of
    `config.train_update`: "joint", one update on the mean of both modules' losses over a
    batch of turns (`dp.make_train_step`); "per_module_per_turn", the official
    `main_nosim.py`'s four updates of a batch of instances (`losses.per_module_updates`, each
    module's gradient clipped to `optim.grad_clip` by itself). `seed_axes`: the step of several
    `num_seeds` seeds stacked on a leading axis (as `dp.make_train_step`'s)."""
    if config.train_update == "joint":
        return dp.make_train_step(loss_fn, mesh, num_consts=num_consts, seed_axes=seed_axes,
                                  num_seeds=num_seeds)

    def step(state, batch, rng, *consts):
        update = losses.per_module_updates(loss_fn, state.tx, config.optim.grad_clip)
        params, opt_state, metrics = update(state.params, state.opt_state, batch, rng, *consts)
        return state.replace(step=state.step + 1, params=params, opt_state=opt_state), metrics

    return dp.jit_step(step, mesh, num_consts, seed_axes=seed_axes, num_seeds=num_seeds)


def init_params(models, key: jax.Array, width: int = arramon_features.FEATURE_SHAPE[-1]) -> dict:
    """Both modules' parameters; `width`: the feature maps' channels (visual "features")."""
    b, t, m = 2, 2, 3
    view = ((jnp.zeros((b, t, 49, width)), jnp.ones((b, t, 49), bool))
            if models[0].visual == "features" else
            (jnp.zeros((b, t, m, 3), jnp.int32), jnp.zeros((b, t, m, arramon_view.GEO_DIM)),
             jnp.ones((b, t, m), bool)))
    args = (jnp.ones((b, 4), jnp.int32), jnp.full((b,), 4, jnp.int32), view,
            jnp.zeros((b, t), jnp.int32))
    k_nav, k_assem = jax.random.split(key)
    init = jax.jit(models[0].init)        # the two modules are alike: one compiled init
    return {"navi": init(k_nav, *args), "assem": init(k_assem, *args)}


def baseline_rollouts(config) -> dict:
    """{name: task rollout} of `eval.baselines` (BASELINES), scored under `eval.ctc_rule`."""
    names = splits(config.eval.baselines)
    for name in names:
        if name in REMOVED_BASELINES:
            raise ValueError(f"baseline {name!r} was removed: {REMOVED_BASELINES[name]}")
    unknown = set(names) - set(BASELINES)
    if unknown:
        raise ValueError(f"unknown baselines {sorted(unknown)}; available: {BASELINES}")
    factories = {"random": arr_eval.random_factories(),
                 "shortest_path": (arr_eval.gold_navigation_factory,
                                   arr_eval.gold_assembly_factory)}
    return {name: arr_eval.make_task_rollout(factories[name], config.eval.horizon,
                                             config.eval.ctc_rule) for name in names}


@sequential_seeds("arramon", when=lambda c: c.mode != "train" or uses_features(c))
def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       hooks: Sequence[Callable[[int], None]] = ()) -> dict:
    """Trains (or, in `baselines` mode, only evaluates) into `workdir`; returns (and writes) the
    results dict. `hooks` are called with the step number after every training step."""
    if config.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {config.mode!r}")
    if config.model.name not in MODELS:
        raise ValueError(f"model.name must be one of {MODELS}, got {config.model.name!r}")
    check_eval(config, arr_eval.METRICS)
    arramon_metrics.check_rule(config.eval.ctc_rule)
    if not 0.0 <= config.student_forcing <= 1.0:
        raise ValueError(f"student_forcing must be in [0, 1], got {config.student_forcing}")
    if config.train_update not in losses.TRAIN_UPDATES:
        raise ValueError(f"train_update must be one of {losses.TRAIN_UPDATES}, got "
                         f"{config.train_update!r}")
    if config.data.require_features and not config.data.features_dir:
        raise ValueError("this config is the paper's recipe, which reads the release's image "
                         "features: set --config.data.features_dir to the folder holding "
                         f"{arramon_features.POS_DIR}/pos_<mapId>.json and "
                         f"{arramon_features.VFEAT_DIR}/vfeat_<mapId>_<tag>.npy. "
                         + arramon_features.HINT)
    if uses_features(config) and config.student_forcing:
        raise ValueError("student_forcing needs the simulator's views; the recorded features "
                         "exist only along the demonstrations (set student_forcing=0 with "
                         "data.features_dir)")
    check_data_config(config)
    baselines = baseline_rollouts(config)
    # The simulator's runs train their seeds in one program (the recorded features' stream
    # and the baselines run them in turn: `sequential_seeds`).
    run = Run.start(config, workdir, RESUMABLE_CHANGES, parallel_seeds=True)
    data = load_data(config, workdir)
    d = config.data

    def run_split(rollout, consts, split, key, keep_episodes=False, first=None):
        episodes = data["episodes"][split]
        if first is not None:
            episodes = {k: v[:first] for k, v in episodes.items() if not k.startswith("_")}
        ev = arr_eval.evaluate(rollout, data["walkable"][split], consts, episodes, key,
                               config.eval.batch_size)
        return ev if keep_episodes else {k: v for k, v in ev.items() if k != "episodes"}

    def baseline_results(split, key):
        out = {}
        for name, rollout in baselines.items():
            seeds = config.eval.baseline_seeds if name == "random" else 1   # others: no draws
            res = [run_split(rollout, None, split, k) for k in seed_keys(key, seeds)]
            out[name] = mean_over_seeds(res, list(res[0]))
        return out

    results = {"config": config.to_dict(), "agent": config.model.name}
    if config.mode == "baselines":
        results["agent"] = "random walk"
        for split in splits(d.eval_splits):
            results[split] = {"episodes": len(data["episodes"][split]["psi0"]),
                              **baseline_results(split, run.key(EVAL))}
        return run.finish(results, format_results(results),
                          run_provenance(config, (), data["max_tokens"]))

    models = build_models(config, len(data["vocab"]))
    seen = perceptions(config)
    tx = optimizer(config)
    state = run.stack(run.per_seed(lambda r: train_state.TrainState.create(
        apply_fn=models[0].apply, params=init_params(models, r.key(INIT), feature_width(config)),
        tx=tx)))
    stream = None
    train_records = data["records"][d.train_split]      # turn examples: turn 1 rows, then turn 2
    # Training rows: turns (joint updates), or instances with both turns (per-turn updates).
    per_turn = config.train_update == "per_module_per_turn"
    names = [f"{d.train_split}: instance {i} ({r.get('filename', '?')}, mapId {r.get('mapId')})"
             + ("" if per_turn else f", turn {t + 1}")
             for t in range(1 if per_turn else 2) for i, r in enumerate(train_records)]
    if uses_features(config):
        # Teacher forcing over the recorded views (main_nosim.py): no simulator; the rows are
        # streamed from the packed float16 cache by grain's threads (checkpointed position).
        train_step = make_train_step(config, losses.feature_imitation_loss(*models), run.mesh)
        ep = data["episodes"][d.train_split]
        stream = BatchStream.of_rows(ep if per_turn else feature_turn_examples(ep),
                                     TF_KEYS, config.batch_size, config.seed,
                                     d.stream_threads)
        step_key = run.key(STEPS)
        sample = dp.StreamSampler(stream, run.mesh, names)

        data_wait = DataWait()      # logged by `fit` as train/data_wait_ms

        def step_fn(state, step):
            return train_step(state, data_wait.timed(sample),
                              jax.random.fold_in(step_key, step))
        step_fn.examples, step_fn.data_wait = sample.step_examples, data_wait
    else:
        train_walk = run.replicate(data["walkable"][d.train_split])
        loss_fn = losses.imitation_loss(*models, NUM_TYPES, config.student_forcing,
                                        config.train_horizon, seen.get("true"))
        train_step = make_train_step(config, loss_fn, run.mesh, num_consts=1,
                                     seed_axes=(None,) if run.seeds else None,
                                     num_seeds=len(run.seeds))
        examples = ae.turn_examples(data["episodes"][d.train_split])
        sample = dp.episode_sampler(ae.paired_turns(examples) if per_turn else examples,
                                    config.batch_size, run.mesh, names=names)
        step_fn = run.step_fn(train_step, sample, train_walk)
    agent_nav, agent_assem = arr_eval.agent_factories(*models, NUM_TYPES, seen.get("true"))
    agent = arr_eval.make_task_rollout((agent_nav, agent_assem), config.eval.horizon,
                                       config.eval.ctc_rule)
    # Each dev evaluation of this process keeps, by step, the paths of the instances that
    # trajectories.png draws (the figure then needs no evaluation of its own). `fit` evaluates
    # after the step's hooks, so the first hook tells the step.
    step_now = [0]

    def note_step(step):
        step_now[0] = step

    def evaluator(r: Run):
        """(dev_eval(params) of the run `r`, with its evaluation key; {step: drawn paths})."""
        drawn = {}

        def dev_eval(params):
            ev = run_split(agent, params, d.dev_split, r.key(EVAL), keep_episodes=True)
            drawn[step_now[0]] = {k: v[:config.eval.num_figures].copy()
                                  for k, v in ev.pop("episodes").items()}
            return ev
        return dev_eval, drawn

    evals = run.per_seed(evaluator)
    state, best_params, meta = run.fit(
        state, step_fn, run.per_seed(lambda r, e: e[0], evals), hooks=(note_step, *hooks),
        data=sample if stream is not None else None)

    def teacher_forced(params, split, key):
        per = map_in_chunks(lambda b, _: tf_accuracy(params, b),
                            feature_turn_examples(data["episodes"][split]), TF_KEYS,
                            config.eval.batch_size, key)
        return {k: float(np.mean(v)) for k, v in per.items()}

    tf_accuracy = losses.teacher_forced_accuracy(*models) if uses_features(config) else None
    perfect_nav = arr_eval.make_task_rollout((arr_eval.gold_navigation_factory, agent_assem),
                                             config.eval.horizon, config.eval.ctc_rule)
    hidden = [s for s in splits(d.eval_splits) if s in hidden_splits(config)]
    predict = arr_eval.make_task_rollout((agent_nav, agent_assem), config.eval.horizon,
                                         scored=False)

    def report(run: Run, best_params, meta: dict, evaluated) -> dict:
        """One run's results (its key, workdir and config; `evaluated`: its (dev_eval,
        drawn)), written by `run.finish`."""
        drawn, key, config = evaluated[1], run.key(EVAL), run.config
        results = {"config": config.to_dict(), "agent": config.model.name,
                   "best_step": meta["best_step"], "last_step": meta["step"],
                   "num_params": {**{k: num_params(v) for k, v in best_params.items()},
                                  "total": num_params(best_params)}}
        for split in splits(d.eval_splits):
            if split in hidden:         # no reference: predictions only
                results[split] = hidden_predictions(predict, best_params, data, split, run,
                                                    config.eval.batch_size)
                continue
            # The same program, parameters and key as the dev evaluations: the dev split's numbers
            # equal fit's at the best step; the per-instance outcomes go to the predictions file.
            ev = run_split(agent, best_params, split, key, keep_episodes=True)
            if jax.process_index() == 0:
                predictions.write_predictions(
                    run.workdir / f"predictions_{split}.json",
                    predictions.predictions(data["records"][split], ev.pop("episodes")))
            ev.pop("episodes", None)
            if uses_features(config):   # how well it imitates along the recorded demonstrations
                ev.update(teacher_forced(best_params, split, key))
            results[split] = {config.model.name: ev,
                              "episodes": len(data["episodes"][split]["psi0"]),
                              **baseline_results(split, key)}
            if config.eval.perfect_navigation:
                results[split][f"{config.model.name}_perfect_navigation"] = run_split(
                    perfect_nav, best_params, split, key)
            if "nearest_recorded" in seen:     # the same agent under the release runs' proxy
                proxy = arr_eval.make_task_rollout(
                    arr_eval.agent_factories(*models, NUM_TYPES, seen["nearest_recorded"]),
                    config.eval.horizon, config.eval.ctc_rule)
                results[split][f"{config.model.name}_{NEAREST_POSE['name']}"] = run_split(
                    proxy, best_params, split, key)
        if jax.process_index() == 0 and config.eval.num_figures > 0:
            split = d.dev_split
            paths = drawn.get(meta["best_step"])
            if paths is None:      # the best step was evaluated before a resume: evaluate it again
                paths = run_split(agent, best_params, split, key, keep_episodes=True,
                                  first=config.eval.num_figures)["episodes"]
            figures.plot_trajectories(data["walkable"][split], data["episodes"][split],
                                      paths, run.workdir / "trajectories.png",
                                      f"{config.model.name.upper()}, {split}, best step "
                                      f"{meta['best_step']}")
        return run.finish(results, format_results(results),
                          run_provenance(config, hidden, data["max_tokens"]))

    return run.each_seed(report, best_params, meta, evals, name="arramon")


def hidden_predictions(rollout, params, data: dict, split: str, run: Run,
                       batch_size: int) -> dict:
    """A hidden split's results, {"predictions": file name, "instances": n}: the agent's
    rollout (`rollout` unscored, given no reference) written as its predictions file, checked
    against the split's complete instance set first; no metric is computed."""
    records = data["records"][split]
    per = arr_eval.predict(rollout, data["walkable"][split], params, data["episodes"][split],
                           run.key(EVAL), batch_size)
    name = f"predictions_{split}.json"
    if jax.process_index() == 0:
        path = run.workdir / name
        predictions.write_checked_predictions(path, predictions.predictions(records, per),
                                              records)
        print(f"{split}: references withheld (the authors' leaderboard scores them); "
              f"predictions of its {len(records)} instances written to {path}")
    return {"predictions": name, "instances": len(records)}


