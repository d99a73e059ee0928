"""Synthetic RxR instructions on the real Matterport3D graphs, in the RxR guide-record schema.

Every viewpoint holds one landmark (an object type, `node_landmarks`: a hash of the viewpoint id,
so any other component — e.g. a view-feature builder that encodes each neighbour's landmark — can
recompute it from the id alone). An instruction names, in order, the landmark of every viewpoint of
the path after the start ("Walk to the lamp, then to the clock and stop at the table."), in English
(en-US) or Hindi (hi-IN). It never mentions turn directions: which neighbour to move to is only
decidable by matching the next named landmark with what the views show, so following it needs both
the text and the view features. Consecutive viewpoints can share a landmark (1 in 16); the
instruction then names it twice.

Paths come from the RxR two-level sampler (`ttw_jax.rxr.path_sampling.sample_paths`) on
`synthetic_regions` (about `NODES_PER_REGION` viewpoints per region), shortened for the synthetic
task (`PATH_SAMPLING`: room paths of at most 3 rooms, 2 to 6 edges — paths of 3 to 7 viewpoints —
and at most 15 m; each scan gets up to `per_env` paths). Seen splits (every split whose name does
not contain "unseen", normally "train" and "val_seen") use `train_scans`: the sampled paths of
each scan are shuffled and divided among them in proportion to their requested sizes (largest
remainders), so their paths and path ids are disjoint. Unseen splits use `unseen_scans` (divided
the same way if there are several). When a split has fewer paths than instructions, its paths are
reused in repeated shuffled passes; a reused path gets a new instruction (fresh connective
phrases) in the other language than its previous use. Otherwise the language is drawn uniformly.

Hindi landmark words are chosen so that their oblique singular form equals the direct form
(feminine nouns and masculine nouns not ending in -आ), so postpositions (तक, के पास, की ओर)
attach without inflection.
"""
from __future__ import annotations

import hashlib
import math
from typing import Sequence

import numpy as np

from ttw_jax.rxr.graph import load_matterport_graph
from ttw_jax.rxr.path_sampling import sample_paths, scan_geodesics, synthetic_regions

LANGUAGES = ("en-US", "hi-IN")
LANDMARKS: dict[str, tuple[str, ...]] = {
    "en-US": ("table", "chair", "lamp", "bed", "window", "television", "painting", "mirror",
              "clock", "fireplace", "cupboard", "sink", "fridge", "piano", "staircase", "vase"),
    "hi-IN": ("मेज़", "कुर्सी", "लैंप", "पलंग", "खिड़की", "टीवी", "तस्वीर", "दर्पण",
              "घड़ी", "अंगीठी", "अलमारी", "सिंक", "फ़्रिज", "पियानो", "सीढ़ी", "फूलदान"),
}
NODES_PER_REGION = 6
PATH_SAMPLING = dict(max_rooms=3, max_length=15.0, min_steps=2, max_steps=6, per_env=300,
                     candidates_per_env=1500)

_TEMPLATES = {
    "en-US": dict(
        first=("walk to the {}", "go to the {}", "head to the {}", "make your way to the {}",
               "start by walking to the {}"),
        next=("then to the {}", "then on to the {}", "continue to the {}",
              "after that to the {}", "carry on to the {}"),
        last=("and stop at the {}.", "and stop by the {}.", "and wait at the {}.",
              "and stop when you reach the {}."),
        only=("walk to the {} and stop there.", "go to the {} and wait there.")),
    "hi-IN": dict(
        first=("{} तक जाओ", "{} तक चलो", "{} की ओर चलो", "पहले {} तक जाओ"),
        next=("फिर {} तक", "उसके बाद {} तक", "फिर {} की ओर", "आगे {} तक"),
        last=("और {} के पास रुको।", "और {} के पास रुक जाओ।", "और {} पर रुको।",
              "और {} तक पहुँचकर रुको।"),
        only=("{} तक जाओ और वहीं रुको।", "{} के पास जाकर रुको।")),
}


def node_landmarks(node_ids: Sequence[str], num_landmarks: int = 16, seed: int = 0) -> np.ndarray:
    """Landmark id [N] int32 in [0, num_landmarks) of each viewpoint: the first 8 bytes of
    SHA-256 of `"<seed>/<viewpoint>"`, as a little-endian integer, modulo `num_landmarks`. The
    viewpoint is the part after the last '/', so `"<scan>/<viewpoint>"` node ids and bare
    viewpoint ids give the same landmark."""
    if not 1 <= num_landmarks <= len(LANDMARKS["en-US"]):
        raise ValueError(f"num_landmarks must be in [1, {len(LANDMARKS['en-US'])}], "
                         f"got {num_landmarks}")
    out = np.empty(len(node_ids), np.int32)
    for i, node in enumerate(node_ids):
        vp = node.rsplit("/", 1)[-1]
        digest = hashlib.sha256(f"{seed}/{vp}".encode("utf-8")).digest()
        out[i] = int.from_bytes(digest[:8], "little") % num_landmarks
    return out


def instruction(landmarks_along_path: Sequence[int], language: str,
                rng: np.random.Generator) -> str:
    """A templated instruction naming `LANDMARKS[language][l]` for each l in order (the
    viewpoints after the start; the last one is where to stop). Connectives are drawn with `rng`;
    no turn directions are mentioned."""
    if language not in _TEMPLATES:
        raise ValueError(f"unknown language {language!r}; expected one of {LANGUAGES}")
    words = [LANDMARKS[language][int(i)] for i in landmarks_along_path]
    if not words:
        raise ValueError("an instruction needs at least one landmark after the start")
    t = _TEMPLATES[language]

    def pick(kind):
        options = t[kind]
        return options[int(rng.integers(len(options)))]

    if len(words) == 1:
        text = pick("only").format(words[0])
    else:
        parts = [pick("first").format(words[0])]
        parts += [pick("next").format(w) for w in words[1:-1]]
        text = ", ".join(parts) + " " + pick("last").format(words[-1])
    return text[:1].upper() + text[1:]


def _divide(n: int, weights: Sequence[int]) -> list[int]:
    """Splits n items into len(weights) counts proportional to weights (largest remainders,
    ties to the earlier split)."""
    total = sum(weights)
    if total <= 0:
        return [0] * len(weights)
    exact = [n * w / total for w in weights]
    counts = [int(math.floor(e)) for e in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[:n - sum(counts)]:
        counts[i] += 1
    return counts


def synthetic_split_records(connectivity_dir: str, train_scans: Sequence[str],
                            unseen_scans: Sequence[str], sizes: Sequence[tuple[str, int, int]],
                            seed: int = 0) -> dict[str, list[dict]]:
    """{split: [record]} for `sizes` = [(split, number of instructions, split seed)] (see the
    module docstring). Records follow the RxR guide schema:
    {"instruction_id", "path_id", "scan", "path" (viewpoint ids), "heading" (radians in
    [0, 2pi)), "instruction", "language", "annotator": "synthetic", "edit_distance": nan,
    "distance" (geodesic start-to-end, metres), "timed_words": [], "step_words": None,
    "step_views": None, "text_features": None}. Instruction ids run over all splits in `sizes`
    order; path ids number all sampled paths (train scans, then unseen scans). Deterministic given
    `seed` (regions, paths, seen-path division) and the split seeds (order of use, language,
    heading, wording)."""
    train_scans, unseen_scans = list(train_scans), list(unseen_scans)
    overlap = sorted(set(train_scans) & set(unseen_scans))
    if overlap:
        raise ValueError(f"scans both seen and unseen: {overlap}")
    names = [name for name, _, _ in sizes]
    if len(set(names)) != len(names):
        raise ValueError(f"split names repeat: {names}")
    scans = train_scans + unseen_scans
    graph, nodes, scan_of = load_matterport_graph(connectivity_dir, scans)
    regions = synthetic_regions(graph, scan_of, nodes_per_region=NODES_PER_REGION, seed=seed)
    sampled = sample_paths(graph, scan_of, regions, seed=seed, **PATH_SAMPLING)
    landmarks = node_landmarks(nodes.ids)
    distance = scan_geodesics(graph, scan_of, [(p[0], p[-1]) for _, p in sampled])

    by_scan: dict[int, list[int]] = {}
    for pid, (s, _) in enumerate(sampled):
        by_scan.setdefault(s, []).append(pid)
    groups = {False: [(n, c) for n, c, _ in sizes if "unseen" not in n],
              True: [(n, c) for n, c, _ in sizes if "unseen" in n]}
    pools: dict[str, list[int]] = {n: [] for n in names}
    divide_rng = np.random.default_rng([seed, 7])
    for unseen, group in groups.items():
        if not group:
            continue
        group_scans = unseen_scans if unseen else train_scans
        for scan in group_scans:
            pids = by_scan.get(scans.index(scan), [])
            pids = [pids[i] for i in divide_rng.permutation(len(pids))]
            counts = _divide(len(pids), [c for _, c in group])
            start = 0
            for (name, _), k in zip(group, counts):
                pools[name].extend(sorted(pids[start:start + k]))
                start += k

    out: dict[str, list[dict]] = {}
    next_instr = 0
    for name, count, split_seed in sizes:
        pool = pools[name]
        if count > 0 and not pool:
            raise ValueError(f"split {name!r}: no paths sampled in its scans")
        rng = np.random.default_rng(split_seed)
        order: list[int] = []
        while len(order) < count:
            order.extend(pool[i] for i in rng.permutation(len(pool)))
        last_language: dict[int, str] = {}
        records = []
        for pid in order[:count]:
            s, path = sampled[pid]
            if pid in last_language:
                language = LANGUAGES[1 - LANGUAGES.index(last_language[pid])]
            else:
                language = LANGUAGES[int(rng.integers(len(LANGUAGES)))]
            last_language[pid] = language
            heading = float(np.mod(rng.uniform(0.0, 2 * math.pi), 2 * math.pi))
            records.append({
                "instruction_id": next_instr,
                "path_id": pid,
                "scan": scans[s],
                "path": [nodes.ids[v].rsplit("/", 1)[-1] for v in path],
                "heading": heading,
                "instruction": instruction(landmarks[path[1:]], language, rng),
                "language": language,
                "annotator": "synthetic",
                "edit_distance": float("nan"),
                "distance": float(distance[pid]),
                "timed_words": [],
                "step_words": None,
                "step_views": None,
                "text_features": None,
            })
            next_instr += 1
        out[name] = records
    return out
