"""Talk The Walk landmark classification (Appendix F, Table 18) with the released protocol.

`train_and_evaluate(config, workdir)`:

1. builds one example per corner of the loaded neighbourhoods (`ttw_jax.talk_the_walk.landmarks.
   features`): 10 classes (the 9 landmark types and Empty), inputs from the release's
   `resnetfeat.json` / `<nbh>/text.json` (`data.features_dir`; empty: synthetic files in the same
   layout written to a temporary folder) and optionally a FastText `.vec` file;
2. splits the corners 70 / 30 at random (seeded by `config.seed`);
3. trains the bag-of-embeddings classifier with Adam on mini-batches under the released weighted
   binary cross-entropy for `num_epochs` epochs, reshuffling each epoch;
4. after every epoch scores train (the mean over its training batches, taken before each update,
   as released) and valid (mean over batches of `batch_size`): loss and weighted precision, recall,
   F1; keeps the epoch with the best `eval.metric` (valid loss, as released and in the paper);
5. reports that epoch's row of Table 18 beside the 'all positive' and 'random (0.5)' baselines on
   the valid corners, per-class scores, and `learning_curve.png`;
6. writes beside `results.json` what these scores come from: `predictions_train.npz` and
   `predictions_valid.npz` (per corner: its key, neighbourhood and location, the gold and the
   predicted labels and the logits of the kept epoch, the batch it was scored in, its loss
   weights; the layout in `ttw_jax.talk_the_walk.landmarks.predictions`) and the kept parameters,
   `params.safetensors` (`model.write_params`). `python -m experiments.ttw_landmarks.score`
   re-scores a predictions file to the reported numbers.

`config.dtype=bfloat16` runs the classifier's look-ups and matmuls in bfloat16
(`ttw_jax.core.train.precision`: the parameters, the optimizer state and the loss stay float32);
`config.profile_steps="FIRST,LAST"` traces those training steps (the batches of all epochs,
counted from 1) into `<workdir>/profile`.

Training takes seconds, so there is no checkpointing (`params.safetensors` holds the kept
parameters, not a training state): a rerun of the same config in the same workdir starts again
and writes the same results (another config is refused).
"""
from __future__ import annotations

import os
import shutil
import tempfile

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from ttw_jax.core import viz
from ttw_jax.core.train import provenance
from ttw_jax.core.train.epochs import steps_per_epoch
from ttw_jax.core.train.loop import Profiler, stop_if_preparing
from ttw_jax.core.train.precision import with_dtype
from ttw_jax.core.train.run import INIT, STEPS, Run, check_eval, make_optimizer
from ttw_jax.core.train.seeds import sequential_seeds
from ttw_jax.core.train.workdir import profile_window
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.landmarks import features as lf
from ttw_jax.talk_the_walk.landmarks import predictions as lp
from ttw_jax.talk_the_walk.landmarks import release
from ttw_jax.talk_the_walk.landmarks.losses import class_weights, weighted_bce
from ttw_jax.talk_the_walk.landmarks.metrics import (all_positive, multilabel_metrics,
                                                     random_positive)
from ttw_jax.talk_the_walk.landmarks.model import BagOfEmbeddings, write_params

MODELS = ("bag_of_embeddings",)
FEATURES = ("resnet", "textrecog", "fasttext")
SELECT_METRICS = ("loss", "weighted_f1")
PARAMS_FILE = "params.safetensors"
# Table 18 of the paper (valid split): train loss, valid loss, train F1, valid F1, valid P, valid R.
PAPER_TABLE18 = {
    "all positive": (None, None, None, 0.39313, 0.26128, 1.0),
    "random (0.5)": (None, None, None, 0.32013, 0.24132, 0.25773),
    "textrecog": (0.01462, 0.01837, 0.31205, 0.31684, 0.2635, 0.50515),
    "fasttext": (0.00992, 0.00994, 0.24019, 0.31548, 0.26133, 0.47423),
    "fasttext (100 dim)": (0.00721, 0.00863, 0.32651, 0.28672, 0.24964, 0.4433),
    "resnet": (0.00735, 0.00751, 0.17085, 0.20159, 0.13114, 0.58763),
    "resnet (256 dim)": (0.0051, 0.00748, 0.60911, 0.31953, 0.27733, 0.50515),
}


def feature_kinds(config) -> list[str]:
    kinds = [k for k in config.model.features.split(",") if k]
    bad = [k for k in kinds if k not in FEATURES]
    if bad or not kinds or len(set(kinds)) != len(kinds):
        raise ValueError(f"model.features must be a comma-separated subset of {FEATURES}, got "
                         f"{config.model.features!r}")
    if "fasttext" in kinds and not config.data.fasttext_vec:
        raise ValueError("model.features=fasttext needs config.data.fasttext_vec: a FastText .vec "
                         "file (e.g. wiki.en.vec from fasttext.cc); nothing is downloaded")
    return kinds


def row_name(config) -> str:
    """The Table 18 row this config reproduces, e.g. 'resnet (256 dim)'."""
    kinds = feature_kinds(config)
    name = "+".join(kinds)
    if config.data.pca_components and {"resnet", "fasttext"} & set(kinds):
        name += f" ({config.data.pca_components} dim)"
    return name


def check_data(config: ml_collections.ConfigDict) -> None:
    """Refuses synthetic feature files (no `data.features_dir`) for the release's maps unless
    `data.allow_synthetic_perception`."""
    d = config.data
    provenance.check_perception(bool(d.maps_dir), not d.features_dir,
                                d.allow_synthetic_perception,
                                "data.features_dir='' (synthetic resnetfeat.json and text.json)")


def check_config(config: ml_collections.ConfigDict) -> None:
    """Fails before any work on a value the trainer does not know (the sizes, `dtype` and
    `profile_steps`: `Run.start`'s common checks)."""
    check_eval(config, SELECT_METRICS)
    if config.model.name not in MODELS:
        raise ValueError(f"model.name must be one of {MODELS}, got {config.model.name!r}")
    if config.num_epochs < 1:
        raise ValueError(f"need num_epochs >= 1, got {config.num_epochs}")
    if not 0.0 < config.valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be in (0, 1), got {config.valid_fraction}")
    feature_kinds(config)
    check_data(config)


def build_model(config: ml_collections.ConfigDict, vocab_size: int):
    """The bag-of-embeddings classifier computing in `config.dtype` (`precision.with_dtype`);
    `vocab_size` text words (id 0 pads)."""
    m = config.model
    return with_dtype(BagOfEmbeddings(num_classes=lf.NUM_CLASSES, text_vocab=vocab_size + 1,
                                      text_embed=m.text_embed,
                                      resnet_scale_div=m.resnet_scale_div, pool=m.pool,
                                      bias=m.bias), config.dtype)


def run_provenance(config: ml_collections.ConfigDict, width: int) -> dict:
    """The provenance of a run: the maps (labels) as data; as perception the release's
    `resnetfeat.json` (ResNet only) or its features folder (text too), or the synthetic files,
    `width` wide (the ResNet vectors the classifier reads, else the text vocabulary)."""
    d = config.data
    data = (provenance.release_data(d.maps_dir) if d.maps_dir
            else provenance.synthetic_data(d.synthetic_seed))
    if not d.features_dir:
        seen = provenance.synthetic_perception(d.synthetic_seed, width)
    elif feature_kinds(config) == ["resnet"]:
        seen = provenance.perception_file(os.path.join(d.features_dir, release.RESNET_FILE), width)
    else:
        seen = provenance.perception_file(d.features_dir, width)
    return provenance.provenance(config, data=data, perception=seen,
                                 hidden_splits=maps.HIDDEN_SPLITS)


def load_data(config: ml_collections.ConfigDict) -> dict:
    """{'corners': lf.Corners, 'inputs': {resnet (N, 4, D) | text (N, L) | fasttext (N, L)},
    'word_table': (V + 1, F) or None, 'vocab_size', 'features_dir', 'oov'}."""
    d = config.data
    kinds = feature_kinds(config)
    names = [n for n in d.neighborhoods.split(",") if n]
    nmaps = (maps.load_maps(d.maps_dir, names) if d.maps_dir
             else maps.synthetic_maps(d.synthetic_seed, names or maps.NEIGHBORHOODS))
    use_text = bool({"textrecog", "fasttext"} & set(kinds))
    tmp = None
    features_dir = d.features_dir
    if not features_dir:
        tmp = features_dir = tempfile.mkdtemp(prefix="ttw_landmarks_")
        release.write_synthetic_release(tmp, {m.name: m.corners for m in nmaps}, d.synthetic_seed,
                                        dim=d.synthetic_dim)
    try:
        resnet, text = lf.read_release(features_dir, nmaps, "resnet" in kinds, use_text,
                                       d.pca_components if "resnet" in kinds else 0)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    corners = lf.build_corners(nmaps, resnet, text,
                               os.path.join(features_dir, release.RESNET_FILE))
    inputs, table, vocab, oov = {}, None, [], 0
    if resnet is not None:
        inputs["resnet"] = corners.resnet
    if use_text:
        vocab = lf.vocabulary(text)
        ids = lf.token_ids(corners.words, vocab)
        if "textrecog" in kinds:
            inputs["text"] = ids
        if "fasttext" in kinds:
            vectors, dim = release.read_vec(d.fasttext_vec, vocab)
            table, oov = lf.word_table(vocab, vectors, dim, d.pca_components)
            inputs["fasttext"] = ids
    return {"corners": corners, "inputs": inputs, "word_table": table, "vocab_size": len(vocab),
            "features_dir": d.features_dir or "synthetic", "oov": oov}


@sequential_seeds("ttw_landmarks")   # its seeds train one after another
def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Trains and evaluates (steps in the module docstring); returns and writes the results:
    {row, table18 {train_loss, valid_loss, train_f1, valid_f1, valid_precision, valid_recall},
    best_epoch, corners, valid {model, all_positive, random}, history, ...}."""
    check_config(config)
    run = Run.start(config, workdir, batch_sizes=())
    data = load_data(config)
    stop_if_preparing(workdir)    # its own epoch loop, not `fit`
    corners, inputs, table = data["corners"], data["inputs"], data["word_table"]
    valid_mask = lf.random_split(len(corners), config.seed, config.valid_fraction)
    idx = {"train": np.flatnonzero(~valid_mask), "valid": np.flatnonzero(valid_mask)}
    if not len(idx["train"]) or not len(idx["valid"]):
        raise ValueError(f"{len(corners)} corners give an empty train or valid split")
    labels = corners.labels
    weights = class_weights(labels, labels[idx["train"]])

    model = build_model(config, data["vocab_size"])
    table = None if table is None else jnp.asarray(table)
    take = lambda rows: {k: jnp.asarray(v[rows]) for k, v in inputs.items()}
    params = model.init(run.key(INIT), take(idx["train"][:1]), table)["params"]
    per_epoch = steps_per_epoch(len(idx["train"]), config.batch_size)
    tx = make_optimizer(config.optim, config.num_epochs * per_epoch)
    opt_state = tx.init(params)

    def loss_fn(p, batch, y, w):
        logits = model.apply({"params": p}, batch, table)
        return weighted_bce(logits, y, w), logits

    @jax.jit
    def train_step(p, opt_state, batch, y, w):
        (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, batch, y, w)
        updates, opt_state = tx.update(grads, opt_state, p)
        return optax.apply_updates(p, updates), opt_state, loss, logits

    eval_step = jax.jit(loss_fn)

    def score_batches(rows_list, step):
        """(means over batches, weighted by batch size, of the loss and the weighted scores
        (`lp.batch_means`), what a predictions file holds of the pass: {rows, batch, logits});
        step(i, rows) -> (loss, logits) of the i-th batch."""
        losses, logits = zip(*(step(i, rows) for i, rows in enumerate(rows_list)))
        scored = {"rows": np.concatenate(rows_list),
                  "batch": np.repeat(np.arange(len(rows_list)), [len(r) for r in rows_list]),
                  "logits": np.concatenate([np.asarray(z, np.float32) for z in logits])}
        means = lp.batch_means(scored["batch"], scored["logits"] >= 0, labels[scored["rows"]],
                               [float(x) for x in losses])
        return means, scored

    def batches(rows):
        return [rows[i:i + config.batch_size] for i in range(0, len(rows), config.batch_size)]

    run.writer.truncate_after(0)               # a rerun starts the history again
    shuffle_key = run.key(STEPS)
    sign = 1.0 if config.eval.mode == "max" else -1.0
    best, best_params, best_epoch, best_row, history = -np.inf, params, 0, None, []
    kept = {}                                  # the kept epoch's scored passes, by split
    state = {"params": params, "opt": opt_state, "step": 0}
    profiler = Profiler(profile_window(config.profile_steps), run.workdir)

    on_device = lambda rows: (take(rows), jnp.asarray(labels[rows]), jnp.asarray(weights[rows]))

    def train_batch(i, rows):
        state["step"] += 1
        profiler.before(state["step"])
        state["params"], state["opt"], loss, logits = train_step(
            state["params"], state["opt"], *on_device(rows))
        profiler.after(state["step"], state["params"])
        return loss, logits

    valid_rows = batches(idx["valid"])                 # the same batches every epoch
    valid_inputs = [on_device(rows) for rows in valid_rows]
    valid_batch = lambda i, rows: eval_step(state["params"], *valid_inputs[i])

    for epoch in range(1, config.num_epochs + 1):
        order = np.asarray(jax.random.permutation(jax.random.fold_in(shuffle_key, epoch),
                                                  idx["train"]))
        train, train_pass = score_batches(batches(order), train_batch)
        valid, valid_pass = score_batches(valid_rows, valid_batch)
        record = {"step": epoch, **{f"train/{k}": v for k, v in train.items()},
                  **{f"valid/{k}": v for k, v in valid.items()}}
        history.append(record)
        run.writer.write(epoch, {k: v for k, v in record.items() if k != "step"})
        if sign * valid[config.eval.metric] > best:
            best, best_params, best_epoch = sign * valid[config.eval.metric], state["params"], epoch
            kept = {"train": train_pass, "valid": valid_pass}
            best_row = {"train_loss": train["loss"], "valid_loss": valid["loss"],
                        "train_f1": train["weighted_f1"], "valid_f1": valid["weighted_f1"],
                        "valid_precision": valid["weighted_precision"],
                        "valid_recall": valid["weighted_recall"]}
    profiler.close()        # a window past the last step ends with the run

    y_valid = labels[idx["valid"]]     # the valid batches are idx["valid"] in order
    preds = {"model": kept["valid"]["logits"] >= 0, "all_positive": all_positive(y_valid.shape),
             "random": random_positive(y_valid.shape, config.seed)}
    results = {"config": config.to_dict(), "row": row_name(config), "table18": best_row,
               "best_epoch": best_epoch, "num_epochs": config.num_epochs,
               "class_names": list(lf.CLASS_NAMES), "features_dir": data["features_dir"],
               "corners": {s: int(len(v)) for s, v in idx.items()},
               "positives": {"train": labels[idx["train"]].sum(0).astype(int).tolist(),
                             "valid": y_valid.sum(0).astype(int).tolist()},
               "vocab_size": data["vocab_size"], "words_without_vector": data["oov"],
               "valid": {k: lp.summarize(multilabel_metrics(p, y_valid), lf.CLASS_NAMES)
                         for k, p in preds.items()},
               "history": history,
               "predictions": {s: lp.file_name(s) for s in lp.SPLITS}, "params": PARAMS_FILE}
    if jax.process_index() == 0:
        write_outputs(run.workdir, config, best_epoch, best_params, kept, corners, weights,
                      preds["random"])
    viz.plot_learning_curve(
        history, os.path.join(str(run.workdir), "learning_curve.png"),
        keys=("train/loss", "valid/loss", "valid/weighted_f1"), xlabel="epoch",
        hlines={"all positive": results["valid"]["all_positive"]["weighted_f1"],
                "random (0.5)": results["valid"]["random"]["weighted_f1"]})
    width = inputs["resnet"].shape[-1] if "resnet" in inputs else data["vocab_size"]
    return run.finish(results, format_results(results), run_provenance(config, width))


def write_outputs(workdir, config, epoch: int, params, kept: dict, corners: lf.Corners,
                  weights: np.ndarray, random: np.ndarray) -> None:
    """`predictions_<split>.npz` of the kept epoch's scored passes (`kept` {split: {rows, batch,
    logits}}; the layout in `ttw_jax.talk_the_walk.landmarks.predictions`), with the valid
    random baseline's draw, and the kept parameters as `params.safetensors`."""
    for split in lp.SPLITS:
        k = kept[split]
        rows = k["rows"]
        lp.write_predictions(workdir / lp.file_name(split), lp.build(
            split, epoch, corners.keys[rows], rows, k["batch"], corners.labels[rows],
            k["logits"], weights[rows], lf.CLASS_NAMES,
            random if split == "valid" else None))
    write_params(workdir / PARAMS_FILE, params,
                 {"epoch": str(epoch), "row": row_name(config),
                  "config_hash": provenance.config_hash(config)})


def format_results(results: dict) -> str:
    """Table 18's columns for this run and the baselines, beside the paper's rows."""
    fmt = lambda x: f"{x:9.4f}" if x is not None else f"{'-':>9}"
    head = (f"{'features':<22} {'tr loss':>9} {'va loss':>9} {'tr F1':>9} {'va F1':>9} "
            f"{'va P':>9} {'va R':>9}")
    t, v = results["table18"], results["valid"]
    ours = [(results["row"], (t["train_loss"], t["valid_loss"], t["train_f1"], t["valid_f1"],
                              t["valid_precision"], t["valid_recall"])),
            ("all positive", (None, None, None, v["all_positive"]["weighted_f1"],
                              v["all_positive"]["weighted_precision"],
                              v["all_positive"]["weighted_recall"])),
            ("random (0.5)", (None, None, None, v["random"]["weighted_f1"],
                              v["random"]["weighted_precision"], v["random"]["weighted_recall"]))]
    lines = [f"landmark classification ({results['features_dir']} features): "
             f"{results['corners']} corners, best epoch {results['best_epoch']} of "
             f"{results['num_epochs']}", "this run (weighted scores on the valid corners):", head]
    lines += [f"{name:<22} " + " ".join(fmt(x) for x in row) for name, row in ours]
    lines += ["paper, Table 18:", head]
    lines += [f"{name:<22} " + " ".join(fmt(x) for x in row) for name, row in PAPER_TABLE18.items()]
    return "\n".join(lines)
