r"""What the nearest-recorded-pose proxy moves: paired over seeds, the same agents' metrics with
the true view at their pose and with the nearest recorded pose's view, from sweeps of
`configs/proxy_bias.py` (each seed's results.json holds both rows: `<agent>` and
`<agent>_nearest_recorded_pose`).

  python -m experiments.arramon.proxy_bias --sweeps=/tmp/arramon_proxy_bias_vl,/tmp/arramon_proxy_bias_vo \
      --out=/tmp/arramon_proxy_bias.json

writes (and prints as a Markdown table) per agent, split and metric the mean and standard
deviation over seeds (ddof 0) of the true-view value, the proxy's value and their paired
difference (proxy - true); `--figure` draws the differences (one panel per split, a bar per
agent and metric, the standard deviation over seeds as error bars).
"""
from __future__ import annotations

import glob
import json
import os
from typing import Sequence

import numpy as np
from absl import app, flags

from experiments.arramon import train
from ttw_jax.arramon.evaluation import METRICS
from ttw_jax.core import paths, viz
from ttw_jax.core.train import provenance

SPLITS = ("val_seen", "val_unseen")
COLUMNS = ("navi_ndtw", "ctc0", "ctc3", "ctc7", "assem_ndtw", "rpod", "ptc")


def _stat(values: Sequence[float]) -> list[float]:
    return [float(np.mean(values)), float(np.std(values))]


def paired(runs: Sequence[dict]) -> dict:
    """{split: {metric: {"true", "proxy", "diff": [mean, std]}}} of one agent's runs."""
    proxy_name = train.NEAREST_POSE["name"]
    out = {}
    for split in SPLITS:
        rows = {}
        for m in METRICS:
            true = [r[split][r["agent"]][m] for r in runs]
            proxy = [r[split][f"{r['agent']}_{proxy_name}"][m] for r in runs]
            rows[m] = {"true": _stat(true), "proxy": _stat(proxy),
                       "diff": _stat(np.subtract(proxy, true))}
        out[split] = rows
    return out


def summarize(sweeps: Sequence[str]) -> dict:
    """The paired table of every sweep folder (one agent each: `s<seed>/results.json`)."""
    out = {"agents": {}}
    for folder in sweeps:
        files = sorted(glob.glob(os.path.join(folder, "s*", "results.json")))
        if not files:
            raise FileNotFoundError(f"{folder}: no s<seed>/results.json (a sweep of "
                                    "experiments/arramon/configs/proxy_bias.py)")
        runs = [provenance.read_results(f) for f in files]
        agent = runs[0]["agent"]
        out["agents"][agent] = {"seeds": [r["config"]["seed"] for r in runs], **paired(runs),
                                "provenance": runs[0]["provenance"],
                                "revisions": sorted({r["provenance"]["code"]["revision"]
                                                     for r in runs})}
    return out


def markdown(summary: dict) -> str:
    lines = ["| agent, split, view | " + " | ".join(COLUMNS) + " |",
             "|" + " --- |" * (len(COLUMNS) + 1)]
    for agent, res in summary["agents"].items():
        for split in SPLITS:
            for kind, label in (("true", "true view"), ("proxy", "nearest recorded"),
                                ("diff", "proxy - true")):
                cells = [f"{res[split][m][kind][0]:.3f} ± {res[split][m][kind][1]:.3f}"
                         for m in COLUMNS]
                lines.append(f"| {agent}, {split}, {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(summary: dict, path: str) -> None:
    """proxy - true per metric (mean and std over seeds), one panel per split."""
    fig, axes = viz.subplots(1, len(SPLITS), figsize=(6 * len(SPLITS), 3.6), sharey=True)
    agents = list(summary["agents"])
    width = 0.8 / len(agents)
    x = np.arange(len(COLUMNS))
    for ax, split in zip(axes, SPLITS):
        for i, agent in enumerate(agents):
            res = summary["agents"][agent][split]
            mean = [res[m]["diff"][0] for m in COLUMNS]
            std = [res[m]["diff"][1] for m in COLUMNS]
            seeds = len(summary["agents"][agent]["seeds"])
            ax.bar(x + (i - (len(agents) - 1) / 2) * width, mean, width, yerr=std, capsize=3,
                   label=f"{agent.upper()[0]}/{agent.upper()[1]} ({seeds} seeds)")
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(x, COLUMNS, rotation=30)
        ax.set_title(f"{split}: nearest recorded pose - true view")
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("metric difference")
    axes[0].legend()
    viz.save(fig, path)


def main(argv):
    del argv
    summary = summarize([s for s in flags.FLAGS.sweeps.split(",") if s])
    if flags.FLAGS.out:
        paths.write_text(flags.FLAGS.out, json.dumps(summary, indent=1) + "\n")
    if flags.FLAGS.figure:
        plot(summary, flags.FLAGS.figure)
    print(markdown(summary))


if __name__ == "__main__":
    flags.DEFINE_string("sweeps", None, "Comma-separated sweep folders of configs/proxy_bias.py.")
    flags.DEFINE_string("out", "", "Where to write the summary JSON.")
    flags.DEFINE_string("figure", "", "Where to draw the differences (PNG).")
    flags.mark_flag_as_required("sweeps")
    app.run(main)
