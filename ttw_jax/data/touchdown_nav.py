"""Touchdown navigation episodes as padded numpy arrays: tokens, start state, route, gold actions.

Records (original schema, see `ttw_jax.data.touchdown_records`) are decoded once per split into
fixed-shape arrays so every split shares one compiled program. Gold actions follow the route under
the official navigator's rules (`TouchdownReference.gold_actions`).
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from collections import Counter
from typing import Iterable, Sequence

import numpy as np

from ttw_jax.envs.reference import STOP, TouchdownReference
from ttw_jax.graphs.panorama import NodeTable, PanoGraph, distances_from

PAD, UNK = 0, 1
_TOKEN = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")


def tokenize(text: str) -> list[str]:
    """Lower-cased words and punctuation marks."""
    return _TOKEN.findall(text.lower())


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """Word ids: 0 padding, 1 unknown, then words by decreasing training frequency."""
    words: tuple[str, ...]

    @classmethod
    def build(cls, texts: Iterable[str], min_count: int = 1) -> "Vocabulary":
        counts = Counter(w for t in texts for w in tokenize(t))
        kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        return cls(("<pad>", "<unk>", *kept))

    @property
    def index(self) -> dict[str, int]:
        return {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, texts: Sequence[str], max_len: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids [E, max_len] int32, lengths [E] int32); longer texts are truncated."""
        index = self.index
        ids = np.zeros((len(texts), max_len), np.int32)
        lengths = np.zeros(len(texts), np.int32)
        for i, t in enumerate(texts):
            toks = [index.get(w, UNK) for w in tokenize(t)][:max_len]
            ids[i, :len(toks)] = toks
            lengths[i] = max(len(toks), 1)
        return ids, lengths

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(list(self.words), f)

    @classmethod
    def load(cls, path: str) -> "Vocabulary":
        with open(path, encoding="utf-8") as f:
            return cls(tuple(json.load(f)))

    @classmethod
    def load_or_build(cls, path: str, texts: Iterable[str], save: bool = True) -> "Vocabulary":
        """The vocabulary saved at `path` (a resumed run), else one built from `texts` and saved
        there when `save` (pass False on all but one process)."""
        if os.path.exists(path):
            return cls.load(path)
        vocab = cls.build(texts)
        if save:
            vocab.save(path)
        return vocab


def episodes(records: Sequence[dict], nodes: NodeTable, reference: TouchdownReference,
             vocab: Vocabulary, max_tokens: int, max_route: int, horizon: int) -> dict:
    """Padded arrays for navigation records (dicts with `route_panoids`, `start_heading`,
    `navigation_text`, `route_id`).

    Returns start_pano, start_heading, goal, route_len, gold_len, token_len, route_id: [E] int32;
    route [E, max_route] (-1 padded); gold [E, horizon] actions (STOP padded; sequences longer than
    the horizon are cut); tokens [E, max_tokens].
    """
    e = len(records)
    route = np.full((e, max_route), -1, np.int32)
    gold = np.full((e, horizon), STOP, np.int32)
    route_len, gold_len = np.zeros(e, np.int32), np.zeros(e, np.int32)
    heading = np.zeros(e, np.int32)
    for i, rec in enumerate(records):
        ids = nodes.lookup(rec["route_panoids"], "panorama")[:max_route]
        route[i, :len(ids)] = ids
        route_len[i] = len(ids)
        heading[i] = round(rec["start_heading"]) % 360
        acts = reference.gold_actions(rec["route_panoids"], int(heading[i]))[:horizon]
        gold[i, :len(acts)] = acts
        gold_len[i] = len(acts)
    tokens, token_len = vocab.encode([r["navigation_text"] for r in records], max_tokens)
    goal = np.asarray([nodes.index[r["route_panoids"][-1]] for r in records], np.int32)
    return dict(start_pano=route[:, 0].copy(), start_heading=heading, goal=goal, route=route,
                route_len=route_len, gold=gold, gold_len=gold_len, tokens=tokens,
                token_len=token_len,
                route_id=np.asarray([int(r["route_id"]) for r in records], np.int32))


def hops_to_goal(graph: PanoGraph, goals: np.ndarray) -> np.ndarray:
    """[E, N] int16 hop counts from every panorama to each episode's goal (-1: unreachable);
    breadth-first from the unique goals only, never all pairs."""
    unique, inverse = np.unique(goals, return_inverse=True)
    d = distances_from(graph, unique, weighted=False, reverse=True)
    d = np.where(np.isfinite(d), d, -1).astype(np.int16)
    return d[inverse]
