r"""Seeds x models x channels of Talk The Walk localization, one table of mean +- std.

  python -m experiments.ttw_emergent.sweep --workdir=/tmp/ttw_sweep \
      --config.data.maps_dir=../shared/data/ttw/maps --config.num_steps=3000 \
      --seeds=0,1,2 --models=masc,no_masc --comms=continuous,discrete

Every run is an ordinary `train.train_and_evaluate` in `<workdir>/<model>_<comm>_s<seed>` (the
base config with `model.name`, the channel (discrete runs take `configs/discrete.py`'s settings)
and `seed` set), so a killed sweep resumes where it stopped and finished runs are read back from
their `results.json`. The table (`<workdir>/sweep.md`, `sweep.json`) gives, per model and channel,
the mean and standard deviation over seeds of train / valid / test accuracy (discrete: greedy and
sampled bits) and of test full-task success, beside the bounds.
"""
from __future__ import annotations

from typing import Sequence

import jax
import ml_collections
import numpy as np

from experiments.ttw_emergent import train
from experiments.sweep import train_or_read
from experiments.ttw_emergent.configs.discrete import make_discrete
from ttw_jax.core import paths
from ttw_jax.core.train.workdir import write_json
from ttw_jax.talk_the_walk import maps

COMMS = ("continuous", "discrete")


def run_config(base: ml_collections.ConfigDict, model: str, comm: str,
               seed: int) -> ml_collections.ConfigDict:
    if comm not in COMMS:
        raise ValueError(f"channels must be among {COMMS}, got {comm!r}")
    c = ml_collections.ConfigDict(base.to_dict())
    c.model.name, c.seed = model, seed
    return make_discrete(c) if comm == "discrete" else c


def run_sweep(config: ml_collections.ConfigDict, workdir: paths.PathLike, seeds: Sequence[int],
              models: Sequence[str], comms: Sequence[str]) -> dict:
    """Trains (or reads back) every run and writes the table; returns {row name: summary}."""
    runs, workdir = {}, paths.resolve(workdir)
    for model in models:
        for comm in comms:
            for seed in seeds:
                c = run_config(config, model, comm, seed)
                res = train_or_read(train.train_and_evaluate, c,
                                    workdir / f"{model}_{comm}_s{seed}")
                runs.setdefault(f"{model}, {comm}", []).append(res)
    summary = {name: summarize(rs) for name, rs in runs.items()}
    if jax.process_index() == 0:
        write_json(workdir / "sweep.json", {"seeds": list(seeds), "rows": summary}, indent=2)
        table = to_markdown(summary, runs, len(seeds))
        paths.write_text(workdir / "sweep.md", table + "\n")
        print(table)
    return summary


def _columns(res: dict) -> dict[str, float]:
    cols = {split: res[split]["accuracy"] for split in maps.SPLITS}
    for split in maps.SPLITS:
        for kind in ("greedy", "sampled"):
            key = f"accuracy_{kind}_messages"
            if key in res[split]:
                cols[f"{split} ({kind} bits)"] = res[split][key]
    if "full_task" in res["test"]:
        cols["test full task"] = res["test"]["full_task"]["success_rate"]
    return cols


def summarize(results: Sequence[dict]) -> dict[str, tuple[float, float]]:
    """{column: (mean, std over runs)} (population std, ddof = 0)."""
    cols = [_columns(r) for r in results]
    return {k: (float(np.mean([c[k] for c in cols])), float(np.std([c[k] for c in cols])))
            for k in cols[0]}


def to_markdown(summary: dict, runs: dict, num_seeds: int) -> str:
    first = next(iter(runs.values()))[0]
    c = first["config"]
    head = ["model", "train", "valid", "test", "test full task", "best steps"]
    lines = [f"T={c['T']}, label={c['data']['label']}, {c['num_steps']} steps, "
             f"mean +- std over {num_seeds} seeds",
             "", "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    fmt = lambda m: f"{m[0]:.4f} +- {m[1]:.4f}"
    for name, s in summary.items():
        steps = ", ".join(str(r["best_step"]) for r in runs[name])
        lines.append(f"| {name} | {fmt(s['train'])} | {fmt(s['valid'])} | {fmt(s['test'])} | "
                     f"{fmt(s['test full task']) if 'test full task' in s else ''} | {steps} |")
        if "test (sampled bits)" in s:
            lines.append(f"| {name}, sampled bits | {fmt(s['train (sampled bits)'])} | "
                         f"{fmt(s['valid (sampled bits)'])} | {fmt(s['test (sampled bits)'])} | | |")
    for key, label in (("upper_bound", "Bayes upper bound, with actions"),
                       ("upper_bound_no_actions", "Bayes upper bound, without actions")):
        lines.append(f"| {label} | " + " | ".join(f"{first[s][key]:.4f}" for s in maps.SPLITS)
                     + " | | |")
    return "\n".join(lines)


if __name__ == "__main__":
    from absl import flags

    from experiments.ttw_emergent.configs import default
    from ttw_jax.core.train.launch import launch

    flags.DEFINE_list("seeds", ["0", "1", "2"], "config.seed of each repeat")
    flags.DEFINE_list("models", ["masc", "no_masc"], "model.name values")
    flags.DEFINE_list("comms", list(COMMS), "channels: continuous, discrete")
    F = flags.FLAGS
    launch(lambda config, workdir: run_sweep(config, workdir, [int(s) for s in F.seeds],
                                             F.models, F.comms), default)
