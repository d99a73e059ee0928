"""Training and evaluation of Talk The Walk landmark classification (Appendix F).

`train_and_evaluate(config, workdir)` trains a `LandmarkClassifier` with Adam(W) on the training
corners (full batch by default) under inverse-frequency weighted binary cross-entropy, keeps the
parameters with the best validation F1 (`eval.metric`), and reports micro/macro
precision, recall and F1 on train/valid/test for the model and the 'all positive' and 'random'
(each class with probability `config.random_p`) baselines. A class is predicted when its logit
is > 0. The whole run takes seconds, so there is no checkpointing (orbax) and no resuming: a
rerun with the same config starts again and overwrites `<workdir>/results.json` and
`metrics.jsonl` (another config in the same workdir is refused, as for every trainer).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from ttw_jax.core.train.run import INIT, STEPS, Run, check_eval, make_optimizer
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.landmarks import features as lf
from ttw_jax.talk_the_walk.landmarks.losses import landmark_loss, pos_weights
from ttw_jax.talk_the_walk.landmarks.metrics import (all_positive, multilabel_metrics,
                                                     random_positive)
from ttw_jax.talk_the_walk.landmarks.model import LandmarkClassifier

METHODS = ("model", "all_positive", "random")
SELECT_METRICS = ("micro_f1", "macro_f1")
MODELS = ("landmark_classifier",)


def load_data(config: ml_collections.ConfigDict) -> dict[str, dict[str, np.ndarray]]:
    """{split: {'keys' (N,), 'features' (N, 4, D) float32, 'labels' (N, 9) float32}}."""
    d = config.data
    names = [n for n in d.neighborhoods.split(",") if n]
    if d.features and not d.maps_dir:
        raise ValueError("config.data.features needs the real maps: set config.data.maps_dir")
    nmaps = (maps.load_maps(d.maps_dir, names) if d.maps_dir
             else maps.synthetic_maps(d.synthetic_seed, names or maps.NEIGHBORHOODS))
    if d.features:
        feats, source = lf.load_features(d.features), d.features
    else:
        feats = lf.synthetic_features(nmaps, d.synthetic_dim, d.synthetic_seed, d.synthetic_noise,
                                      d.synthetic_visibility)
        source = "synthetic features"
    data = {}
    for split, corners in lf.split_corners(nmaps).items():
        keep = np.ones(len(corners), bool)
        if d.allow_missing:
            keep = np.asarray([k in feats for k in corners.keys], bool)
        keys = corners.keys[keep]
        try:
            x = lf.gather_features(feats, keys.tolist(), source)
        except KeyError as e:
            raise ValueError(f"{e.args[0]} ({split} split); set config.data.allow_missing=True to "
                             "drop corners without features") from None
        data[split] = {"keys": keys, "labels": corners.labels[keep], "features": x}
    if not len(data["train"]["keys"]):
        raise ValueError(f"no training corners with features ({source})")
    if d.standardize:
        views = data["train"]["features"].reshape(-1, data["train"]["features"].shape[-1])
        mean, std = views.mean(0), views.std(0) + 1e-6
        for split in data.values():
            split["features"] = ((split["features"] - mean) / std).astype(np.float32)
    return data


def summarize(m: dict) -> dict:
    """JSON-ready scores: the micro/macro floats and per-class precision/recall/f1/support."""
    out = {k: v for k, v in m.items() if k.startswith(("micro_", "macro_"))}
    out["per_class"] = {name: {"precision": float(m["precision"][c]), "recall": float(m["recall"][c]),
                               "f1": float(m["f1"][c]), "support": int(m["support"][c])}
                        for c, name in enumerate(lf.CLASS_NAMES)}
    return out


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Trains, selects on validation F1, evaluates; returns (and writes) the results dict:
    {config, best_step, pos_weight, corners, history, train/valid/test: {model, all_positive,
    random: scores}} (scores as in `summarize`)."""
    check_eval(config, SELECT_METRICS)
    if config.eval.mode != "max":
        raise ValueError(f"eval.mode must be 'max' for F1, got {config.eval.mode!r}")
    if config.eval_every < 1 or config.num_steps < config.eval_every:
        raise ValueError("need 1 <= config.eval_every <= config.num_steps")
    if config.model.name not in MODELS:
        raise ValueError(f"model.name must be one of {MODELS}, got {config.model.name!r}")
    tx = make_optimizer(config.optim, config.num_steps)
    run = Run.start(config, workdir, batch_sizes=())
    data = load_data(config)
    train = data["train"]
    n_train = len(train["keys"])
    m = config.model
    model = LandmarkClassifier(hidden=m.hidden, num_classes=lf.NUM_CLASSES, pool=m.pool,
                               dropout=m.dropout)
    params = model.init(run.key(INIT), jnp.asarray(train["features"][:1]))["params"]
    opt_state = tx.init(params)
    run.writer.truncate_after(0)               # a rerun starts the history again
    pw = pos_weights(train["labels"], config.max_pos_weight)
    loss_fn = landmark_loss(model.apply, pw)
    x_train, y_train = jnp.asarray(train["features"]), jnp.asarray(train["labels"])
    step_key = run.key(STEPS)
    batch_size = config.batch_size

    def step(i, carry):
        params, opt_state, _ = carry
        k_batch, k_drop = jax.random.split(jax.random.fold_in(step_key, i))
        if batch_size:
            idx = jax.random.randint(k_batch, (batch_size,), 0, n_train)
            batch = {"features": x_train[idx], "labels": y_train[idx]}
        else:
            batch = {"features": x_train, "labels": y_train}
        (loss, _), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch, k_drop)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    @jax.jit
    def run_steps(params, opt_state, start):
        return jax.lax.fori_loop(start, start + config.eval_every, step,
                                 (params, opt_state, jnp.zeros((), jnp.float32)))

    predict = jax.jit(lambda p, x: model.apply({"params": p}, x) > 0)
    inputs = {s: jnp.asarray(v["features"]) for s, v in data.items()}

    best, best_params, best_step, history = -1.0, params, 0, []
    for start in range(0, config.num_steps - config.eval_every + 1, config.eval_every):
        params, opt_state, loss = run_steps(params, opt_state, start)
        now = start + config.eval_every
        m = multilabel_metrics(np.asarray(predict(params, inputs["valid"])), data["valid"]["labels"])
        history.append({"step": now, "loss": float(loss), "valid_micro_f1": m["micro_f1"],
                        "valid_macro_f1": m["macro_f1"]})
        run.writer.write(now, {"train/loss": float(loss), "valid/micro_f1": m["micro_f1"],
                               "valid/macro_f1": m["macro_f1"]})
        if m[config.eval.metric] > best:
            best, best_params, best_step = m[config.eval.metric], params, now

    results = {"config": config.to_dict(), "best_step": best_step, "num_steps": config.num_steps,
               "class_names": list(lf.CLASS_NAMES), "pos_weight": pw.tolist(),
               "corners": {s: len(v["keys"]) for s, v in data.items()}, "history": history}
    for i, (split, v) in enumerate(data.items()):
        preds = {"model": np.asarray(predict(best_params, inputs[split])),
                 "all_positive": all_positive(v["labels"].shape),
                 "random": random_positive(v["labels"].shape, config.seed * 10 + i, config.random_p)}
        results[split] = {k: summarize(multilabel_metrics(p, v["labels"])) for k, p in preds.items()}
    return run.finish(results, format_results(results))


def format_results(results: dict) -> str:
    lines = [f"landmark classification: {results['corners']} corners, best step "
             f"{results['best_step']} of {results['num_steps']}",
             f"{'split':<6} {'method':<13} {'micro P':>8} {'micro R':>8} {'micro F1':>9} "
             f"{'macro P':>8} {'macro R':>8} {'macro F1':>9}"]
    for split in maps.SPLITS:
        for method in METHODS:
            r = results[split][method]
            lines.append(f"{split:<6} {method:<13} {r['micro_precision']:8.3f} {r['micro_recall']:8.3f} "
                         f"{r['micro_f1']:9.3f} {r['macro_precision']:8.3f} {r['macro_recall']:8.3f} "
                         f"{r['macro_f1']:9.3f}")
    return "\n".join(lines)
