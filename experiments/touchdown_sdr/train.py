"""Training and evaluation of Touchdown Spatial Description Resolution (LingUNet and baselines).

`train_and_evaluate(config, workdir)` minimises KL(Gaussian target || predicted distribution over
feature pixels) with Adam through the shared data-parallel step, stops early on accuracy within
80 px on a tune set (7% of the training descriptions; checked every `eval_every` steps, or
every `eval_every_epochs` epochs of the train split: `fit_config`), then reports accuracy and
consistency at 40 / 80 / 120 px and the mean distance error, at the official evaluation's scale
(`ttw_jax.touchdown.sdr.metrics`), on every evaluation split beside the Random / Center / Average
baselines, and writes heatmaps of predicted distributions with the gold location.
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import jax
import ml_collections
import numpy as np
from flax.training import train_state

from ttw_jax.core import paths
from ttw_jax.core.train import provenance as prov
from ttw_jax.core.train.run import (INIT, Run, check_eval, evaluate_best,
                                    make_optimizer, mean_over_seeds)
from ttw_jax.core.train.precision import with_dtype
from ttw_jax.core.train.epochs import in_steps, steps_per_epoch
from ttw_jax.core.train.seeds import check_fits, sequential_seeds
from ttw_jax.touchdown.dataset import data_provenance
from ttw_jax.touchdown.sdr import figures, metrics as sdr_metrics, predictions as sdr_predictions
from ttw_jax.touchdown.sdr.batches import TrainRows
from ttw_jax.touchdown.sdr.training_data import load_data, load_prepared, record_views
from ttw_jax.touchdown.sdr.evaluation import baseline_metrics, evaluate, make_predictor
from ttw_jax.touchdown.sdr.losses import gaussian_target, make_loss
from ttw_jax.touchdown.sdr.models import SDR_MODELS, build_sdr_model
from ttw_jax.touchdown.sdr.official import import_state_dict, read_checkpoint
from ttw_jax.touchdown.validate import HIDDEN_SPLITS

RESUMABLE_CHANGES = ("patience", "eval.batch_size", "eval.baselines", "eval.baseline_seeds",
                     "data.eval_splits", "data.tfds_dir", "data.manual_dir", "write_plots",
                     "num_heatmaps", "eval.write_predictions")
METRICS = sdr_metrics.NAMES
# with dtype=bfloat16, the pixel-score heads stay float32: 2,900+ bfloat16 scores tie, and the
# predicted pixel (their argmax) falls on the first one
SDR_FLOAT32_MODULES = ("out", "mlp_out")
MODES = ("train", "baselines")
# The official training set's mean Touchdown location (x, y), the official Average baseline's
# prediction (lil-lab touchdown `sdr/predict.py`).
OFFICIAL_TRAIN_MEAN = (0.5299110677027002, 0.5137217333987077)


def data_entry(config: ml_collections.ConfigDict) -> dict:
    """The provenance `data` entry: the release folder `data.manual_dir` (streamed, or the
    baselines' records), else that of `data.tfds_config` (`dataset.data_provenance`)."""
    d = config.data
    if d.stream or config.mode == "baselines":
        return prov.release_data(d.manual_dir)
    return data_provenance(d.tfds_config, config.seed, d.tfds_dir or None, d.manual_dir or None)


def perception_entry(config: ml_collections.ConfigDict, data: dict, width: int | None) -> dict:
    """The provenance `perception` entry of feature maps of `width` channels (None: none, the
    baselines): synthetic scenes with synthetic `data`, else the release's feature files
    (`<manual_dir>/features`, or the prepared dataset that holds them)."""
    if width is None:
        return prov.NONE
    if data["kind"] == "synthetic":
        return prov.synthetic_perception(config.seed, width)
    folder = config.data.manual_dir or data["folder"]
    features = paths.join(folder, "features")
    return prov.perception_file(features if paths.isdir(features) else folder, width)


def run_provenance(config: ml_collections.ConfigDict, width: int | None,
                   max_tokens: int | None = None) -> dict:
    """The provenance of a run of `config` (`ttw_jax.core.train.provenance`): the official
    metrics, one seed, the descriptions' padded length `max_tokens` where given. Synthetic
    scenes never meet the release's records here (synthetic_sdr draws both), so there is no
    synthetic perception to refuse."""
    data = data_entry(config)
    return prov.provenance(config, data=data, perception=perception_entry(config, data, width),
                           hidden_splits=HIDDEN_SPLITS,
                           token_limits={"data.max_tokens": max_tokens})


def baselines_on_records(config: ml_collections.ConfigDict) -> dict:
    """The Random / Center / Average baselines (`eval.baselines`) on the views of the record
    files in `data.manual_dir` (the gold locations are in the records), at the official scale;
    Random as the mean (and std) over `eval.baseline_seeds` seeds. Average is the `train`
    file's mean location when it is there, else the official training set's."""
    views = record_views(config.data.manual_dir)
    train = views.get("train", {"center": np.array([OFFICIAL_TRAIN_MEAN])})
    results = {"config": config.to_dict(), "model": "baselines",
               "average_location": np.asarray(train["center"]).mean(0).tolist()}
    for split in [s for s in config.data.eval_splits.split(",") if s]:
        if split not in views:
            raise ValueError(f"no records of split {split!r} in {config.data.manual_dir}; it has "
                             f"{sorted(views)}")
        results[split] = {"examples": len(views[split]["center"]),
                          "descriptions": len(set(views[split]["text"]))}
        for name in [b for b in config.eval.baselines.split(",") if b]:
            seeds = config.eval.baseline_seeds if name == "random" else 1
            runs = [baseline_metrics(name, views[split], train, config.seed + i)
                    for i in range(seeds)]
            results[split][name] = mean_over_seeds(runs, METRICS)
    return results


def optimizer_config(config) -> ml_collections.ConfigDict:
    """`config.optim`, with the paper's learning rate for the model when it is <= 0."""
    optim = ml_collections.ConfigDict(config.optim.to_dict())
    if optim.learning_rate <= 0:
        optim.learning_rate = 5e-4 if config.model.name.startswith("lingunet") else 1e-3
    return optim


def build_model(config, vocab_size: int):
    m = config.model
    return with_dtype(build_sdr_model(
        m.name, vocab_size, levels=m.levels, channels=m.channels, stride=m.stride,
        mlp_hidden=m.mlp_hidden, mlp_layers=m.mlp_layers, embed_dim=m.embed_dim,
        hidden=m.hidden, dropout=m.dropout, deconv_dropout=m.deconv_dropout,
        identical_levels=m.identical_levels, uniform_init=m.uniform_init), config.dtype,
        SDR_FLOAT32_MODULES)


def check_eval_every_epochs(config: ml_collections.ConfigDict) -> None:
    """ValueError unless `eval_every_epochs` is an integer >= 0."""
    e = config.eval_every_epochs
    if isinstance(e, bool) or not isinstance(e, int) or e < 0:
        raise ValueError(f"eval_every_epochs must be an integer >= 0 (0: every eval_every "
                         f"steps), got {e!r}")


def fit_config(config: ml_collections.ConfigDict, num_views: int) -> ml_collections.ConfigDict:
    """The config `fit` runs under: with `eval_every_epochs` = n > 0, a copy whose `eval_every`
    is n epochs of the `num_views` training views, ceil(num_views / batch_size) steps each (the
    batches per epoch of the official loader; the paper checks early stopping after each
    epoch); else `config` itself."""
    if not config.eval_every_epochs:
        return config
    return in_steps(config, steps_per_epoch(num_views, config.batch_size),
                    eval_every=config.eval_every_epochs)


def imported_params(path: str, template) -> dict:
    """The parameters of an official LingUNet checkpoint, checked against `template` (the
    model's own initialisation): ValueError naming every array whose shape differs."""
    params = import_state_dict(read_checkpoint(path))
    want = jax.tree_util.tree_map(np.shape, template)
    got = jax.tree_util.tree_map(np.shape, params)
    if jax.tree_util.tree_structure(want) != jax.tree_util.tree_structure(got) or want != got:
        flat_w = dict(jax.tree_util.tree_flatten_with_path(want)[0])
        flat_g = dict(jax.tree_util.tree_flatten_with_path(got)[0])
        diff = [f"{jax.tree_util.keystr(k)}: {flat_g.get(k)} vs {v}" for k, v in flat_w.items()
                if flat_g.get(k) != v]
        raise ValueError(f"{path}: the checkpoint does not fit model.name=lingunet_official "
                         f"with this config (checkpoint vs config): {diff[:6]}")
    return params


def seeds_share_a_program(config: ml_collections.ConfigDict) -> bool:
    """Training from prepared data puts the seeds on one axis; streamed rows (one reader per
    seed) and the baselines (nothing trains) take the seeds in turn."""
    return config.mode == "train" and not config.data.stream


@sequential_seeds("touchdown_sdr", when=lambda c: not seeds_share_a_program(c))
def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       hooks: Sequence[Callable[[int], None]] = ()) -> dict:
    """Trains, checkpoints into `workdir`, evaluates; returns (and writes) the results dict.
    With `num_seeds` > 1 the seeds train in one program (each its own tune split and
    vocabulary) unless their vocabularies differ in size, their epochs in steps (with
    `eval_every_epochs`), or they do not fit in a device's memory (`seeds.SeedsApart`: they
    then train in turn)."""
    if config.model.name not in SDR_MODELS:
        raise ValueError(f"model.name must be one of {tuple(SDR_MODELS)}, got "
                         f"{config.model.name!r}")
    check_eval(config, METRICS)
    check_eval_every_epochs(config)
    if config.model.checkpoint and config.model.name != "lingunet_official":
        raise ValueError("model.checkpoint imports an official LingUNet: set "
                         "model.name=lingunet_official")
    if config.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {config.mode!r}")
    run = Run.start(config, workdir, RESUMABLE_CHANGES,
                    parallel_seeds=seeds_share_a_program(config))
    if config.mode == "baselines":
        results = baselines_on_records(config)
        return run.finish(results, format_results(results), run_provenance(config, None))
    raw = None if config.data.stream else load_prepared(config)
    data = run.per_seed(lambda r: load_data(r.config, r.workdir, raw))
    first = data[0] if run.seeds else data      # every seed's shapes (checked next)
    vocab_size = run.shared(run.per_seed(lambda r, d: len(d["vocab"]), data),
                            "the vocabulary sizes of the tune splits (embedding tables)")
    num_views = lambda d: len(d["splits"]["train"]["center"])
    run.shared(run.per_seed(lambda r, d: fit_config(config, num_views(d)).eval_every, data),
               f"the steps between evaluations (eval_every_epochs={config.eval_every_epochs})")
    fit_cfg = fit_config(config, num_views(first))
    model = build_model(config, vocab_size)
    tx = make_optimizer(optimizer_config(config), config.num_steps)

    def init_params(r: Run, d: dict):
        t = d["splits"]["train"]
        return model.init(r.key(INIT), t["tokens"][:2], t["token_len"][:2],
                          t["features"][:2].astype(np.float32))

    params = run.per_seed(init_params, data)
    if config.model.checkpoint:   # read once, every seed starts from it
        imported = imported_params(config.model.checkpoint, params[0] if run.seeds else params)
        params = run.per_seed(lambda r: imported)
    state = run.stack(run.per_seed(lambda r, p: train_state.TrainState.create(
        apply_fn=model.apply, params=p, tx=tx), params))
    train_step, _ = run.train_step(make_loss(model, config.sigma))
    samplers = run.per_seed(lambda r, d: TrainRows(r.config, d["splits"]["train"], run.mesh),
                            data)
    step_fn = run.step_fn(train_step, samplers, host_order=True)
    if run.seeds:   # e.g. LingUNet at the paper's size: N copies may not fit
        check_fits(train_step, lambda: (state, *step_fn.batch(1)))
    predict = make_predictor(model)

    def tuner(r: Run, d: dict):
        return lambda params: evaluate(predict, params, d["splits"]["tune"],
                                       config.eval.batch_size)[0]

    tune_metrics = run.per_seed(tuner, data)
    if config.num_steps == 0 and config.model.checkpoint:   # evaluate the imported model
        best_params = state.params
        meta = run.per_seed(lambda r: {"best_step": 0, "step": 0, "best_eval": None})
    else:
        state, best_params, meta = run.fit(state, step_fn, tune_metrics, eval_prefix="tune",
                                           hooks=hooks, config=fit_cfg,
                                           data=None if run.seeds else samplers.sampler)
    report = functools.partial(report_run, predict=predict, eval_every=fit_cfg.eval_every)
    return run.each_seed(report, best_params, meta, data, tune_metrics, name="touchdown_sdr")


def report_run(run: Run, best_params, meta: dict, data: dict, tune_metrics, *, predict,
               eval_every: int) -> dict:
    """One run's results: its best parameters on the tune and evaluation splits beside the
    baselines, predictions files and heatmaps where asked for; written by `run.finish`."""
    config = run.config
    splits, train = data["splits"], data["splits"]["train"]
    results = {"config": config.to_dict(), "model": config.model.name,
               "best_step": meta["best_step"], "last_step": meta["step"],
               "eval_every": eval_every,
               "num_params": int(sum(x.size for x in jax.tree_util.tree_leaves(best_params)))}
    for split in ["tune", *[s for s in config.data.eval_splits.split(",") if s]]:
        # heatmaps.png: the test split's first views of `num_heatmaps` distinct descriptions
        drawn = figures.first_of_each_text(splits[split]["text"], config.num_heatmaps) \
            if split == "test" and config.write_plots and jax.process_index() == 0 else []
        if split == "tune":   # fit's evaluation at the best step: the same numbers
            metrics = evaluate_best(meta, split, "tune", lambda: tune_metrics(best_params))
        else:
            metrics, probs, dists, pixels = evaluate(predict, best_params, splits[split],
                                                     config.eval.batch_size, keep=drawn)
            if config.eval.write_predictions and jax.process_index() == 0:
                metrics["predictions"] = f"predictions_{split}.jsonl"
                sdr_predictions.write_predictions(
                    run.workdir / metrics["predictions"],
                    sdr_predictions.prediction_rows(splits[split], pixels))
        results[split] = {config.model.name: metrics, "examples": len(splits[split]["center"])}
        for name in [b for b in config.eval.baselines.split(",") if b]:
            results[split][name] = baseline_metrics(name, splits[split], train, config.seed)
        if drawn:
            s = {k: (v[drawn] if hasattr(v, "shape") else [v[i] for i in drawn])
                 for k, v in splits[split].items()}
            h, w = s["features"].shape[1:3]
            figures.plot_sdr_heatmaps(
                np.abs(s["features"].astype(np.float32)).mean(-1), probs,
                np.asarray(gaussian_target(s["center"], h, w, config.sigma)),
                np.asarray(sdr_metrics.center_to_pixel(s["center"], h, w)), dists[drawn],
                s["text"], run.workdir / "heatmaps.png")
    return run.finish(results, format_results(results),
                      run_provenance(config, train["features"].shape[-1], data["max_tokens"]))


def format_results(results: dict) -> str:
    head = ("baselines on the records" if results["model"] == "baselines" else
            f"{results['model']}, {results['num_params']:,} parameters, best step "
            f"{results['best_step']}")
    lines = [f"Touchdown SDR ({head}; official scale, 3,680 x 800 px; std over seeds in "
             "brackets):",
             f"{'split':10s} {'model':10s} " + " ".join(
                 f"{n.replace('consistency', 'cons'):>8s}" for n in METRICS)]
    for split, res in results.items():
        if isinstance(res, dict) and "examples" in res:
            for name, m in res.items():
                if isinstance(m, dict):
                    lines.append(f"{split:10s} {name:10s} " + " ".join(
                        (f"{m[n]:8.1f}" if n == "distance" else f"{m[n]:8.3f}")
                        + (f" ({m[n + '_std']:.3f})" if n + "_std" in m else "")
                        for n in METRICS))
    return "\n".join(lines)
