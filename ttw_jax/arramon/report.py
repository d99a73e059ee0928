"""The ArraMon trainer's reports: the evaluation protocol its rollouts ran under, the paper's
rows (Kim et al. 2020) and the printed results tables."""
from __future__ import annotations

from typing import Sequence

import ml_collections

from ttw_jax.arramon import evaluation as arr_eval, metrics as arramon_metrics
from ttw_jax.arramon.training_data import uses_features
from ttw_jax.core.train import provenance

# Kim et al. 2020, Table 2 (val_seen, val_unseen) and Table 3 (test_unseen): English data, the
# paper's CTC rule; metrics in the order navi_ndtw, ctc0, ctc3, ctc5, ctc7, rpod, ptc (None: "-").
_PAPER_NAMES = ("navi_ndtw", "ctc0", "ctc3", "ctc5", "ctc7", "rpod", "ptc")
_PAPER_ROWS = {
    "val_seen": {"vl": (0.135, 0.000, 0.098, 0.149, 0.200, 0.058, 0.044),
                 "vo": (0.055, 0.000, 0.043, 0.062, 0.087, 0.008, 0.001),
                 "lo": (0.110, 0.000, 0.044, 0.095, 0.147, 0.023, 0.017),
                 "random": (0.045, 0.000, 0.030, 0.054, 0.092, 0.005, 0.001),
                 "shortest_path": (1.0, None, 1.0, 1.0, 1.0, None, None)},
    "val_unseen": {"vl": (0.109, 0.000, 0.062, 0.108, 0.153, 0.036, 0.028),
                   "vo": (0.043, 0.000, 0.031, 0.057, 0.085, 0.007, 0.002),
                   "lo": (0.105, 0.000, 0.029, 0.068, 0.126, 0.017, 0.013),
                   "random": (0.045, 0.000, 0.024, 0.043, 0.075, 0.005, 0.001),
                   "shortest_path": (1.0, None, 1.0, 1.0, 1.0, None, None)},
    "test_unseen": {"vl": (0.114, 0.000, 0.082, 0.122, 0.168, 0.047, 0.035)},
}
PAPER = {split: {agent: dict(zip(_PAPER_NAMES, row)) for agent, row in rows.items()}
         for split, rows in _PAPER_ROWS.items()}
PAPER_LABELS = {"vl": "V/L", "vo": "V/O", "lo": "L/O", "random": "R/W", "shortest_path": "S/P"}


def paper_rows(tfds_config: str, split: str, agents) -> dict[str, dict]:
    """{agent: the paper's row} for the evaluated `split` and the `agents` that have one: the
    English release's val_seen / val_unseen (Table 2) and test_unseen (Table 3, V/L only);
    nothing for synthetic or Hindi data, partitions, or splits the paper does not report."""
    if tfds_config != "english":
        return {}
    return {a: PAPER[split][a] for a in agents if a in PAPER.get(split, {})}


# Rollouts on the release's recorded features (`uses_features`): off the demonstration the agent
# sees the features of the nearest recorded pose (`features.nearest_recorded`).
NEAREST_POSE = provenance.protocol(
    "nearest_recorded_pose",
    why="the official code evaluates in the Unity simulator; off the demonstration the agent "
        "sees the nearest recorded pose's view (of the same instance, turn and phase: nearest "
        "position, then heading)")
# A release run on the simulator: its map is rebuilt from the ground-truth paths.
RECONSTRUCTED_MAP = provenance.protocol(
    "reconstructed_walkable_map",
    why="the official code evaluates in the Unity simulator's city; the release holds no walls "
        "or buildings, so this project's simulator walks a map rebuilt from the split's "
        "ground-truth paths (every point within 1.0 unit of one), which favours staying near them")


def run_protocol(config: ml_collections.ConfigDict) -> dict:
    """The evaluation protocol of the run's rollouts: `NEAREST_POSE` on the recorded features,
    `RECONSTRUCTED_MAP` on another release run, the simulator's own (official) on synthetic
    cities, which carry their buildings."""
    if uses_features(config):
        return NEAREST_POSE
    return provenance.protocol() if config.data.tfds_config == "synthetic" else RECONSTRUCTED_MAP


def _row(label: str, m: dict, names: Sequence[str], keys: Sequence[str]) -> str:
    return f"{label:34s} " + " ".join(
        f"{m[k]:10.4f}" + (f" ({m[k + '_std']:.4f})" if k + "_std" in m else "")
        for n, k in zip(names, keys))


def format_results(results: dict) -> str:
    """The printed tables: every split's agents under the run's CTC rule (and the other rule
    where it differs), the trained agent per turn (the paper's Table 5), parameter counts."""
    names = arr_eval.METRICS
    rule = results["config"]["eval"]["ctc_rule"]
    other = next(r for r in arramon_metrics.CTC_RULES if r != rule)
    head = f"best step {results['best_step']}; " if "best_step" in results else ""
    protocol = run_protocol(ml_collections.ConfigDict(results["config"]))
    proxy = protocol["name"] != provenance.OFFICIAL
    lines = [f"ArraMon ({results['agent']}, {head}CTC rule {rule!r}; overall = mean of the two "
             "turns; std over seeds in brackets):"]
    if proxy:
        lines.append(f"NOT THE PAPER'S PROTOCOL: the rollouts below run under the proxy "
                     f"protocol {protocol['name']!r} ({protocol['why']})")
    lines.append(f"{'split / agent (rule)':34s} " + " ".join(f"{n:>10s}" for n in names))
    for split, res in results.items():
        if not (isinstance(res, dict) and "episodes" in res):
            continue
        for agent, m in res.items():
            if agent == "episodes":
                continue
            lines.append(_row(f"{split} {agent} ({rule})", m, names, names))
            alt = [f"{n}_{other}" if n in arr_eval.RULE_METRICS else n for n in names]
            if any(m[a] != m[n] for a, n in zip(alt, names)):
                lines.append(_row(f"{split} {agent} ({other})", m, names, alt))
        agent = results["agent"]
        if agent in res and "navi_tf_accuracy" in res[agent]:
            m = res[agent]
            lines.append(f"{split} {agent}: teacher-forced action accuracy along the recorded "
                         f"demonstrations: navigation {m['navi_tf_accuracy']:.4f}, assembly "
                         f"{m['assem_tf_accuracy']:.4f} (the official main_nosim.py's "
                         "measure; the rollouts above see the nearest recorded pose's "
                         "features)")
        if agent in res:
            for t in range(2):
                lines.append(_row(f"{split} {agent} turn {t + 1} ({rule})", res[agent], names,
                                  [f"{n}_{t}" for n in names]))
    for split, res in results.items():
        if isinstance(res, dict) and "predictions" in res and "episodes" not in res:
            lines.append(f"{split}: references withheld (a leaderboard scores them), no metric: "
                         f"predictions of {res['instances']} instances in {res['predictions']}")
    if "num_params" in results:
        p = results["num_params"]
        lines.append(f"trainable parameters: {p['total']:,} (navigation {p['navi']:,}, "
                     f"assembly {p['assem']:,})")
    tfds_config = results["config"]["data"]["tfds_config"]
    paper = [(split, agent, row) for split, res in results.items()
             if isinstance(res, dict) and "episodes" in res
             for agent, row in paper_rows(tfds_config, split, res).items()]
    if paper:
        lines.append("-- the paper's rows (Kim et al. 2020), evaluated in the Unity simulator"
                     + (f", not under the proxy protocol {protocol['name']!r} of the rows above"
                        if proxy else "") + ":")
    for split, agent, row in paper:
        lines.append(f"{f'paper {split} {PAPER_LABELS[agent]} (Kim et al. 2020)':34s} "
                     + " ".join(f"{row[n]:10.4f}" if row.get(n) is not None else " " * 10
                                for n in names))
    return "\n".join(lines)
