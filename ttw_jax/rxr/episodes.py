"""R2R / RxR instruction records as padded numpy episode arrays for the Matterport simulator.

Records are the dicts of `ttw_jax.rxr.records` (one per instruction). Each split is decoded
once into fixed-shape arrays, so every split shares one compiled program.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ttw_jax.core.pano_graph import NodeTable, PanoGraph
from ttw_jax.core.vocab import Vocabulary, tokenize
from ttw_jax.rxr.env import STOP
from ttw_jax.rxr.views import NUM_VIEWS


def gold_actions(graph: PanoGraph, path: Sequence[int], where: str) -> list[int]:
    """Panoramic actions that walk `path` (node ids) then STOP: action = 1 + the neighbour slot
    of the next node (ValueError naming `where` if two consecutive nodes are not linked)."""
    nb = np.asarray(graph.neighbors)
    acts = []
    for a, b in zip(path[:-1], path[1:]):
        slot = np.nonzero(nb[a] == b)[0]
        if not len(slot):
            raise ValueError(f"{where}: consecutive path viewpoints {a} -> {b} are not linked "
                             f"in the navigation graph")
        acts.append(int(slot[0]) + 1)
    return acts + [STOP]


def token_positions(instruction: str, timed_words: Sequence[str]) -> list[list[int]]:
    """For each timed word, the positions of its tokens in `tokenize(instruction)` (matched in
    order, searching forward; [] when a word cannot be matched)."""
    toks = tokenize(instruction)
    out, pos = [], 0
    for word in timed_words:
        w = tokenize(word)
        found = next((p for p in range(pos, len(toks) - len(w) + 1) if toks[p:p + len(w)] == w),
                     None) if w else None
        if found is None:
            out.append([])
        else:
            out.append(list(range(found, found + len(w))))
            pos = found + len(w)
    return out


def episodes(records: Sequence[dict], nodes: NodeTable, graph: PanoGraph, vocab: Vocabulary,
             languages: Sequence[str], max_tokens: int, max_path: int) -> dict:
    """Padded arrays of a split.

    Returns start, path_len, token_len, language (index into `languages`), instruction_id,
    path_id: [E] int32; heading [E] float32 (radians); path [E, max_path] node ids (-1 padded);
    gold [E, max_path] actions along the reference path, then STOP (STOP padded); tokens
    [E, max_tokens]. With pose-trace masks on any record, also word_mask [E, max_path,
    max_tokens] and view_mask [E, max_path, 36] (bool, per reference step) and has_masks [E].
    With text features on every record, text_features [E, max_tokens, D] float32 (token_len is
    then the feature length).
    """
    e = len(records)
    path = np.full((e, max_path), -1, np.int32)
    gold = np.full((e, max_path), STOP, np.int32)
    path_len = np.zeros(e, np.int32)
    lang_index = {lang: i for i, lang in enumerate(languages)}
    for i, rec in enumerate(records):
        where = f"instruction {rec['instruction_id']}"
        ids = nodes.lookup([f"{rec['scan']}/{v}" for v in rec["path"]], "viewpoint")
        if len(ids) > max_path:
            raise ValueError(f"{where}: path of {len(ids)} viewpoints exceeds max_path={max_path}")
        path[i, :len(ids)] = ids
        path_len[i] = len(ids)
        gold[i, :len(ids)] = gold_actions(graph, list(ids), where)
        if rec["language"] not in lang_index:
            raise ValueError(f"{where}: language {rec['language']!r} not in {list(languages)}")
    tokens, token_len = vocab.encode([r["instruction"] for r in records], max_tokens)
    out = dict(start=path[:, 0].copy(), heading=np.asarray([r["heading"] for r in records],
                                                           np.float32).reshape(e),
               path=path, path_len=path_len, gold=gold, tokens=tokens, token_len=token_len,
               language=np.asarray([lang_index[r["language"]] for r in records], np.int32),
               instruction_id=np.asarray([r["instruction_id"] for r in records], np.int32),
               path_id=np.asarray([r["path_id"] for r in records], np.int32))
    if any(r.get("step_words") is not None for r in records):
        out.update(_masks(records, max_path, max_tokens))
    feats = [r.get("text_features") for r in records]
    if e and all(f is not None for f in feats):
        dim = feats[0].shape[-1]
        tf = np.zeros((e, max_tokens, dim), np.float32)
        for i, f in enumerate(feats):
            f = np.asarray(f, np.float32)[:max_tokens]
            tf[i, :len(f)] = f
            out["token_len"][i] = max(len(f), 1)
        out["text_features"] = tf
    return out


def _masks(records: Sequence[dict], max_path: int, max_tokens: int) -> dict:
    e = len(records)
    word_mask = np.zeros((e, max_path, max_tokens), bool)
    view_mask = np.zeros((e, max_path, NUM_VIEWS), bool)
    has = np.zeros(e, bool)
    for i, rec in enumerate(records):
        if rec.get("step_words") is None:
            continue
        has[i] = True
        sw = np.asarray(rec["step_words"], bool)[:max_path]
        for w, positions in enumerate(token_positions(rec["instruction"], rec["timed_words"])):
            positions = [p for p in positions if p < max_tokens]
            for p in positions:
                word_mask[i, :len(sw), p] = sw[:, w]
        if rec.get("step_views") is not None:
            sv = np.asarray(rec["step_views"], bool)[:max_path]
            view_mask[i, :len(sv)] = sv
    return dict(word_mask=word_mask, view_mask=view_mask, has_masks=has)
