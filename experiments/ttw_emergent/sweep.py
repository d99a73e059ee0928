r"""Seeds x models x channels (x T) of Talk The Walk localization, one table of mean +- std.

  python -m experiments.ttw_emergent.sweep --workdir=/tmp/ttw_sweep \
      --config.data.maps_dir=../shared/data/ttw/maps --config.num_steps=3000 \
      --seeds=0,1,2 --models=masc,no_masc --comms=continuous,discrete

Every run is an ordinary `train.train_and_evaluate` in `<workdir>/<model>_<comm>_s<seed>` (the
base config with `model.name`, the channel (discrete runs take `configs/discrete.py`'s settings)
and `seed` set), so a killed sweep resumes where it stopped and finished runs are read back from
their `results.json`. The table (`<workdir>/sweep.md` under the provenance line, `sweep.json`
with `schema_version`, the `provenance` of the base config over the seeds, each row's best steps
and the bounds of every T) gives, per model
and channel, the mean and standard deviation over seeds of train / valid / test accuracy
(discrete: greedy and sampled bits) and of the full-task success of every split in
`full_task.splits`, beside the bounds.

`--Ts=0,1,2,3` sweeps T too (Table 17): runs go to `<workdir>/T<T>_<model>_<comm>_s<seed>`, and
MASC is skipped at T = 0 (no actions, no transitions: the paper has no such row).
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
from ttw_jax.core.train import provenance
from ttw_jax.core.train.workdir import write_json
from ttw_jax.talk_the_walk import maps

COMMS = ("continuous", "discrete")
BOUNDS = ("upper_bound", "upper_bound_no_actions")   # the Bayes bounds of a run's results


def run_config(base: ml_collections.ConfigDict, model: str, comm: str,
               seed: int) -> ml_collections.ConfigDict:
    if comm not in COMMS:
        raise ValueError(f"channels must be among {COMMS}, got {comm!r}")
    c = ml_collections.ConfigDict(base.to_dict())
    c.model.name, c.seed = model, seed
    return make_discrete(c) if comm == "discrete" else c


def run_sweep(config: ml_collections.ConfigDict, workdir: paths.PathLike, seeds: Sequence[int],
              models: Sequence[str], comms: Sequence[str],
              Ts: Sequence[int] | None = None) -> dict:
    """Trains (or reads back) every run and writes the table; returns {row name: summary}.
    Without `Ts` every run has the base config's T; with it, row names start with `T=<T>, `."""
    runs, bounds, workdir = {}, {}, paths.resolve(workdir)
    for T in ([None] if Ts is None else Ts):
        for model in models:
            if T == 0 and model == "masc":
                continue
            for comm in comms:
                for seed in seeds:
                    c = run_config(config, model, comm, seed)
                    name, folder = f"{model}, {comm}", f"{model}_{comm}_s{seed}"
                    if T is not None:
                        c.T = T
                        name, folder = f"T={T}, {name}", f"T{T}_{folder}"
                    res = train_or_read(train.train_and_evaluate, c, workdir / folder)
                    runs.setdefault(name, []).append(res)
                    bounds.setdefault(res["config"]["T"], res)
    summary = {name: summarize(rs) for name, rs in runs.items()}
    if jax.process_index() == 0:
        prov = train.run_provenance(config, seeds=len(seeds))
        write_json(workdir / "sweep.json", provenance.finalize(
            {"seeds": list(seeds), "rows": summary,
             "best_steps": {name: [r["best_step"] for r in rs] for name, rs in runs.items()},
             "bounds": {str(T): {split: {key: res[split][key] for key in BOUNDS}
                                 for split in maps.SPLITS}
                        for T, res in sorted(bounds.items())}}, prov), indent=2)
        table = provenance.title(prov) + "\n\n" + to_markdown(summary, runs, len(seeds), bounds)
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
    for split in maps.SPLITS:
        if "full_task" in res[split]:
            cols[f"{split} full task"] = res[split]["full_task"]["success_rate"]
            cols[f"{split} full-task steps"] = res[split]["full_task"]["mean_steps_ended"]
    return cols


def summarize(results: Sequence[dict]) -> dict[str, tuple[float, float]]:
    """{column: (mean, std over runs)} (population std, ddof = 0)."""
    cols = [_columns(r) for r in results]
    return {k: (float(np.mean([c[k] for c in cols])), float(np.std([c[k] for c in cols])))
            for k in cols[0]}


def to_markdown(summary: dict, runs: dict, num_seeds: int, bounds: dict | None = None) -> str:
    """The table: accuracies, the full task of each split that has one (success and mean
    steps), best steps; then the bounds of every T (`bounds` {T: a run's results})."""
    first = next(iter(runs.values()))[0]
    c = first["config"]
    bounds = bounds or {c["T"]: first}
    ft = [s for s in maps.SPLITS if any(f"{s} full task" in v for v in summary.values())]
    head = (["model", "train", "valid", "test"] + [f"{s} full task" for s in ft]
            + [f"{s} full-task steps" for s in ft] + ["best steps"])
    ts = ", ".join(str(t) for t in sorted(bounds))
    lines = [f"T={ts}, label={c['data']['label']}, {c['num_steps']} steps, "
             f"mean +- std over {num_seeds} seeds",
             "", "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    fmt = lambda m: f"{m[0]:.4f} +- {m[1]:.4f}"
    for name, s in summary.items():
        steps = ", ".join(str(r["best_step"]) for r in runs[name])
        cells = [fmt(s[k]) for k in ("train", "valid", "test")]
        cells += [fmt(s[f"{sp} full task"]) if f"{sp} full task" in s else "" for sp in ft]
        cells += [f"{s[f'{sp} full-task steps'][0]:.1f}" if f"{sp} full task" in s else ""
                  for sp in ft]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {steps} |")
        if "test (sampled bits)" in s:
            lines.append(f"| {name}, sampled bits | {fmt(s['train (sampled bits)'])} | "
                         f"{fmt(s['valid (sampled bits)'])} | {fmt(s['test (sampled bits)'])} |"
                         + " |" * (2 * len(ft) + 1))
    for T, res in sorted(bounds.items()):
        prefix = f"T={T}, " if len(bounds) > 1 else ""
        for key, label in (("upper_bound", "Bayes upper bound, with actions"),
                           ("upper_bound_no_actions", "Bayes upper bound, without actions")):
            lines.append(f"| {prefix}{label} | "
                         + " | ".join(f"{res[s][key]:.4f}" for s in maps.SPLITS)
                         + " |" * (2 * len(ft) + 2))
    return "\n".join(lines)


if __name__ == "__main__":
    from absl import flags

    from experiments.ttw_emergent.configs import default
    from ttw_jax.core.train.launch import launch

    flags.DEFINE_list("seeds", ["0", "1", "2"], "config.seed of each repeat")
    flags.DEFINE_list("models", ["masc", "no_masc"], "model.name values")
    flags.DEFINE_list("comms", list(COMMS), "channels: continuous, discrete")
    flags.DEFINE_list("Ts", [], "T values (Table 17); empty: the config's T")
    F = flags.FLAGS
    launch(lambda config, workdir: run_sweep(config, workdir, [int(s) for s in F.seeds],
                                             F.models, F.comms,
                                             [int(t) for t in F.Ts] or None), default)
