"""Training and evaluation of Touchdown navigation agents (GA, RConcat), and the baselines.

`train_and_evaluate(config, workdir)` with `config.mode = "train"` imitates the gold actions with
the simulator inside `lax.scan` (teacher forcing), checkpoints with orbax (a killed run resumes
with identical results), stops early on the dev split's `eval.metric`, then reports TC / SPD / SED
of the best parameters on every evaluation split beside the Stop / Frequent / Random baselines.
`config.mode = "baselines"` trains nothing: it replays the gold actions through the simulator (a
check of its rules) and runs the baselines on the evaluation splits (Chen et al. 2019, Table 5;
`configs/baselines.py`).
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
from ttw_jax.core.env import PolicyFactory, replay_policy
from ttw_jax.core.train import data_parallel as dp, provenance as prov
from ttw_jax.core.train.run import (EVAL, INIT, Run, check_eval, evaluate_best, make_optimizer,
                                    mean_over_seeds, seed_keys, splits)
from ttw_jax.core.train.seeds import sequential_seeds
from ttw_jax.core.train.precision import with_dtype
from ttw_jax.core.vocab import Vocabulary, token_limit
from ttw_jax.touchdown import (env as td, episodes as nav_episodes, evaluation as nav_eval,
                               features as pano_features)
from ttw_jax.touchdown.agents import (ABLATIONS, IMAGE_ENCODERS, MAP_ENCODERS, Navigator,
                                     navigator_policy, official_cnn_min_size)
from ttw_jax.touchdown.dataset import (data_provenance, is_synthetic,
                                      load_touchdown_split_records, locator)
from ttw_jax.touchdown.losses import imitation_loss
from ttw_jax.touchdown import figures as nav_figures, predictions as nav_predictions
from ttw_jax.touchdown.projection import RGB_FOV, band_vfov
from ttw_jax.touchdown.reference import TouchdownReference
from ttw_jax.touchdown.validate import HIDDEN_SPLITS

BATCH_KEYS = ("start_pano", "start_heading", "tokens", "token_len", "gold", "gold_len")
RESUMABLE_CHANGES = ("patience", "eval.batch_size", "eval.baselines", "eval.baseline_seeds",
                     "eval.write_predictions", "eval.num_figures", "data.eval_splits", "data.tfds_dir", "data.manual_dir", "data.graph_dir",
                     "data.features")
MODELS = ("ga", "rconcat")
METRICS = ("tc", "spd", "sed")
MODES = ("train", "baselines")
SYNTHETIC_FEATURES = 'data.features="" (synthetic panorama features)'


def load_data(config: ml_collections.ConfigDict, workdir: str, wanted: Sequence[str]) -> dict:
    """Graph (and its node table and links), vocabulary (built on `data.train_split`
    when it is wanted), the records and padded episodes of the `wanted` splits, and `max_tokens`,
    their instructions' padded length (`data.max_tokens`, or 0: the longest of them)."""
    d = config.data
    graph, nodes, links, records = load_touchdown_split_records(
        d.tfds_config, sorted(set(wanted)), tfds_dir=d.tfds_dir or None,
        manual_dir=d.manual_dir or None, graph_dir=d.graph_dir or None)
    texts = (r["navigation_text"] for r in records.get(d.train_split, []))
    vocab = Vocabulary.load_or_build(paths.resolve(workdir) / "vocab.json", texts,
                                     save=jax.process_index() == 0)
    reference = TouchdownReference(links)
    max_tokens = token_limit(d.max_tokens, (r["navigation_text"] for s in set(wanted)
                                            for r in records[s]))
    episodes = {s: nav_episodes.episodes(
        records[s], nodes, reference, vocab, max_tokens, d.max_route,
        max(config.train_horizon, config.eval.horizon),
        locate=locator(d.tfds_config, s, d.manual_dir or None),
        truncate=truncation(config))
        for s in set(wanted)}
    return dict(graph=graph, nodes=nodes, links=links, records=records, vocab=vocab,
                episodes=episodes, max_tokens=max_tokens)


def load_features(config: ml_collections.ConfigDict, graph, nodes) -> tuple[np.ndarray, str]:
    """(features, column convention): the file `data.features`, or synthetic features of the
    graph for `model.image_encoder` drawn from `config.seed`; checked against the model."""
    d = config.data
    encoder = config.model.image_encoder
    if d.features:
        features, convention = pano_features.load_pano_features(d.features, nodes)
    elif encoder == "rgb":
        features = pano_features.synthetic_pano_bands(graph, d.image_height, d.image_width,
                                                      d.feature_noise, seed=config.seed)
        convention = "centred"
    elif encoder == "official":
        features = pano_features.synthetic_pano_images(graph, d.image_height, d.image_width,
                                                       d.image_channels, d.feature_noise,
                                                       seed=config.seed)
        convention = "centred"
    else:
        features = pano_features.synthetic_pano_features(graph, d.feature_width, d.feature_dim,
                                                         d.feature_noise, seed=config.seed)
        convention = "centred"
    check_features(config, features.shape, d.features or "synthetic features",
                   features.dtype, convention)
    return features, convention


def check_perception(config: ml_collections.ConfigDict) -> None:
    """Refuses synthetic panorama features (`data.features` empty) beside the release's records
    unless `data.allow_synthetic_perception` (`provenance.check_perception`); the baselines
    mode sees no features."""
    d = config.data
    prov.check_perception(config.mode == "train" and not is_synthetic(d.tfds_config),
                          not d.features, d.allow_synthetic_perception, SYNTHETIC_FEATURES)


def perception_provenance(config: ml_collections.ConfigDict, width: int | None) -> dict:
    """The provenance `perception` entry of panorama features of `width` channels: the file
    `data.features`, or the synthetic ones (`seed`); none (`width` None) for the baselines."""
    if width is None:
        return prov.NONE
    if config.data.features:
        return prov.perception_file(config.data.features, width)
    return prov.synthetic_perception(config.seed, width)


def run_provenance(config: ml_collections.ConfigDict, width: int | None,
                   max_tokens: int | None = None) -> dict:
    """The provenance of a run of `config` (`ttw_jax.core.train.provenance`): its records and
    graph, its features (`perception_provenance`), the official metrics, one seed, and the
    instructions' padded length `max_tokens` (`token_limits`) where given."""
    d = config.data
    data = data_provenance(d.tfds_config, config.seed, d.tfds_dir or None, d.manual_dir or None,
                           d.graph_dir or None)
    return prov.provenance(config, data=data, perception=perception_provenance(config, width),
                           hidden_splits=HIDDEN_SPLITS,
                           token_limits={"data.max_tokens": max_tokens})


def truncation(config: ml_collections.ConfigDict) -> str:
    """How an instruction longer than `data.max_tokens` is treated (`Vocabulary.encode`):
    nothing reads the text in `baselines` mode ("ignore"); the release's instructions are never
    cut ("error", naming the longest); synthetic ones are cut with a warning."""
    if config.mode == "baselines":
        return "ignore"
    return "warn" if config.data.tfds_config.startswith("synthetic") else "error"


def check_features(config: ml_collections.ConfigDict, shape: tuple, where: str,
                   dtype=None, convention: str = "centred") -> None:
    """ValueError unless features of `shape` suit `model.image_encoder` and `crop`: a table
    [N, W, C] for "table"; maps [N, H, W, C] of at least the official CNN's input size for
    "official"; RGB bands [N, H, W, 3] uint8 in the "centred" convention, tall enough for the
    60-degree views, for "rgb" (crop: the views' size)."""
    encoder = config.model.image_encoder
    maps = encoder in MAP_ENCODERS
    if len(shape) != (4 if maps else 3):
        raise ValueError(f"{where}: shape {tuple(shape)}, but model.image_encoder="
                         f"{encoder!r} takes "
                         f"{'maps [N, H, W, C]' if maps else 'a table [N, W, C]'}")
    if not 0 < config.crop <= shape[-2]:
        raise ValueError(f"crop={config.crop} columns of {shape[-2]}-column panoramas ({where})")
    if encoder == "rgb":
        if shape[-1] != 3 or (dtype is not None and np.dtype(dtype) != np.uint8):
            raise ValueError(f"{where}: {dtype} {tuple(shape)}, but model.image_encoder='rgb' "
                             "takes RGB bands [N, H, W, 3] uint8 (convert_features "
                             "--layout=rgb)")
        if convention != "centred":
            raise ValueError(f"{where}: RGB bands are in the 'centred' column convention, not "
                             f"{convention!r}")
        if band_vfov(shape) < RGB_FOV - 1e-6:
            raise ValueError(f"{where}: bands of {shape[1]} x {shape[2]} span "
                             f"{band_vfov(shape):.1f} degrees of pitch, less than the "
                             f"{RGB_FOV:.0f}-degree views")
    if maps:
        need = official_cnn_min_size(config.model.name)
        rows = config.crop if encoder == "rgb" else shape[1]
        if min(rows, config.crop) < need:
            raise ValueError(f"the official {config.model.name} CNN needs crops of at least "
                             f"{need} x {need}; got {rows} rows x crop={config.crop}")


def build_model(config: ml_collections.ConfigDict, vocab_size: int) -> Navigator:
    m = config.model
    return with_dtype(Navigator(vocab_size, m.name, m.embed_dim, m.text_hidden, m.hidden,
                                m.conv_features, m.action_dim, m.ablation,
                                0.1 if m.uniform_init else None, m.image_encoder), config.dtype)


def init_params(config, model: Navigator, feature_shape: tuple, key: jax.Array):
    """Parameters for features of `feature_shape` ([N, W, C] or [N, H, W, C])."""
    b, t = 2, 3
    crop = (*feature_shape[1:-2], config.crop, feature_shape[-1])
    if config.model.image_encoder == "rgb":
        crop = (config.crop, config.crop, feature_shape[-1])
    return model.init(key, jnp.ones((b, 4), jnp.int32), jnp.full((b,), 4, jnp.int32),
                      jnp.zeros((b, t, *crop)), jnp.zeros((b, t), jnp.int32))


def model_factory(model: Navigator, crop: int, convention: str = "centred") -> PolicyFactory:
    """Greedy policy of the model; consts = (params, features, yaw); `convention`: the feature
    table's column convention."""
    def factory(sim, consts, batch):
        params, features, yaw = consts
        text = model.apply(params, batch["tokens"], batch["token_len"], method=Navigator.encode)
        return navigator_policy(model, params, features, yaw, crop, text, convention=convention)
    return factory


def gold_factory(sim, consts, batch):
    """Replays the demonstrated actions (a check of the simulator's rules)."""
    return replay_policy, batch["gold"]


def baseline_rollouts(config) -> dict:
    """{name: jitted rollout} of `eval.baselines`, built once so each compiles once for every
    split."""
    return {name: nav_eval.make_rollout(nav_eval.baseline_factory(name), config.eval.horizon)
            for name in splits(config.eval.baselines)}


def evaluate_baselines(config, baselines: dict, sim, data, split: str, hops, key) -> dict:
    """{baseline: {tc, spd, sed}} on `split`: the mean over `eval.baseline_seeds` seeds (the
    deterministic ones run once; `seed_keys`), with `<metric>_std` when there are several."""
    out = {}
    for name, run in baselines.items():
        seeds = config.eval.baseline_seeds if name == "random" else 1
        out[name] = mean_over_seeds([nav_eval.evaluate(run, sim, None, data["episodes"][split],
                                                       hops, k, config.eval.batch_size)
                                     for k in seed_keys(key, seeds)], METRICS)
    return out


@sequential_seeds("touchdown_nav", when=lambda c: c.mode != "train")   # baselines: in turn
def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       hooks: Sequence[Callable[[int], None]] = ()) -> dict:
    """Trains (or, in `baselines` mode, only evaluates) into `workdir`; returns (and writes) the
    results dict. `hooks` are called with the step number after every training step."""
    if config.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {config.mode!r}")
    if config.model.name not in MODELS:
        raise ValueError(f"model.name must be one of {MODELS}, got {config.model.name!r}")
    if config.model.image_encoder not in IMAGE_ENCODERS:
        raise ValueError(f"model.image_encoder must be one of {IMAGE_ENCODERS}, got "
                         f"{config.model.image_encoder!r}")
    if config.model.ablation not in ABLATIONS:
        raise ValueError(f"model.ablation must be one of {ABLATIONS}, got "
                         f"{config.model.ablation!r}")
    check_eval(config, METRICS)
    check_perception(config)
    run = Run.start(config, workdir, RESUMABLE_CHANGES, parallel_seeds=config.mode == "train")
    if config.mode == "baselines":
        return run_baselines(config, run)
    d = config.data
    data = load_data(config, workdir, [d.train_split, d.dev_split, *splits(d.eval_splits)])
    model = build_model(config, len(data["vocab"]))
    graph, nodes = data["graph"], data["nodes"]
    if d.features:      # a file's features: one copy, shared by every seed
        table, convention = load_features(config, graph, nodes)
        features = run.replicate(jnp.asarray(table))
        seed_features = run.per_seed(lambda r: features)
    else:               # synthetic features are drawn from each seed ("centred" columns)
        seed_features = run.per_seed(lambda r: run.replicate(jnp.asarray(
            load_features(r.config, graph, nodes)[0])))
        features, convention = seed_features, "centred"
    data["features_shape"] = (seed_features[0] if run.seeds else seed_features).shape
    tx = make_optimizer(config.optim, config.num_steps)
    state = run.stack(run.per_seed(lambda r: train_state.TrainState.create(
        apply_fn=model.apply, params=init_params(config, model, data["features_shape"],
                                                 r.key(INIT)), tx=tx)))
    sim = run.replicate(td.compile_sim(graph))
    train_step, consts = run.train_step(
        imitation_loss(model, config.crop, config.train_horizon, convention), sim, features)
    train_eps = data["episodes"][d.train_split]
    sample = dp.episode_sampler({k: train_eps[k] for k in BATCH_KEYS}, config.batch_size, run.mesh,
                                names=[f"{d.train_split}: route_id {i}"
                                       for i in train_eps["route_id"]])
    rollout = nav_eval.make_rollout(model_factory(model, config.crop, convention),
                                    config.eval.horizon)
    hops = {s: nav_episodes.hops_to_goal(graph, data["episodes"][s]["goal"])
            for s in {d.dev_split, *splits(d.eval_splits)}}   # [E, N] each: not for train

    def evaluator(r: Run, features):
        """evaluate(params, split, full=False) of the run `r` (its evaluation key) over its
        `features`: TC / SPD / SED, or (`full`) `nav_eval.evaluate`'s whole result."""
        def evaluate(params, split=d.dev_split, full=False):
            ev = nav_eval.evaluate(rollout, sim, (params, features, sim.graph.yaw),
                                   data["episodes"][split], hops[split], r.key(EVAL),
                                   config.eval.batch_size)
            return ev if full else {k: ev[k] for k in METRICS}
        return evaluate

    evaluate = run.per_seed(evaluator, seed_features)
    state, best_params, meta = run.fit(state, run.step_fn(train_step, sample, *consts), evaluate,
                                       hooks=hooks)
    report = functools.partial(report_run, data=data, sim=sim, hops=hops,
                               baselines=baseline_rollouts(config))
    return run.each_seed(report, best_params, meta, evaluate, name="touchdown_nav")


def report_run(run: Run, best_params, meta: dict, evaluate, *, data: dict, sim, hops,
               baselines: dict) -> dict:
    """One run's results: the best parameters on every evaluation split (predictions and the
    test figure when asked for) beside the `baselines` (`baseline_rollouts`); written by
    `run.finish`."""
    config, d = run.config, run.config.data
    results = {"config": config.to_dict(), "best_step": meta["best_step"],
               "last_step": meta["step"], "agent": config.model.name}
    for split in splits(d.eval_splits):
        if config.eval.write_predictions or (split == "test" and config.eval.num_figures):
            ev = evaluate(best_params, split, full=True)
            agent = {k: ev[k] for k in METRICS}
            write_outputs(config, run, data, split, ev["episodes"], agent)
        else:
            agent = evaluate_best(meta, split, d.dev_split, lambda: evaluate(best_params, split))
        results[split] = {config.model.name: agent,
                          "episodes": len(data["episodes"][split]["goal"]),
                          **evaluate_baselines(config, baselines, sim, data, split, hops[split],
                                               run.key(EVAL))}
    return run.finish(results, format_results(results),
                      run_provenance(config, data["features_shape"][-1], data["max_tokens"]))


def write_outputs(config, run: Run, data: dict, split: str, per_episode: dict,
                  agent: dict) -> None:
    """Process 0 writes `predictions_<split>.jsonl` (each route's visited panoramas, scored back
    by `ttw_jax.touchdown.predictions`) and, for the test split, `trajectories.png`; the file
    name goes into `agent`."""
    if jax.process_index() != 0:
        return
    eps = data["episodes"][split]
    if config.eval.write_predictions:
        agent["predictions"] = f"predictions_{split}.jsonl"
        nav_predictions.write_predictions(
            run.workdir / agent["predictions"],
            nav_predictions.prediction_rows(eps["route_id"], per_episode["path"], data["nodes"]))
    if split == "test" and config.eval.num_figures:
        nav_figures.plot_routes(data["graph"], eps, per_episode["path"], per_episode["tc"],
                                run.workdir / "trajectories.png", config.eval.num_figures,
                                title=f"{config.model.name}, {split}")


def run_baselines(config: ml_collections.ConfigDict, run: Run) -> dict:
    """Gold replay and the baselines on every evaluation split, nothing trained."""
    data = load_data(config, run.workdir, splits(config.data.eval_splits))
    sim = td.compile_sim(data["graph"])
    results = {"config": config.to_dict(), "agent": "gold", "horizon": config.eval.horizon}
    baselines = baseline_rollouts(config)
    for split in splits(config.data.eval_splits):
        eps = data["episodes"][split]
        hops = nav_episodes.hops_to_goal(data["graph"], eps["goal"])
        gold = nav_eval.evaluate(nav_eval.make_rollout(gold_factory, eps["gold"].shape[1]), sim,
                                 None, eps, hops, run.key(EVAL), config.eval.batch_size)
        results[split] = {"episodes": len(eps["goal"]),
                          "gold": {**{k: gold[k] for k in METRICS},
                                   "tc_count": int(gold["episodes"]["tc"].sum())},
                          **evaluate_baselines(config, baselines, sim, data, split, hops,
                                               run.key(EVAL))}
    return run.finish(results, format_results(results),
                      run_provenance(config, None, data["max_tokens"]))


def format_results(results: dict) -> str:
    head = (f"best step {results['best_step']}" if "best_step" in results
            else f"baselines, horizon {results['horizon']}")
    lines = [f"Touchdown navigation ({results['agent']}, {head}):",
             f"{'split':10s} {'agent':10s} {'TC':>7s} {'SPD':>7s} {'SED':>7s}"]
    for split, res in results.items():
        if isinstance(res, dict) and "episodes" in res:
            for agent, m in res.items():
                if agent != "episodes":
                    std = (f"   (std over seeds: {m['tc_std']:.4f} {m['spd_std']:.2f} "
                           f"{m['sed_std']:.4f})" if "tc_std" in m else "")
                    lines.append(f"{split:10s} {agent:10s} {m['tc']:7.4f} {m['spd']:7.2f} "
                                 f"{m['sed']:7.4f}{std}")
    return "\n".join(lines)
