"""Training and evaluation of the RCM agent on RxR / R2R in the on-device Matterport simulator.

`train_and_evaluate(config, workdir)` trains with half behavioural cloning along the reference
path and half policy gradient with an nDTW reward (one `lax.scan` rollout per step, inside the
data-parallel jit step), checkpoints with orbax (a killed run resumes with identical results),
stops early on the dev metric, then reports PL / NE / SR / SPL / nDTW / SDTW of the best
parameters (greedy decoding) on every evaluation split, overall and per language, beside the
random-walk, random-heading and first-step baselines (Ku et al. 2020, Table 4).
"""
from __future__ import annotations

import os
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax.training import train_state

from ttw_jax.core.train import data_parallel as dp
from ttw_jax.core.train.logging import MetricWriter
from ttw_jax.core.train.loop import fit
from ttw_jax.core.train.workdir import check_workdir_config, write_results
from ttw_jax.core.vocab import Vocabulary
from ttw_jax.rxr import dataset as rxr_data, episodes as rxr_episodes, evaluation as r2r_eval, views
from ttw_jax.rxr.graph import SOURCE_HINT, geodesic_table, load_matterport_graph
from ttw_jax.rxr.losses import mixed_loss
from ttw_jax.rxr.rcm import RCMAgent, rcm_policy
from ttw_jax.rxr.synthetic import node_landmarks

# eval splits are not resumable: their scans join the graph (node numbering, action space)
RESUMABLE_CHANGES = ("patience", "eval.batch_size", "eval.baselines", "eval.baseline_seeds",
                     "data.tfds_dir", "data.manual_dir", "data.connectivity_dir")
KINDS = ("full", "language_only", "vision_only")
HOLDOUT = "train_holdout"   # dev split carved out of train (`data.holdout_every`)
BATCH_KEYS = ("start", "heading", "path", "path_len", "gold", "tokens", "token_len",
              "text_features", "word_mask", "view_mask", "has_masks")


def _splits(spec: str) -> list[str]:
    return [s for s in spec.split(",") if s]


def view_feature_table(config: ml_collections.ConfigDict, graph, nodes) -> np.ndarray:
    """[N, 36, D] view features for the config's agent kind (D = 0: angles only)."""
    d = config.data
    if config.model.kind == "language_only" or not d.features:
        return views.empty_view_features(len(nodes))
    if d.features == "synthetic":
        landmarks = node_landmarks([i.split("/", 1)[1] for i in nodes.ids], d.num_landmarks)
        return views.synthetic_view_features(graph, landmarks, d.num_landmarks, d.feature_dim,
                                             d.feature_noise, seed=config.seed)
    return views.load_view_features(d.features, nodes)


def load_data(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Graph, geodesics, view features, vocabulary and padded episodes of every named split."""
    d = config.data
    if config.model.kind not in KINDS:
        raise ValueError(f"unknown model.kind {config.model.kind!r}; choose from {KINDS}")
    if not d.connectivity_dir:
        raise ValueError("set data.connectivity_dir to the directory of Matterport "
                         f"<scan>_connectivity.json files. {SOURCE_HINT}")
    splits = sorted({d.train_split, d.dev_split, *_splits(d.eval_splits)} - {HOLDOUT})
    manual = d.connectivity_dir if d.tfds_config == "synthetic" else d.manual_dir
    records = rxr_data.load_split_records(d.tfds_config, splits, tfds_dir=d.tfds_dir or None,
                                          manual_dir=manual or None)
    if HOLDOUT in {d.dev_split, *_splits(d.eval_splits)}:   # every holdout_every-th train path
        train_records = records[d.train_split]
        records[HOLDOUT] = [r for r in train_records if r["path_id"] % d.holdout_every == 0]
        records[d.train_split] = [r for r in train_records
                                  if r["path_id"] % d.holdout_every != 0]
        splits.append(HOLDOUT)
    scans = sorted({r["scan"] for s in splits for r in records[s]})
    graph, nodes, scan_of = load_matterport_graph(d.connectivity_dir, scans)
    vocab = Vocabulary.load_or_build(
        os.path.join(workdir, "vocab.json"), (r["instruction"] for r in records[d.train_split]),
        save=jax.process_index() == 0)
    languages = sorted({r["language"] for s in splits for r in records[s]})
    episodes = {s: rxr_episodes.episodes(records[s], nodes, graph, vocab, languages,
                                         d.max_tokens, d.max_path) for s in splits}
    with_features = {s for s, e in episodes.items() if "text_features" in e}
    if with_features and with_features != set(splits):
        raise ValueError(f"text features exist for splits {sorted(with_features)} but not for "
                         f"{sorted(set(splits) - with_features)}: provide them for every split")
    return dict(graph=graph, nodes=nodes, geodesic=geodesic_table(graph, scan_of), vocab=vocab,
                languages=languages, episodes=episodes,
                features=view_feature_table(config, graph, nodes))


def build_model(config: ml_collections.ConfigDict, vocab_size: int) -> RCMAgent:
    m = config.model
    return RCMAgent(vocab_size, m.embed_dim, m.hidden, m.conv_layers, m.kernel,
                    use_language=m.kind != "vision_only", step_embedding=m.step_embedding)


def create_train_state(config, model: RCMAgent, feature_dim: int, max_degree: int,
                       key: jax.Array, text_dim: int | None = None):
    b, f = 2, feature_dim + views.ANGLE_DIM
    text = jnp.zeros((b, 4, text_dim)) if text_dim else None
    params = model.init(key, jnp.ones((b, 4), jnp.int32), jnp.full((b,), 4, jnp.int32),
                        jnp.zeros((b, views.NUM_VIEWS, f)),
                        jnp.zeros((b, max_degree, f + views.STRUCTURE_DIM)),
                        jnp.ones((b, max_degree), bool), text)
    lr = config.learning_rate
    if config.lr_schedule == "cosine":   # to 5% of the peak at num_steps
        lr = optax.cosine_decay_schedule(lr, config.num_steps, alpha=0.05)
    elif config.lr_schedule != "constant":
        raise ValueError(f"lr_schedule must be 'constant' or 'cosine', got {config.lr_schedule!r}")
    tx = optax.chain(optax.clip_by_global_norm(config.grad_clip), optax.adam(lr))
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)


def model_factory(model: RCMAgent) -> r2r_eval.PolicyFactory:
    """Greedy policy of the model; consts = (params, view features)."""
    def factory(graph, consts, batch):
        params, features = consts
        ctx, mask = model.apply(params, batch["tokens"], batch["token_len"],
                                batch.get("text_features"), method=RCMAgent.encode)
        return rcm_policy(model, params, graph, features, ctx, mask, "greedy")
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
    train_eps = data["episodes"][config.data.train_split]
    text_dim = train_eps["text_features"].shape[-1] if "text_features" in train_eps else None
    state = create_train_state(config, model, data["features"].shape[-1],
                               data["graph"].max_degree, jax.random.fold_in(base, 0), text_dim)
    writer = MetricWriter(workdir)
    graph = dp.replicate(data["graph"], mesh)
    geodesic = dp.replicate(data["geodesic"], mesh)
    features = dp.replicate(jnp.asarray(data["features"]), mesh)

    train_step = dp.make_train_step(mixed_loss(model, config.loss), mesh, num_consts=3)
    sample = dp.episode_sampler({k: train_eps[k] for k in BATCH_KEYS if k in train_eps},
                                config.batch_size, mesh)
    rollout = r2r_eval.make_rollout(model_factory(model), config.test_horizon,
                                    config.loss.success_radius)
    eval_key = jax.random.fold_in(base, 2)
    step_key = jax.random.fold_in(base, 1)
    dev = data["episodes"][config.data.dev_split]

    def step_fn(state, step):
        k_data, k_step = jax.random.split(jax.random.fold_in(step_key, step))
        return train_step(state, sample(k_data), k_step, graph, features, geodesic)

    def evaluate(params):
        ev = r2r_eval.evaluate(rollout, graph, geodesic, (params, features), dev, eval_key,
                               config.eval.batch_size)
        return {k: ev[k] for k in r2r_eval.METRICS}

    state, best_params, meta = fit(
        state, config=config, workdir=workdir, writer=writer,
        place=lambda tree: dp.replicate(tree, mesh), step_fn=step_fn, evaluate=evaluate,
        metric=config.eval.metric, mode="min" if config.eval.metric in ("pl", "ne") else "max",
        eval_prefix="dev", hooks=hooks)

    num_steps = int(round(float(np.mean(train_eps["path_len"] - 1))))
    results = {"config": config.to_dict(), "best_step": meta["best_step"],
               "last_step": meta["step"], "agent": config.model.kind,
               "baseline_steps": num_steps, "languages": data["languages"]}
    baselines = {name: r2r_eval.make_rollout(r2r_eval.baseline_factory(name, num_steps),
                                             config.test_horizon, config.loss.success_radius)
                 for name in _splits(config.eval.baselines)}    # compiled once each
    for split in _splits(config.data.eval_splits):
        eps = data["episodes"][split]
        ev = r2r_eval.evaluate(rollout, graph, geodesic, (best_params, features), eps, eval_key,
                               config.eval.batch_size, data["languages"])
        results[split] = {"episodes": len(eps["start"]),
                          config.model.kind: {k: v for k, v in ev.items() if k != "episodes"}}
        for name, run in baselines.items():
            runs = [r2r_eval.evaluate(run, graph, geodesic, None, eps,
                                      jax.random.fold_in(eval_key, 1000 + seed),
                                      config.eval.batch_size, data["languages"])
                    for seed in range(config.eval.baseline_seeds)]
            results[split][name] = {k: float(np.mean([r[k] for r in runs]))
                                    for k in r2r_eval.METRICS}
            results[split][name]["per_language"] = {
                lang: {k: float(np.mean([r["per_language"][lang][k] for r in runs]))
                       for k in r2r_eval.METRICS} for lang in runs[0]["per_language"]}
    write_results(workdir, results, format_results(results))
    writer.close()
    return results


def format_results(results: dict) -> str:
    names = r2r_eval.METRICS
    lines = [f"RxR / R2R ({results['agent']}, best step {results['best_step']}; baselines move "
             f"{results['baseline_steps']} steps):",
             f"{'split':12s} {'agent':16s} " + " ".join(f"{n.upper():>6s}" for n in names)]
    for split, res in results.items():
        if isinstance(res, dict) and "episodes" in res:
            for agent, m in res.items():
                if agent == "episodes":
                    continue
                lines.append(f"{split:12s} {agent:16s} " +
                             " ".join(f"{m[n]:6.3f}" for n in names))
                for lang, lm in m.get("per_language", {}).items():
                    lines.append(f"{split:12s} {'  ' + lang:16s} " +
                                 " ".join(f"{lm[n]:6.3f}" for n in names))
    return "\n".join(lines)
