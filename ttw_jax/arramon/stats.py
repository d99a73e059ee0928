"""Dataset statistics of ArraMon instances (Kim et al. 2020, section 4 and Table 1).

Per phase (navigation, assembly), over both turns of every instance:
- instruction length in words (whitespace-separated, as the paper counts "in words"; any
  script, so the Hindi files too) and in this project's tokens (`core.vocab.tokenize`, what
  `data.max_tokens` limits), max and mean;
- path length: points of `gt_paths` (the start plus one per forward step), max and mean;
- action sequence length: the actions of `gt_actions` without the closing turn token, the
  pick-up / placement included, max and mean, and the mean count of each action;
- vocabulary: distinct lower-cased words of the phase's instructions (and of both phases);
- per instance, both turns together (`instance_path`, `instance_actions`): forward steps (path
  points less the start) and actions summed over the two turns. On val_seen these come close to
  the paper's Table 1 "for both turns" path and action figures (navigation 49.9 / 78.1 against
  48.14 / 75.78, assembly 3.28 / 13.39 against 3.32 / 13.68, assembly action max 34 = 34), so
  that is how the table reads here; its instruction lengths match neither reading.
"""
from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from ttw_jax.arramon import records as ar
from ttw_jax.core.vocab import tokenize

PHASES = ("navi", "assem")
PHASE_NAMES = {"navi": "navigation", "assem": "assembly"}
# Kim et al. 2020, Table 1 (all city sub-sections, both turns): (max, mean).
PAPER_TABLE1 = {
    "navi": {"words": (147, 47.99), "instance_path": (156, 48.14),
             "instance_actions": (224, 75.78)},
    "assem": {"words": (90, 20.99), "instance_path": (8, 3.32), "instance_actions": (34, 13.68)},
}
# Section 7: instances per split (train / val_seen / val_unseen / test_unseen).
PAPER_INSTANCES = {"train": 4267, "val_seen": 1065, "val_unseen": 1155, "test_unseen": 1205}


def _summary(values: Sequence[int]) -> dict:
    v = np.asarray(values, np.float64)
    return {"max": int(v.max()), "mean": float(v.mean()), "min": int(v.min())}


def split_statistics(instances: Sequence[dict]) -> dict:
    """{instances, instructions, vocabulary, navi: {...}, assem: {...}} of validated
    instances (`records.read_arramon`). Each phase: instructions, words / tokens / path /
    actions ({max, mean, min}), vocabulary, and action_counts {action: mean per turn}."""
    if not instances:
        raise ValueError("no instances: the split is empty")
    out: dict = {"instances": len(instances)}
    all_words: set[str] = set()
    for phase in PHASES:
        texts = [s for r in instances for s in r["instructions"][f"{phase}_inst_gt"]]
        actions = [[a for a in acts if a in ar.ACTIONS]
                   for r in instances for acts in r["gt_actions"][f"{phase}_action_gt"]]
        words = [t.split() for t in texts]
        vocab = {w.lower() for ws in words for w in ws}
        all_words |= vocab
        counts = Counter(a for acts in actions for a in acts)
        out[phase] = {
            "instructions": len(texts),
            "words": _summary([len(w) for w in words]),
            "tokens": _summary([len(tokenize(t)) for t in texts]),
            "path": _summary([len(p) for r in instances
                              for p in r["gt_paths"][f"{phase}_path_gt"]]),
            "actions": _summary([len(a) for a in actions]),
            "vocabulary": len(vocab),
            "action_counts": {a: counts[a] / len(actions) for a in ar.ACTIONS},
            "instance_path": _summary([sum(len(p) - 1 for p in r["gt_paths"][f"{phase}_path_gt"])
                                       for r in instances]),
            "instance_actions": _summary([sum(a in ar.ACTIONS for acts in
                                              r["gt_actions"][f"{phase}_action_gt"]
                                              for a in acts) for r in instances]),
        }
    out["instructions"] = out["navi"]["instructions"] + out["assem"]["instructions"]
    out["vocabulary"] = len(all_words)
    return out


def format_statistics(stats: dict, name: str) -> str:
    """The statistics as a Markdown table beside the paper's Table 1 (which covers every city
    sub-section, not one split)."""
    lines = [f"{name}: {stats['instances']:,} instances, {stats['instructions']:,} instructions "
             f"({stats['navi']['instructions']:,} navigation, {stats['assem']['instructions']:,}"
             f" assembly), vocabulary {stats['vocabulary']:,} words "
             f"({stats['navi']['vocabulary']:,} navigation, {stats['assem']['vocabulary']:,} "
             "assembly)", "",
             "| length | phase | max | mean | paper max (Table 1) | paper mean |",
             "| --- | --- | --- | --- | --- | --- |"]
    labels = {"words": "instruction (words)", "tokens": "instruction (tokens)",
              "path": "path per turn (points)", "actions": "actions per turn",
              "instance_path": "path, both turns (forward steps)",
              "instance_actions": "action sequence, both turns"}
    for key, label in labels.items():
        for phase in PHASES:
            s, paper = stats[phase][key], PAPER_TABLE1[phase].get(key)
            ref = f"{paper[0]} | {paper[1]:.2f}" if paper else " | "
            lines.append(f"| {label} | {PHASE_NAMES[phase]} | {s['max']} | {s['mean']:.2f} | "
                         f"{ref} |")
    lines += ["", "| actions per turn (mean) | " + " | ".join(ar.ACTIONS) + " |",
              "| --- |" + " --- |" * len(ar.ACTIONS)]
    for phase in PHASES:
        c = stats[phase]["action_counts"]
        lines.append(f"| {PHASE_NAMES[phase]} | " + " | ".join(f"{c[a]:.2f}" for a in ar.ACTIONS)
                     + " |")
    return "\n".join(lines)
