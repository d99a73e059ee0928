"""The complete Touchdown task (Chen et al. 2019, section 8): a pipeline of a navigation agent and
an SDR model, scored by whether the agent finds Touchdown (`ttw_jax.touchdown.full_task`).

`train_and_evaluate(config, workdir)` takes each stage from a finished run (`nav_workdir`,
`sdr_workdir`) or trains it first into `<workdir>/nav` / `<workdir>/sdr`; then it runs the
agent greedily on `data.split` (the navigation run's test horizon), resolves the description at
every panorama from which Touchdown is visible, and reports the full task's accuracy at 40 / 80
/ 120 px beside the navigation metrics and the SDR model alone at the gold goal (the full task
with perfect navigation). It writes `full_task.png`: the SDR prediction where the agent stopped.
"""
from __future__ import annotations

import json
from typing import Callable, Sequence

import jax
import ml_collections
from absl import logging
import numpy as np
from flax.training import train_state

from experiments.touchdown_full.configs.default import SHARED
from experiments.touchdown_nav import train as nav_train
from experiments.touchdown_nav.configs import default as nav_default
from experiments.touchdown_sdr import train as sdr_train
from experiments.touchdown_sdr.configs import default as sdr_default
from ttw_datasets.touchdown import touchdown_dataset_builder as td_builder
from ttw_jax.core import paths
from ttw_jax.core.train import provenance as prov
from ttw_jax.core.train.checkpoint import restore_best_params
from ttw_jax.core.train.run import EVAL, Run, make_optimizer
from ttw_jax.core.train.seeds import sequential_seeds
from ttw_jax.core.train.workdir import flatten
from ttw_jax.core.vocab import Vocabulary, token_limit
from ttw_jax.touchdown import (env as td, episodes as nav_episodes, evaluation as nav_eval,
                               full_task)
from ttw_jax.touchdown.dataset import data_provenance, is_synthetic, prepare
from ttw_jax.touchdown.sdr import figures, metrics as sdr_metrics
from ttw_jax.touchdown.sdr.evaluation import evaluate as sdr_evaluate, make_predictor
from ttw_jax.touchdown.sdr.losses import gaussian_target
from ttw_jax.touchdown.validate import HIDDEN_SPLITS

# The stages' own workdirs guard their configs (a stage trained here refuses another config
# when the pipeline reruns), so the pipeline's workdir leaves `nav.*` and `sdr.*` to them.
RESUMABLE_CHANGES = ("eval.sdr_batch_size", "write_plots", "num_panels", "data.tfds_dir",
                     "data.manual_dir", "data.graph_dir", "data.features", "nav.", "sdr.")
PATH_KEYS = {"nav": ("tfds_dir", "manual_dir", "graph_dir", "features"),
             "sdr": ("tfds_dir", "manual_dir")}
DEFAULTS = {"nav": nav_default, "sdr": sdr_default}
VIEWS = ("synthetic", "release")


def stage_config(config: ml_collections.ConfigDict, stage: str) -> ml_collections.ConfigDict:
    """The `nav` / `sdr` stage's config: the finished run's own (`<dir>/config.json`, laid over
    today's defaults, so runs from before a key was added still load; its `dtype` too) when
    `<stage>_workdir` is set, else the sub-config with the pipeline's `dtype`, `profile_steps`
    and `num_devices` (`configs.default.SHARED`, over any the sub-config holds); the data paths
    set in `config.data` override the stage's, and `data.allow_synthetic_perception` set covers
    the navigation stage too."""
    workdir = config[f"{stage}_workdir"]
    if workdir:
        path = paths.resolve(workdir) / "config.json"
        if not path.is_file():
            raise FileNotFoundError(f"{stage}_workdir={workdir} holds no config.json: not a run "
                                    f"of experiments.touchdown_{stage}")
        saved = flatten(json.loads(path.read_text(encoding="utf-8")))
        c = DEFAULTS[stage].get_config()
        known = flatten(c.to_dict())
        c.update_from_flattened_dict({k: v for k, v in saved.items() if k in known})
    else:
        c = ml_collections.ConfigDict(config[stage].to_dict())
        for key in SHARED:
            c[key] = config[key]
    for key in PATH_KEYS[stage]:
        if config.data[key]:
            c.data[key] = config.data[key]
    if stage == "nav" and config.data.allow_synthetic_perception:
        c.data.allow_synthetic_perception = True
    return c


def check_config(config: ml_collections.ConfigDict) -> None:
    """Fails before any work on a value the pipeline does not know (its `dtype` and
    `profile_steps`, and the stages' sizes: `Run.start`'s common checks)."""
    if config.data.views not in VIEWS:
        raise ValueError(f"data.views must be one of {VIEWS}, got {config.data.views!r}")


def check_perception(config: ml_collections.ConfigDict, nav_cfg) -> None:
    """Refuses synthetic perception beside the release's routes (synthetic panorama features for
    the agent, or synthetic SDR scenes at the routes' ends) unless
    `data.allow_synthetic_perception` (`provenance.check_perception`)."""
    real = not is_synthetic(nav_cfg.data.tfds_config)
    allowed = config.data.allow_synthetic_perception
    prov.check_perception(real, not nav_cfg.data.features, allowed, nav_train.SYNTHETIC_FEATURES)
    prov.check_perception(real, config.data.views == "synthetic", allowed,
                          "data.views=synthetic (synthetic SDR scenes)")


def run_provenance(config: ml_collections.ConfigDict, nav_cfg, sdr_cfg, nav_width: int,
                   sdr_width: int, token_limits: dict | None = None) -> dict:
    """The pipeline's provenance: the navigation records and graph (and the SDR run's data under
    "sdr" with `data.views=release`); the perception of both stages, the synthetic one on top
    when either is synthetic (the other under "sdr" / "navigation"); the stages' dtypes; the
    texts' padded lengths of the pipeline's split (`token_limits`, where given)."""
    d = nav_cfg.data
    data = data_provenance(d.tfds_config, nav_cfg.seed, d.tfds_dir or None, d.manual_dir or None,
                           d.graph_dir or None)
    nav = nav_train.perception_provenance(nav_cfg, nav_width)
    if config.data.views == "release":
        data["sdr"] = sdr_train.data_entry(sdr_cfg)
        sdr = sdr_train.perception_entry(sdr_cfg, data["sdr"], sdr_width)
    else:
        sdr = prov.synthetic_perception(config.data.scene_seed, sdr_width)
    if sdr["kind"] == "synthetic" and nav["kind"] != "synthetic":
        perception = {**sdr, "navigation": nav}
    else:
        perception = {**nav, "sdr": sdr}
    out = prov.provenance(config, data=data, perception=perception, hidden_splits=HIDDEN_SPLITS,
                          token_limits=token_limits)
    out["dtype"] = (nav_cfg.dtype if nav_cfg.dtype == sdr_cfg.dtype
                    else f"navigation {nav_cfg.dtype}, sdr {sdr_cfg.dtype}")
    return out


def restore(workdir: str, model, params, optim, num_steps: int):
    """(best parameters, best step) of the run in `workdir` (`params`: a template of their
    shapes); warns when that run has not finished."""
    state = train_state.TrainState.create(apply_fn=model.apply, params=params,
                                          tx=make_optimizer(optim, num_steps))
    best, meta = restore_best_params(workdir, state)
    if not meta.get("stopped") and meta["step"] < num_steps:
        logging.warning("%s has trained %d of its %d steps: using its best parameters so far "
                        "(step %d)", workdir, meta["step"], num_steps, meta["best_step"])
    return best, meta["best_step"]


def navigate(nav_cfg, nav_dir: str, split: str, key: jax.Array) -> dict:
    """The navigation run's agent on `split`: {tc, spd, sed, final [E] panoid, route_id [E],
    goal [E] panoid, records, links, best_step, feature_width, max_tokens (the instructions'
    padded length)}."""
    data = nav_train.load_data(nav_cfg, nav_dir, [split])
    data["features"], data["convention"] = nav_train.load_features(nav_cfg, data["graph"],
                                                                   data["nodes"])
    model = nav_train.build_model(nav_cfg, len(data["vocab"]))
    template = nav_train.init_params(nav_cfg, model, data["features"].shape, jax.random.key(0))
    params, best_step = restore(nav_dir, model, template, nav_cfg.optim, nav_cfg.num_steps)
    sim = td.compile_sim(data["graph"])
    eps = data["episodes"][split]
    rollout = nav_eval.make_rollout(
        nav_train.model_factory(model, nav_cfg.crop, data["convention"]), nav_cfg.eval.horizon)
    hops = nav_episodes.hops_to_goal(data["graph"], eps["goal"])
    features = jax.numpy.asarray(data["features"])
    ev = nav_eval.evaluate(rollout, sim, (params, features, sim.graph.yaw), eps, hops, key,
                           nav_cfg.eval.batch_size)
    ids = np.asarray(data["nodes"].ids)
    return {**{k: ev[k] for k in nav_train.METRICS}, "final": ids[ev["episodes"]["final"]],
            "goal": ids[eps["goal"]], "route_id": eps["route_id"],
            "records": data["records"][split], "links": data["links"], "best_step": best_step,
            "feature_width": data["features"].shape[-1], "max_tokens": data["max_tokens"]}


def sdr_views(config, sdr_cfg, nav: dict) -> dict:
    """The SDR views of the split's routes (the `load_sdr` arrays): `data.views` "release"
    reads the SDR run's own TFDS config (the release's views, with their feature maps);
    "synthetic" draws scenes at the routes' ends like the SDR run's synthetic training data."""
    d = config.data
    source = td_builder.Builder.builder_configs.get(sdr_cfg.data.tfds_config)
    synthetic = source is not None and source.synthetic
    if d.views == "release":
        if synthetic:
            raise ValueError(f"data.views=release needs an SDR run on the release "
                             f"(touchdown/sdr), not touchdown/{sdr_cfg.data.tfds_config}")
        prepare(sdr_cfg.data.tfds_config, sdr_cfg.data.tfds_dir or None,
                sdr_cfg.data.manual_dir or None)
        views = td_builder.load_sdr(sdr_cfg.data.tfds_dir or None, sdr_cfg.data.tfds_config,
                                    splits=[d.split])[d.split]
    else:
        if not synthetic or source.task != "sdr":
            raise ValueError(f"data.views=synthetic needs an SDR run on a synthetic SDR config, "
                             f"not touchdown/{sdr_cfg.data.tfds_config}; data.views=release "
                             "reads the release's views")
        views = full_task.synthetic_goal_views(nav["records"], nav["links"], d.scene_seed,
                                               source.sdr_feature_shape())
    if not len(views["route_id"]):
        raise ValueError(f"no SDR views in split {d.split!r} of the SDR data")
    return views


def resolve(config, sdr_cfg, sdr_dir: str, views: dict, keep: Sequence[int]):
    """(distance [V] in px of the SDR run's prediction on every view, predicted maps of the
    views `keep`, best step, the descriptions' padded length)."""
    vocab = Vocabulary.load(paths.resolve(sdr_dir) / "vocab.json")
    model = sdr_train.build_model(sdr_cfg, len(vocab))
    truncate = "warn" if sdr_cfg.data.tfds_config.startswith("synthetic") else "error"
    max_tokens = token_limit(sdr_cfg.data.max_tokens, views["text"])
    tokens, token_len = vocab.encode(views["text"], max_tokens,
                                     "descriptions (sdr.data.max_tokens)", truncate)
    split = {**views, "tokens": tokens, "token_len": token_len}
    template = model.init(jax.random.key(0), tokens[:2], token_len[:2],
                          views["features"][:2].astype(np.float32))
    params, best_step = restore(sdr_dir, model, template, sdr_train.optimizer_config(sdr_cfg),
                                sdr_cfg.num_steps)
    _, maps, dists, _ = sdr_evaluate(make_predictor(model), params, split,
                                  config.eval.sdr_batch_size, keep=keep)
    return dists, maps, best_step, max_tokens


@sequential_seeds("touchdown_full")   # its seeds train one after another
def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       hooks: Sequence[Callable[[int], None]] = ()) -> dict:
    """Trains the missing stages, runs the pipeline; returns (and writes) the results dict."""
    check_config(config)
    nav_cfg, sdr_cfg = stage_config(config, "nav"), stage_config(config, "sdr")
    check_perception(config, nav_cfg)
    run = Run.start(config, workdir, RESUMABLE_CHANGES, batch_sizes=())
    dirs = {}
    for stage, trainer, cfg in (("nav", nav_train, nav_cfg), ("sdr", sdr_train, sdr_cfg)):
        dirs[stage] = str(paths.resolve(config[f"{stage}_workdir"] or run.workdir / stage))
        if not config[f"{stage}_workdir"]:
            trainer.train_and_evaluate(cfg, dirs[stage], hooks=hooks)
    split = config.data.split
    nav = navigate(nav_cfg, dirs["nav"], split, run.key(EVAL))
    views = sdr_views(config, sdr_cfg, nav)
    stop = full_task.stop_views(nav["final"], nav["route_id"], views["route_id"],
                                views["panoid"])
    gold = full_task.stop_views(nav["goal"], nav["route_id"], views["route_id"], views["panoid"])
    drawn = [int(v) for v in stop[stop >= 0][:config.num_panels]] \
        if config.write_plots and jax.process_index() == 0 else []
    dists, maps, sdr_step, sdr_tokens = resolve(config, sdr_cfg, dirs["sdr"], views, drawn)
    results = {
        "config": config.to_dict(), "split": split, "episodes": len(stop),
        "views": len(views["route_id"]),
        "nav_workdir": dirs["nav"], "nav_best_step": nav["best_step"], "agent": nav_cfg.model.name,
        "sdr_workdir": dirs["sdr"], "sdr_best_step": sdr_step, "sdr_model": sdr_cfg.model.name,
        "nav_config": nav_cfg.to_dict(), "sdr_config": sdr_cfg.to_dict(),
        "navigation": {k: nav[k] for k in nav_train.METRICS},
        "full_task": full_task.full_task_metrics(full_task.full_task_distances(stop, dists)),
        "gold_navigation": full_task.full_task_metrics(
            full_task.full_task_distances(gold, dists)),
    }
    if drawn:
        v = {k: (a[drawn] if isinstance(a, np.ndarray) else [a[i] for i in drawn])
             for k, a in views.items()}
        h, w = v["features"].shape[1:3]
        figures.plot_sdr_heatmaps(
            np.abs(v["features"].astype(np.float32)).mean(-1), maps,
            np.asarray(gaussian_target(v["center"], h, w, config.sdr.sigma)),
            np.asarray(sdr_metrics.center_to_pixel(v["center"], h, w)), dists[drawn],
            [f"[route {r}, agent stopped at the {which} view] {t}"
             for r, which, t in zip(v["route_id"], v["which"], v["text"])],
            run.workdir / "full_task.png")
    return run.finish(results, format_results(results),
                      run_provenance(config, nav_cfg, sdr_cfg, nav["feature_width"],
                                     views["features"].shape[-1],
                                     {"nav.data.max_tokens": nav["max_tokens"],
                                      "sdr.data.max_tokens": sdr_tokens}))


def format_results(r: dict) -> str:
    nav = r["navigation"]
    lines = [f"Touchdown complete task on {r['split']} ({r['episodes']} episodes, {r['views']} SDR "
             f"views): {r['agent']} (best step {r['nav_best_step']}) then {r['sdr_model']} "
             f"(best step {r['sdr_best_step']})",
             f"navigation: TC {nav['tc']:.4f}  SPD {nav['spd']:.2f}  SED {nav['sed']:.4f}",
             f"{'':22s} {'acc_40':>7s} {'acc_80':>7s} {'acc_120':>7s} {'found':>7s} "
             f"{'dist px':>8s}"]
    for name, key in (("full task", "full_task"), ("gold navigation", "gold_navigation")):
        m = r[key]
        lines.append(f"{name:22s} {m['acc_40']:7.4f} {m['acc_80']:7.4f} {m['acc_120']:7.4f} "
                     f"{m['found']:7.4f} " +
                     (f"{m['distance']:8.1f}" if m["distance"] is not None else f"{'-':>8s}"))
    return "\n".join(lines)
