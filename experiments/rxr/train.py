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

from ttw_jax.core import paths
from ttw_jax.core.stream import BatchStream
from ttw_jax.core.env import PolicyFactory, replay_policy
from ttw_jax.core.train import data_parallel as dp
from ttw_jax.core.train.run import (EVAL, INIT, Run, check_eval, make_optimizer, mean_over_seeds,
                                    splits)
from ttw_jax.core.vocab import Vocabulary
from ttw_jax.rxr import (dataset as rxr_data, episodes as rxr_episodes, evaluation as r2r_eval,
                         predictions, views)
from ttw_jax.rxr.graph import SOURCE_HINT, geodesic_table, load_matterport_graph
from ttw_jax.rxr.losses import mixed_loss
from ttw_jax.rxr.records import ANNOTATORS
from ttw_jax.rxr.rcm import RCMAgent, rcm_policy
from ttw_jax.rxr.synthetic import node_landmarks

# eval splits are not resumable: their scans join the graph (node numbering, action space)
RESUMABLE_CHANGES = ("patience", "eval.batch_size", "eval.baselines", "eval.baseline_seeds",
                     "eval.straight", "eval.per_annotator", "eval.write_predictions",
                     "data.tfds_dir", "data.manual_dir", "data.connectivity_dir")
MODELS = ("full", "language_only", "vision_only")
MODES = ("train", "baselines")
HOLDOUT = "train_holdout"   # dev split carved out of train (`data.holdout_every`)
GROUPINGS = ("per_language", "per_locale", "per_annotator")   # r2r_eval.evaluate's breakdowns
BATCH_KEYS = ("start", "heading", "path", "path_len", "gold", "tokens", "token_len",
              "text_features", "word_mask", "view_mask", "has_masks", "has_word_mask")


def view_feature_table(config: ml_collections.ConfigDict, graph, nodes) -> np.ndarray:
    """[N, 36, D] view features for the config's agent kind (D = 0: angles only)."""
    d = config.data
    if config.model.name == "language_only" or not d.features:
        return views.empty_view_features(len(nodes))
    if d.features == "synthetic":
        landmarks = node_landmarks([i.split("/", 1)[1] for i in nodes.ids], d.num_landmarks)
        return views.synthetic_view_features(graph, landmarks, d.num_landmarks, d.feature_dim,
                                             d.feature_noise, seed=config.seed)
    return views.load_view_features(d.features, nodes)


def load_data(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Graph, geodesics, view features, vocabulary and padded episodes of every named split."""
    d = config.data
    if not d.connectivity_dir:
        raise ValueError("set data.connectivity_dir to the directory of Matterport "
                         f"<scan>_connectivity.json files. {SOURCE_HINT}")
    wanted = sorted({d.train_split, d.dev_split, *splits(d.eval_splits)} - {HOLDOUT})
    manual = d.connectivity_dir if d.tfds_config == "synthetic" else d.manual_dir
    readers = {}
    if d.stream:
        if not d.text_features:
            raise ValueError("data.stream=True streams the text features: set "
                             "data.text_features=True (the other arrays fit in memory)")
        records, readers = rxr_data.load_split_records_streamed(
            d.tfds_config, wanted, tfds_dir=d.tfds_dir or None, manual_dir=manual or None)
    else:
        records = rxr_data.load_split_records(d.tfds_config, wanted, tfds_dir=d.tfds_dir or None,
                                              manual_dir=manual or None)
    if HOLDOUT in {d.dev_split, *splits(d.eval_splits)}:   # every holdout_every-th train path
        train_records = records[d.train_split]
        records[HOLDOUT] = [r for r in train_records if r["path_id"] % d.holdout_every == 0]
        readers[HOLDOUT] = readers.get(d.train_split)
        records[d.train_split] = [r for r in train_records
                                  if r["path_id"] % d.holdout_every != 0]
        wanted.append(HOLDOUT)
    # Evaluation scores the paths of `data.eval_annotators` only (the paper: guides), whichever
    # annotators the model trains on.
    annotators = splits(d.eval_annotators)
    for s in set(wanted) - {d.train_split}:
        records[s] = rxr_data.evaluated_records(records[s], annotators)
        if not records[s]:
            raise ValueError(f"split {s!r} of rxr/{d.tfds_config} has no annotations by "
                             f"{annotators} (data.eval_annotators)")
    scans = sorted({r["scan"] for s in wanted for r in records[s]})
    graph, nodes, scan_of = load_matterport_graph(d.connectivity_dir, scans)
    vocab = Vocabulary.load_or_build(
        paths.resolve(workdir) / "vocab.json", (r["instruction"] for r in records[d.train_split]),
        save=jax.process_index() == 0)
    languages = sorted({r["language"] for s in wanted for r in records[s]})
    # 0: as long as the longest reference path of the loaded splits
    max_path = d.max_path if d.max_path > 0 else max(len(r["path"]) for s in wanted
                                                     for r in records[s])
    episodes = {s: rxr_episodes.episodes(
        records[s], nodes, graph, vocab, languages, d.max_tokens, max_path, d.text_features,
        locate=functools.partial(rxr_data.record_location, d.tfds_config,
                                 d.train_split if s == HOLDOUT else s, manual_dir=manual or None),
        read_text_features=readers.get(s))
        for s in wanted}
    return dict(graph=graph, nodes=nodes, geodesic=geodesic_table(graph, scan_of), vocab=vocab,
                languages=languages, episodes=episodes, max_path=max_path,
                features=view_feature_table(config, graph, nodes))


def build_model(config: ml_collections.ConfigDict, vocab_size: int) -> RCMAgent:
    m = config.model
    return RCMAgent(vocab_size, m.embed_dim, m.hidden, m.conv_layers, m.kernel,
                    use_language=m.name != "vision_only", step_embedding=m.step_embedding,
                    use_structure=m.structure_features)


def init_params(model: RCMAgent, feature_dim: int, max_degree: int, key: jax.Array,
                text_dim: int | None = None):
    b, f = 2, feature_dim + views.ANGLE_DIM
    text = jnp.zeros((b, 4, text_dim)) if text_dim else None
    return model.init(key, jnp.ones((b, 4), jnp.int32), jnp.full((b,), 4, jnp.int32),
                      jnp.zeros((b, views.NUM_VIEWS, f)),
                      jnp.zeros((b, max_degree, f + views.STRUCTURE_DIM)),
                      jnp.ones((b, max_degree), bool), text)


def model_factory(model: RCMAgent) -> PolicyFactory:
    """Greedy policy of the model; consts = (params, view features)."""
    def factory(graph, consts, batch):
        params, features = consts
        ctx, mask = model.apply(params, batch["tokens"], batch["token_len"],
                                batch.get("text_features"), method=RCMAgent.encode)
        return rcm_policy(model, params, graph, features, ctx, mask, "greedy")
    return factory


def gold_factory(graph, consts, batch):
    """Replays the reference path's actions (a check: NE 0, SR = nDTW = 1)."""
    return replay_policy, batch["gold"]


def write_split_predictions(workdir: str, split: str, data: dict, per_episode: dict) -> str:
    """Writes the agent's paths on `split` as a leaderboard file in `workdir`: R2R's JSON for
    R2R instructions, RxR's JSON lines otherwise; returns its name."""
    eps = data["episodes"][split]
    r2r = bool(len(eps["annotator"])) and bool(
        np.all(eps["annotator"] == ANNOTATORS.index("r2r")))
    fmt = "r2r" if r2r else "rxr"
    name = f"predictions_{split}.json" + ("" if r2r else "l")
    rows = predictions.prediction_rows(per_episode["path"], per_episode["path_len"], eps,
                                       data["nodes"], data["graph"], fmt)
    predictions.write_predictions(paths.resolve(workdir) / name, rows, fmt)
    return name


def check_config(config: ml_collections.ConfigDict) -> None:
    if config.model.name not in MODELS:
        raise ValueError(f"unknown model.name {config.model.name!r}; choose from {MODELS}")
    if config.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {config.mode!r}")
    check_eval(config, r2r_eval.METRICS)
    lower_is_better = config.eval.metric in ("pl", "ne")
    if config.eval.mode != ("min" if lower_is_better else "max"):
        raise ValueError(f"eval.metric {config.eval.metric!r} is "
                         f"{'minimised' if lower_is_better else 'maximised'}: set eval.mode to "
                         f"{'min' if lower_is_better else 'max'!r}")


def baseline_steps(data: dict, config) -> int:
    """N, the mean number of moves of the train split's reference paths (rounded)."""
    return int(round(float(np.mean(data["episodes"][config.data.train_split]["path_len"] - 1))))


def horizons(config: ml_collections.ConfigDict, data: dict) -> tuple[int, int]:
    """(train_horizon, eval.horizon), each 0 meaning the longest reference path (`max_path`
    viewpoints: its moves and the STOP)."""
    return (config.train_horizon if config.train_horizon > 0 else data["max_path"],
            config.eval.horizon if config.eval.horizon > 0 else data["max_path"])


def baseline_rollouts(config, num_steps: int, horizon: int) -> dict:
    """{name: jitted rollout} of `eval.baselines` moving `num_steps` times, built once so each
    compiles once for every split; with several `eval.straight` readings of "go straight", the
    going-straight baselines once per reading, named `<baseline>/<reading>`."""
    readings = splits(config.eval.straight)
    out = {}
    for name in splits(config.eval.baselines):
        for straight in readings[:1] if name == "random_walk" else readings:
            key = name if name == "random_walk" or len(readings) == 1 else f"{name}/{straight}"
            out[key] = r2r_eval.make_rollout(
                r2r_eval.baseline_factory(name, num_steps, straight), horizon,
                config.loss.success_radius)
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


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       hooks: Sequence[Callable[[int], None]] = ()) -> dict:
    """Trains (or, in `baselines` mode, only evaluates) into `workdir`; returns (and writes) the
    results dict. `hooks` are called with the step number after every training step."""
    check_config(config)
    run = Run.start(config, workdir, RESUMABLE_CHANGES)
    data = load_data(config, workdir)
    if config.mode == "baselines":
        return run_baselines(config, run, data)
    model = build_model(config, len(data["vocab"]))
    train_eps = data["episodes"][config.data.train_split]
    text_dim = train_eps["text_features"].shape[-1] if "text_features" in train_eps else None
    params = init_params(model, data["features"].shape[-1], data["graph"].max_degree,
                         run.key(INIT), text_dim)
    state = train_state.TrainState.create(apply_fn=model.apply, params=params,
                                          tx=make_optimizer(config.optim, config.num_steps))
    graph = run.replicate(data["graph"])
    geodesic = run.replicate(data["geodesic"])
    features = run.replicate(jnp.asarray(data["features"]))

    train_horizon, eval_horizon = horizons(config, data)
    loss_config = ml_collections.ConfigDict({**config.loss.to_dict(), "horizon": train_horizon})
    train_step = dp.make_train_step(mixed_loss(model, loss_config), run.mesh, num_consts=3)
    stream = None
    if config.data.stream:   # this process's rows of each batch, read by grain's threads
        keys = [k for k in BATCH_KEYS if k in train_eps]
        stream = BatchStream.of_rows(train_eps, keys, config.batch_size, config.seed,
                                     config.data.stream_threads)
        sample = lambda key: dp.shard_process_local(next(stream), run.mesh)
    else:
        sample = dp.episode_sampler({k: train_eps[k] for k in BATCH_KEYS if k in train_eps},
                                    config.batch_size, run.mesh)
    rollout = r2r_eval.make_rollout(model_factory(model), eval_horizon,
                                    config.loss.success_radius)

    def evaluate(params, split=config.data.dev_split, languages=None, per_annotator=False,
                 write_files=False):
        ev = r2r_eval.evaluate(rollout, graph, geodesic, (params, features),
                               data["episodes"][split], run.key(EVAL), config.eval.batch_size,
                               languages, per_annotator)
        out = {k: v for k, v in ev.items() if k != "episodes"}
        if write_files and jax.process_index() == 0:
            out["predictions"] = write_split_predictions(run.workdir, split, data,
                                                         ev["episodes"])
        return out

    state, best_params, meta = run.fit(
        state, run.step_fn(train_step, sample, graph, features, geodesic),
        lambda params: {k: v for k, v in evaluate(params).items() if k in r2r_eval.METRICS},
        hooks=hooks, data=stream)

    num_steps = baseline_steps(data, config)
    results = {"config": config.to_dict(), "best_step": meta["best_step"],
               "last_step": meta["step"], "agent": config.model.name,
               "baseline_steps": num_steps, "languages": data["languages"]}
    baselines = baseline_rollouts(config, num_steps, eval_horizon)
    for split in splits(config.data.eval_splits):
        results[split] = {"episodes": len(data["episodes"][split]["start"]),
                          config.model.name: evaluate(best_params, split, data["languages"],
                                                      config.eval.per_annotator,
                                                      config.eval.write_predictions),
                          **evaluate_baselines(config, baselines, data, graph, geodesic, split,
                                               run.key(EVAL))}
    return run.finish(results, format_results(results))


def run_baselines(config: ml_collections.ConfigDict, run: Run, data: dict) -> dict:
    """The reference paths replayed and the baselines on every evaluation split; nothing trained."""
    graph, geodesic = jax.device_put(data["graph"]), jax.device_put(data["geodesic"])
    num_steps = baseline_steps(data, config)
    results = {"config": config.to_dict(), "agent": "gold", "baseline_steps": num_steps,
               "languages": data["languages"]}
    baselines = baseline_rollouts(config, num_steps, horizons(config, data)[1])
    for split in splits(config.data.eval_splits):
        eps = data["episodes"][split]
        gold = r2r_eval.evaluate(r2r_eval.make_rollout(gold_factory, eps["gold"].shape[1]), graph,
                                 geodesic, None, eps, run.key(EVAL), config.eval.batch_size,
                                 data["languages"], config.eval.per_annotator)
        results[split] = {"episodes": len(eps["start"]),
                          "gold": {k: v for k, v in gold.items() if k != "episodes"},
                          **evaluate_baselines(config, baselines, data, graph, geodesic, split,
                                               run.key(EVAL))}
    return run.finish(results, format_results(results))


def format_results(results: dict) -> str:
    names = r2r_eval.METRICS
    head = f"best step {results['best_step']}; " if "best_step" in results else ""
    lines = [f"RxR / R2R ({results['agent']}, {head}baselines move {results['baseline_steps']} "
             "steps; std over seeds in brackets):",
             f"{'split':12s} {'agent':24s} " + " ".join(f"{n.upper():>6s}" for n in names)]
    for split, res in results.items():
        if isinstance(res, dict) and "episodes" in res:
            for agent, m in res.items():
                if agent == "episodes":
                    continue
                lines.append(f"{split:12s} {agent:24s} " + " ".join(
                    f"{m[n]:6.3f}" + (f" ({m[n + '_std']:.3f})" if n + "_std" in m else "")
                    for n in names))
                for group in GROUPINGS:
                    for g, gm in m.get(group, {}).items():
                        lines.append(f"{split:12s} {'  ' + g:24s} " +
                                     " ".join(f"{gm[n]:6.3f}" for n in names))
    return "\n".join(lines)
