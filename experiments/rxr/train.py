"""Training and evaluation of the RCM agent on RxR / R2R in the on-device Matterport simulator.

`train_and_evaluate(config, workdir)` trains with half behavioural cloning along the reference
path and half policy gradient with an nDTW reward (one `lax.scan` rollout per step, inside the
data-parallel jit step), checkpoints with orbax (a killed run resumes with identical results),
stops early on the dev metric, then reports PL / NE / SR / SPL / nDTW / SDTW of the best
parameters (greedy decoding) on every evaluation split, overall, per language (and per annotator
with `eval.per_annotator`), beside the random-walk, random-heading and first-step baselines
(Ku et al. 2020, Table 4). The dev and evaluation splits keep the RxR annotations of
`data.eval_annotators` only (guides by default, as the paper evaluates), whichever annotators
the model trains on.
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax.training import train_state

from ttw_datasets.rxr import rxr_dataset_builder as rxr_builder
from ttw_jax.core import tfds as ttw_tfds
from ttw_jax.core.env import PolicyFactory, replay_policy
from ttw_jax.core.train import provenance as prov
from ttw_jax.core.train.run import (EVAL, INIT, Run, check_eval, learning_rate_schedule,
                                    make_optimizer, mean_over_seeds, splits)
from ttw_jax.core.train.seeds import sequential_seeds
from ttw_jax.core.train.precision import with_dtype
from ttw_jax.rxr import evaluation as r2r_eval, predictions, view_features, views
from ttw_jax.rxr.graph import SOURCE_HINT
from ttw_jax.rxr.env import ANGLE_DIMS
from ttw_jax.rxr.losses import ENTROPY_NORMS, PG_LOSSES, mixed_loss
from ttw_jax.rxr.records import ANNOTATORS
from ttw_jax.rxr.rcm import RCMAgent, rcm_policy
from ttw_jax.rxr.training_data import (HOLDOUT, evaluation_splits, load_data, seed_inputs,
                                       train_sampler, withheld)
from ttw_jax.rxr.valan import ValanAgent

# eval splits are not resumable: their scans join the graph (node numbering, action space)
RESUMABLE_CHANGES = ("patience", "eval.batch_size", "eval.baselines", "eval.baseline_seeds",
                     "eval.straight", "eval.per_annotator", "eval.write_predictions",
                     "eval.human", "data.tfds_dir", "data.manual_dir", "data.connectivity_dir",
                     "data.features_cache", "data.features_extra_viewpoints",
                     "data.multitask_dir")
MODELS = ("full", "language_only", "vision_only")
ARCHS = ("rcm", "valan")   # model.arch: RCMAgent | ValanAgent (either takes every model.name)
MODES = ("train", "baselines")
GROUNDING_STEPS = ("cloned", "on_gold_path")   # where the attention-grounding loss applies
GROUPINGS = ("per_language", "per_locale", "per_annotator")   # r2r_eval.evaluate's breakdowns


def build_model(config: ml_collections.ConfigDict, vocab_size: int) -> RCMAgent | ValanAgent:
    m = config.model
    if m.arch == "valan":
        v = m.valan
        return with_dtype(ValanAgent(
            vocab_size, m.embed_dim, v.encoder, v.encoder_layers, v.decoder, v.decoder_layers,
            v.text_attention, v.visual_attention, v.action, v.value_hidden, v.embed_action,
            use_language=m.name != "vision_only", use_structure=m.structure_features,
            angle_dim=m.angle_dim), config.dtype)
    return with_dtype(RCMAgent(vocab_size, m.embed_dim, m.hidden, m.conv_layers, m.kernel,
                               use_language=m.name != "vision_only",
                               step_embedding=m.step_embedding,
                               use_structure=m.structure_features, angle_dim=m.angle_dim,
                               value_hidden=m.value_hidden), config.dtype)


def init_params(model: RCMAgent | ValanAgent, feature_dim: int, max_degree: int, key: jax.Array,
                text_dim: int | None = None):
    b, f = 2, feature_dim + model.angle_dim
    text = jnp.zeros((b, 4, text_dim)) if text_dim else None
    return model.init(key, jnp.ones((b, 4), jnp.int32), jnp.full((b,), 4, jnp.int32),
                      jnp.zeros((b, views.NUM_VIEWS, f)),
                      jnp.zeros((b, max_degree, f + views.STRUCTURE_DIM)),
                      jnp.ones((b, max_degree), bool), text)


def model_factory(model: RCMAgent | ValanAgent) -> PolicyFactory:
    """Greedy policy of the model; consts = (params, view features)."""
    def factory(graph, consts, batch):
        params, features = consts
        ctx, mask = model.apply(params, batch["tokens"], batch["token_len"],
                                batch.get("text_features"), method="encode")
        return rcm_policy(model, params, graph, features, ctx, mask, "greedy")
    return factory


def gold_factory(graph, consts, batch):
    """Replays the reference path's actions (a check: NE 0, SR = nDTW = 1)."""
    return replay_policy, batch["gold"]


def check_config(config: ml_collections.ConfigDict) -> None:
    if config.model.name not in MODELS:
        raise ValueError(f"unknown model.name {config.model.name!r}; choose from {MODELS}")
    if config.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {config.mode!r}")
    check_agent(config)
    check_eval(config, r2r_eval.METRICS)
    d = config.data
    if not d.connectivity_dir:
        raise ValueError("set data.connectivity_dir to the directory of Matterport "
                         f"<scan>_connectivity.json files. {SOURCE_HINT}")
    if d.feature_dtype not in views.TABLE_DTYPES:
        raise ValueError(f"data.feature_dtype must be one of {views.TABLE_DTYPES}, got "
                         f"{d.feature_dtype!r}")
    if d.features_extra_viewpoints not in view_features.EXTRA_VIEWPOINTS:
        raise ValueError(f"data.features_extra_viewpoints must be one of "
                         f"{view_features.EXTRA_VIEWPOINTS}, got {d.features_extra_viewpoints!r}")
    if config.loss.grounding_steps not in GROUNDING_STEPS:
        raise ValueError(f"loss.grounding_steps must be one of {GROUNDING_STEPS}, got "
                         f"{config.loss.grounding_steps!r}")
    if d.train_annotators and not set(splits(d.train_annotators)) <= {"guide", "follower"}:
        raise ValueError("data.train_annotators is empty (all) or a subset of guide,follower; "
                         f"got {d.train_annotators!r}")
    if d.multitask and not (d.multitask_share < 0 or 0 <= d.multitask_share < 1):
        raise ValueError(f"data.multitask_share is a share in [0, 1), or -1 (in proportion to "
                         f"the datasets' sizes); got {d.multitask_share}")
    if config.eval.human:
        known = rxr_builder.Builder.builder_configs.get(d.tfds_config)
        if known is not None and "follower" not in known.annotators:
            raise ValueError(f"eval.human scores the follower annotations, and "
                             f"rxr/{d.tfds_config} has none: use data.tfds_config=guide_follower "
                             "(data.train_annotators=guide trains on the guides alone)")
    hidden = withheld(config)
    prov.check_hidden(hidden, {"data.dev_split (model selection)": d.dev_split,
                               "data.train_split": d.train_split})
    restricted = known_languages(d.tfds_config)
    if hidden & set(evaluation_splits(config)) and (d.languages or restricted):
        raise ValueError(
            f"the leaderboard of {sorted(hidden & set(evaluation_splits(config)))} takes every "
            f"instruction of the split, and data.languages={d.languages!r} / "
            f"data.tfds_config={d.tfds_config!r} keeps only some: use data.tfds_config=guide "
            "with no data.languages for a leaderboard file")
    prov.check_perception(d.tfds_config != "synthetic",
                          d.features == "synthetic" and config.model.name != "language_only",
                          d.allow_synthetic_perception, "data.features=synthetic")
    if config.mode == "train":
        if d.dev_split in evaluation_splits(config):
            raise ValueError(
                f"data.dev_split {d.dev_split!r} selects the model and is also reported "
                f"(data.eval_splits={d.eval_splits!r}): select on a split that is not reported "
                f"(val_seen, or '{HOLDOUT}' of train) or leave it out of data.eval_splits")
        if config.model.name != "language_only" and not d.features:
            raise ValueError(
                f"model.name={config.model.name!r} sees the views, and data.features is empty: "
                f"set --config.data.features to {view_features.HINT} (or 'synthetic' with "
                "the synthetic data); model.name=language_only runs on angle features alone")
    lower_is_better = config.eval.metric in ("pl", "ne")
    if config.eval.mode != ("min" if lower_is_better else "max"):
        raise ValueError(f"eval.metric {config.eval.metric!r} is "
                         f"{'minimised' if lower_is_better else 'maximised'}: set eval.mode to "
                         f"{'min' if lower_is_better else 'max'!r}")


def check_agent(config: ml_collections.ConfigDict) -> None:
    """The architecture, angle encoding, learner and learning-rate schedule keys."""
    m, loss = config.model, config.loss
    if m.arch not in ARCHS:
        raise ValueError(f"unknown model.arch {m.arch!r}; choose from {ARCHS}")
    if m.angle_dim not in ANGLE_DIMS:
        raise ValueError(f"model.angle_dim must be one of {ANGLE_DIMS}, got {m.angle_dim!r}")
    if m.arch == "valan" and m.step_embedding:
        raise ValueError("model.step_embedding is the RCM agent's (model.arch=rcm); set it to 0 "
                         "with model.arch=valan")
    if loss.pg not in PG_LOSSES:
        raise ValueError(f"loss.pg must be one of {PG_LOSSES}, got {loss.pg!r}")
    if loss.entropy_norm not in ENTROPY_NORMS:
        raise ValueError(f"loss.entropy_norm must be one of {ENTROPY_NORMS}, got "
                         f"{loss.entropy_norm!r}")
    if m.value_hidden < 0 or m.valan.value_hidden <= 0:
        raise ValueError(f"model.value_hidden must be >= 0 (0: no value head) and "
                         f"model.valan.value_hidden > 0, got {m.value_hidden!r} and "
                         f"{m.valan.value_hidden!r}")
    if loss.pg == "actor_critic" and m.arch == "rcm" and not m.value_hidden:
        raise ValueError("loss.pg=actor_critic trains a value head: set model.value_hidden > 0 "
                         "(VALAN's: 64) or model.arch=valan")
    learning_rate_schedule(config.optim, config.num_steps)   # refuses a bad schedule now


def known_languages(tfds_config: str) -> tuple[str, ...]:
    """The languages an `rxr` TFDS config keeps (() = all)."""
    known = rxr_builder.Builder.builder_configs.get(tfds_config)
    return tuple(getattr(known, "languages", ()) or ())


def baseline_steps(data: dict, config) -> int:
    """N, the mean number of moves of the train split's reference paths (rounded)."""
    return int(round(float(np.mean(data["episodes"][config.data.train_split]["path_len"] - 1))))


def horizons(config: ml_collections.ConfigDict, data: dict) -> tuple[int, int]:
    """(train_horizon, eval.horizon), each 0 meaning the longest reference path (`max_path`
    viewpoints: its moves and the STOP)."""
    return (config.train_horizon if config.train_horizon > 0 else data["max_path"],
            config.eval.horizon if config.eval.horizon > 0 else data["max_path"])


def baseline_rollouts(config, num_steps: int, horizon: int, scored: bool = True) -> dict:
    """{name: jitted rollout} of `eval.baselines` moving `num_steps` times, built once so each
    compiles once for every split; with several `eval.straight` readings of "go straight", the
    going-straight baselines once per reading, named `<baseline>/<reading>`. `scored=False`:
    path rollouts (`make_path_rollout`) for a withheld split, without the baselines that read
    the reference path."""
    readings = splits(config.eval.straight)
    out = {}
    for name in splits(config.eval.baselines):
        if not scored and name in r2r_eval.NEEDS_REFERENCE:
            continue
        for straight in readings[:1] if name == "random_walk" else readings:
            key = name if name == "random_walk" or len(readings) == 1 else f"{name}/{straight}"
            factory = r2r_eval.baseline_factory(name, num_steps, straight)
            out[key] = (r2r_eval.make_rollout(factory, horizon, config.loss.success_radius)
                        if scored else r2r_eval.make_path_rollout(factory, horizon))
    return out


def withheld_row(config, data: dict, split: str, workdir, graph, key,
                 policies: dict) -> dict:
    """A withheld split's results: each policy's leaderboard files ({name: (path rollout,
    consts)}; the agent's under "" is written without a suffix), no metric."""
    eps = data["episodes"][split]
    out = {"episodes": len(eps["start"]), "references": "withheld", "predictions": {},
           "not_run": {b: "reads the reference path" for b in splits(config.eval.baselines)
                       if b in r2r_eval.NEEDS_REFERENCE}}
    for i, (name, (run, consts)) in enumerate(policies.items()):
        per = r2r_eval.predict_paths(run, graph, consts, eps, jax.random.fold_in(key, 1000 + i),
                                     config.eval.batch_size)
        if jax.process_index() == 0:
            out["predictions"][name or config.model.name] = predictions.write_split_predictions(
                workdir, split, data, per, name)
    return out


def evaluate_baselines(config, baselines: dict, data, graph, geodesic, split: str, key) -> dict:
    """{baseline: metrics (means over `eval.baseline_seeds` seeds, with `<metric>_std` and
    `per_language`)} on `split`."""
    out = {}
    for name, run in baselines.items():
        runs = [r2r_eval.evaluate(run, graph, geodesic, None, data["episodes"][split],
                                  jax.random.fold_in(key, 1000 + seed), config.eval.batch_size,
                                  data["languages"], config.eval.per_annotator)
                for seed in range(config.eval.baseline_seeds)]
        out[name] = mean_over_seeds(runs, r2r_eval.METRICS)
        for group in GROUPINGS:
            if group in runs[0]:
                out[name][group] = {
                    g: {k: float(np.mean([r[group][g][k] for r in runs]))
                        for k in r2r_eval.METRICS} for g in runs[0][group]}
    return out


@sequential_seeds("rxr", when=lambda c: c.mode != "train")   # baselines: in turn
def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       hooks: Sequence[Callable[[int], None]] = ()) -> dict:
    """Trains (or, in `baselines` mode, only evaluates) into `workdir`; returns (and writes) the
    results dict. `hooks` are called with the step number after every training step."""
    check_config(config)
    run = Run.start(config, workdir, RESUMABLE_CHANGES, parallel_seeds=config.mode == "train")
    data = load_data(config, workdir)
    if config.mode == "baselines":
        return run_baselines(config, run, data)
    d = config.data
    model = build_model(config, len(data["vocab"]))
    train_eps = data["episodes"][d.train_split]
    text_dim = train_eps["text_features"].shape[-1] if "text_features" in train_eps else None
    tx = make_optimizer(config.optim, config.num_steps)
    state = run.stack(run.per_seed(lambda r: train_state.TrainState.create(
        apply_fn=model.apply, params=init_params(model, data["features"].shape[-1],
                                                 data["graph"].max_degree, r.key(INIT), text_dim),
        tx=tx)))
    graph = run.replicate(data["graph"])
    geodesic = run.replicate(data["geodesic"])
    # Synthetic view features and the multitask mixture are drawn from the seed: each seed's
    # own (`seed_inputs`); a file's features are one copy, shared.
    shared = run.replicate(jnp.asarray(data["features"]))
    inputs = run.per_seed(lambda r: seed_inputs(r.config, data, shared, run.config.seed,
                                                run.replicate))
    seed_features = run.per_seed(lambda r, i: i[0], inputs)
    features = seed_features if run.seeds and d.features == "synthetic" else shared

    train_horizon, eval_horizon = horizons(config, data)
    loss_config = ml_collections.ConfigDict({**config.loss.to_dict(), "horizon": train_horizon})
    train_step, consts = run.train_step(
        mixed_loss(model, loss_config), graph, features, geodesic,
        learning_rate=learning_rate_schedule(config.optim, config.num_steps))
    names = [f"{d.train_split}: instruction_id {i} ({ANNOTATORS[a]}, path_id {p})"
             for i, a, p in zip(train_eps["instruction_id"], train_eps["annotator"],
                                train_eps["path_id"])]
    # One sampler draws every seed's batches from its key, unless the order (a stream) or the
    # rows (a mixture) depend on the seed.
    sampler = lambda r, i: train_sampler(r.config, train_eps, i[1], names, run.mesh)
    sample = (run.per_seed(sampler, inputs) if d.stream or data["mixture"] is not None
              else sampler(run, (shared, None)))
    rollout = r2r_eval.make_rollout(model_factory(model), eval_horizon,
                                    config.loss.success_radius)

    def evaluator(r: Run, features):
        """evaluate(params, split, ...) of the run `r` (its evaluation key, its workdir)."""
        def evaluate(params, split=d.dev_split, languages=None, per_annotator=False,
                     write_files=False):
            ev = r2r_eval.evaluate(rollout, graph, geodesic, (params, features),
                                   data["episodes"][split], r.key(EVAL), config.eval.batch_size,
                                   languages, per_annotator)
            out = {k: v for k, v in ev.items() if k != "episodes"}
            if write_files and jax.process_index() == 0:
                out["predictions"] = predictions.write_split_predictions(r.workdir, split, data,
                                                             ev["episodes"])
            return out
        return evaluate

    evaluate = run.per_seed(evaluator, seed_features)
    selecting = run.per_seed(lambda r, e: lambda params: {
        k: v for k, v in e(params).items() if k in r2r_eval.METRICS}, evaluate)
    state, best_params, meta = run.fit(
        state, run.step_fn(train_step, sample, *consts), selecting, hooks=hooks,
        data=sample if d.stream else None)   # the streams' state is checkpointed
    report = functools.partial(report_run, model=model, data=data, graph=graph,
                               geodesic=geodesic, eval_horizon=eval_horizon)
    return run.each_seed(report, best_params, meta, evaluate, seed_features, name="rxr")


def report_run(run: Run, best_params, meta: dict, evaluate, features, *, model, data: dict,
               graph, geodesic, eval_horizon: int) -> dict:
    """One run's results: the dev evaluation at the best step, the best parameters on every
    evaluation split beside the baselines and the human followers, predictions only where the
    references are withheld; written by `run.finish`."""
    config = run.config
    num_steps = baseline_steps(data, config)
    results = {"config": config.to_dict(), "best_step": meta["best_step"],
               "last_step": meta["step"], "agent": config.model.name,
               "baseline_steps": num_steps, "languages": data["languages"],
               "distances": data["distances"],
               "dev": {"split": config.data.dev_split, **(meta.get("best_eval") or {})}}
    baselines = baseline_rollouts(config, num_steps, eval_horizon)
    for split in evaluation_splits(config):
        if split in data["complete_ids"]:    # references withheld: predictions only
            agent = r2r_eval.make_path_rollout(model_factory(model), eval_horizon)
            results[split] = withheld_row(
                config, data, split, run.workdir, graph, run.key(EVAL),
                {"": (agent, (best_params, features)),
                 **{k: (r, None) for k, r in baseline_rollouts(config, num_steps, eval_horizon,
                                                               scored=False).items()}})
            continue
        results[split] = {"episodes": len(data["episodes"][split]["start"]),
                          config.model.name: evaluate(best_params, split, data["languages"],
                                                      config.eval.per_annotator,
                                                      config.eval.write_predictions),
                          **evaluate_baselines(config, baselines, data, graph, geodesic, split,
                                               run.key(EVAL)),
                          **human_row(config, data, split)}
    return run.finish(results, format_results(results), run_provenance(config, data))


def human_row(config: ml_collections.ConfigDict, data: dict, split: str) -> dict:
    """{"human": the followers' paths scored against the guides'} on `split` with `eval.human`
    (Ku et al. 2020, Tables 5 and 8, row H); {} otherwise, or for a split without followers
    (R2R)."""
    recs = data["human"].get(split, [])
    if not config.eval.human or not any(r["annotator"] == "follower" for r in recs):
        return {}   # e.g. test_standard, R2R: no followers
    return {"human": r2r_eval.human_followers(recs, recs, data["nodes"], data["geodesic"],
                                              config.loss.success_radius)}


def run_baselines(config: ml_collections.ConfigDict, run: Run, data: dict) -> dict:
    """The reference paths replayed and the baselines on every evaluation split; nothing trained."""
    graph, geodesic = jax.device_put(data["graph"]), jax.device_put(data["geodesic"])
    num_steps = baseline_steps(data, config)
    results = {"config": config.to_dict(), "agent": "gold", "baseline_steps": num_steps,
               "languages": data["languages"], "distances": data["distances"]}
    horizon = horizons(config, data)[1]
    baselines = baseline_rollouts(config, num_steps, horizon)
    for split in evaluation_splits(config):
        eps = data["episodes"][split]
        if split in data["complete_ids"]:   # references withheld: no gold replay, no metric
            results[split] = withheld_row(
                config, data, split, run.workdir, graph, run.key(EVAL),
                {k: (r, None) for k, r in baseline_rollouts(config, num_steps, horizon,
                                                            scored=False).items()})
            continue
        gold = r2r_eval.evaluate(r2r_eval.make_rollout(gold_factory, eps["gold"].shape[1]), graph,
                                 geodesic, None, eps, run.key(EVAL), config.eval.batch_size,
                                 data["languages"], config.eval.per_annotator)
        results[split] = {"episodes": len(eps["start"]),
                          "gold": {k: v for k, v in gold.items() if k != "episodes"},
                          **evaluate_baselines(config, baselines, data, graph, geodesic, split,
                                               run.key(EVAL)),
                          **human_row(config, data, split)}
    return run.finish(results, format_results(results), run_provenance(config, data))


def run_provenance(config: ml_collections.ConfigDict, data: dict) -> dict:
    """results.json's provenance: the release folder (or the synthetic data's seed), the view
    features (file, synthetic, or none), the withheld splits evaluated."""
    d = config.data
    source = (prov.synthetic_data(config.seed) if d.tfds_config == "synthetic"
              else prov.release_data(d.manual_dir or ttw_tfds.prepared_dir(
                  rxr_builder.Builder, d.tfds_config, d.tfds_dir or None)))
    width = int(data["features"].shape[-1])
    sees = config.mode == "train" and config.model.name != "language_only" and d.features
    perception = (prov.NONE if not sees else prov.synthetic_perception(config.seed, width)
                  if d.features == "synthetic" else prov.perception_file(d.features, width))
    # the baselines' rows are means over eval.baseline_seeds; an agent's over one run
    seeds = config.eval.baseline_seeds if config.mode == "baselines" else 1
    return prov.provenance(config, data=source, perception=perception, seeds=seeds,
                           hidden_splits=sorted(data["complete_ids"]),
                           token_limits={"data.max_tokens": data["max_tokens"]})


def format_results(results: dict) -> str:
    names = r2r_eval.METRICS
    head = f"best step {results['best_step']}; " if "best_step" in results else ""
    lines = [f"RxR / R2R ({results['agent']}, {head}baselines move {results['baseline_steps']} "
             f"steps; distances between {results['distances']}; std over seeds in brackets):",
             f"{'split':12s} {'agent':24s} " + " ".join(f"{n.upper():>6s}" for n in names)]
    for split, res in results.items():
        if isinstance(res, dict) and res.get("references") == "withheld":
            files = ", ".join(f for names in res["predictions"].values() for f in names)
            lines.append(f"{split:12s} references withheld (leaderboard): no metrics; "
                         f"predictions in the workdir: {files}"
                         + "".join(f"; {b} not run ({why})" for b, why in res["not_run"].items()))
        elif isinstance(res, dict) and "episodes" in res:
            for agent, m in res.items():
                if agent in ("episodes", "split"):
                    continue
                lines.append(f"{split:12s} {agent:24s} " + " ".join(
                    f"{m[n]:6.3f}" + (f" ({m[n + '_std']:.3f})" if n + "_std" in m else "")
                    for n in names))
                for group in GROUPINGS:
                    for g, gm in m.get(group, {}).items():
                        lines.append(f"{split:12s} {'  ' + g:24s} " +
                                     " ".join(f"{gm[n]:6.3f}" for n in names))
    return "\n".join(lines)
