"""R2R / RxR instruction records as padded numpy episode arrays for the Matterport simulator.

Records are the dicts of `ttw_jax.rxr.records` (one per instruction). Each split is decoded
once into fixed-shape arrays, so every split shares one compiled program.
"""
from __future__ import annotations

import os
from typing import Callable, Sequence

import ml_dtypes
import numpy as np

from ttw_jax.core.pano_graph import NodeTable, PanoGraph
from ttw_jax.core.stream import LazyRows
from ttw_jax.core.vocab import Vocabulary, report_truncation, tokenize
from ttw_jax.rxr.env import STOP
from ttw_jax.rxr.records import ANNOTATORS
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
             languages: Sequence[str], max_tokens: int, max_path: int,
             text_features: bool = False,
             locate: Callable[[dict], str] | None = None,
             read_text_features: Callable[[int], np.ndarray] | None = None,
             split: str | None = None,
             text_features_at: Callable[[dict], Sequence[str]] | None = None) -> dict:
    """Padded arrays of a split. An error about one record is prefixed with `locate(record)`
    (its file and line or entry, see `ttw_jax.rxr.dataset.record_location`) when given; the
    refusal of records without text features names `split` and, with `text_features_at(record)`
    (the paths a record's text features were looked for at, see
    `ttw_jax.rxr.dataset.text_features_paths`), the folder and file names expected.

    Returns start, path_len, token_len, language (index into `languages`), instruction_id,
    path_id, annotator (index into `records.ANNOTATORS`): [E] int32; heading [E] float32
    (radians); path [E, max_path] node ids (-1 padded; a longer path raises ValueError);
    gold [E, max_path] actions along the reference path, then STOP (STOP padded).
    The instruction: without `text_features`, tokens [E, max_tokens] of `vocab` (longer
    instructions are cut with a `TruncationWarning`); with `text_features`, every record's
    features as text_features [E, max_tokens, D] bfloat16 (token_len their length; ValueError
    naming the records without; tokens all padding).
    Pose-trace masks, when a record has them: view_mask [E, max_path, 36] and has_masks [E]
    (the paper's m_t), word_mask [E, max_path, max_tokens] and has_word_mask [E] (b_t: the
    words, or text-feature subwords, spoken at or before each reference step; from the trace's
    word times over tokens, or its `text_masks` over subwords).
    """
    e = len(records)
    path = np.full((e, max_path), -1, np.int32)
    gold = np.full((e, max_path), STOP, np.int32)
    path_len = np.zeros(e, np.int32)
    lang_index = {lang: i for i, lang in enumerate(languages)}
    for i, rec in enumerate(records):
        try:
            ids, acts = _reference_path(rec, nodes, graph, max_path)
        except ValueError as e:
            raise ValueError(f"{locate(rec)}: {e}" if locate else str(e)) from None
        path[i, :len(ids)] = ids
        path_len[i] = len(ids)
        gold[i, :len(ids)] = acts
        if rec["language"] not in lang_index:
            raise ValueError(f"instruction {rec['instruction_id']}: language "
                             f"{rec['language']!r} not in {list(languages)}")
    if text_features:
        tokens = np.zeros((e, max_tokens), np.int32)
        _missing_text_features(records, split, text_features_at,
                               streamed=read_text_features is not None)
        features, token_len = (_text_features(records, max_tokens) if read_text_features is None
                               else _streamed_text_features(records, max_tokens,
                                                            read_text_features))
    else:
        tokens, token_len = vocab.encode([r["instruction"] for r in records], max_tokens,
                                         "instructions (data.max_tokens)")
    out = dict(start=path[:, 0].copy(), heading=np.asarray([r["heading"] for r in records],
                                                           np.float32).reshape(e),
               path=path, path_len=path_len, gold=gold, tokens=tokens, token_len=token_len,
               language=np.asarray([lang_index[r["language"]] for r in records], np.int32),
               instruction_id=np.asarray([r["instruction_id"] for r in records], np.int32),
               path_id=np.asarray([r["path_id"] for r in records], np.int32),
               annotator=np.asarray([ANNOTATORS.index(r["annotator"]) for r in records],
                                    np.int32))
    if text_features:
        out["text_features"] = features
    if any(r.get("step_views") is not None for r in records):
        out.update(_masks(records, max_path, max_tokens, text_features))
    return out


def _reference_path(rec: dict, nodes: NodeTable, graph: PanoGraph, max_path: int
                    ) -> tuple[list[int], list[int]]:
    """(node ids, gold actions) of `rec`'s path, checked: known viewpoints, at most `max_path`,
    each step an edge (ValueError naming the instruction and field otherwise)."""
    where = f"instruction {rec['instruction_id']}"
    try:
        ids = nodes.lookup([f"{rec['scan']}/{v}" for v in rec["path"]], "viewpoint")
    except KeyError as e:
        raise ValueError(f"{where}, field 'path': {e.args[0]} (scan {rec['scan']}: is its "
                         "connectivity graph the one the annotations were made on?") from None
    if len(ids) > max_path:
        raise ValueError(f"{where}: path of {len(ids)} viewpoints exceeds max_path={max_path}")
    return list(ids), gold_actions(graph, list(ids), where)


def _missing_text_features(records: Sequence[dict], split: str | None,
                           text_features_at: Callable[[dict], Sequence[str]] | None,
                           streamed: bool) -> None:
    """ValueError when records lack text features: names the split, how many lack them, a few
    instruction ids and where the first one's were looked for."""
    key = "text_features_row" if streamed else "text_features"
    missing = [r for r in records if r.get(key) is None]
    if not missing:
        return
    ids = [r["instruction_id"] for r in missing[:5]]
    head = f"split {split}: " if split else ""
    looked = list(text_features_at(missing[0])) if text_features_at else []
    if looked:
        where = (f" under {os.path.dirname(looked[0])}{os.sep} (expected "
                 "{instruction_id:06d}_{lang}_text_features.npz; instruction "
                 f"{ids[0]}'s were looked for at {', '.join(looked)})")
    else:
        where = (" (expected the release's text_features/rxr_{split}/"
                 "{instruction_id:06d}_{lang}_text_features.npz in the manual directory)")
    raise ValueError(
        f"{head}{len(missing):,} of {len(records):,} instructions have no text features{where}, "
        f"e.g. instruction_id {ids}: data.text_features=True needs every instruction's text "
        "features there when the dataset is prepared (BUILD.md)")


def _text_features(records: Sequence[dict], max_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """(features [E, max_tokens, D] bfloat16, lengths [E] int32) of records that all have
    text features (`episodes` refuses those without first: `_missing_text_features`)."""
    feats = [np.asarray(r["text_features"]) for r in records]
    report_truncation([len(f) for f in feats], max_tokens,
                      "instructions' text features (data.max_tokens)", "subwords")
    dim = feats[0].shape[-1] if feats else 0
    other = next((r for r, f in zip(records, feats) if f.ndim != 2 or f.shape[-1] != dim), None)
    if other is not None:
        raise ValueError(f"instruction {other['instruction_id']}: text features of shape "
                         f"{np.asarray(other['text_features']).shape}, expected [subwords, {dim}] "
                         f"like instruction {records[0]['instruction_id']}'s (its "
                         "text_features/..._text_features.npz file; `python -m "
                         "experiments.validate --dataset=rxr` lists every such file)")
    out = np.zeros((len(feats), max_tokens, dim), ml_dtypes.bfloat16)
    lengths = np.ones(len(feats), np.int32)
    for i, f in enumerate(feats):
        f = f[:max_tokens]
        out[i, :len(f)] = f.astype(ml_dtypes.bfloat16)
        lengths[i] = max(len(f), 1)
    return out, lengths


def _streamed_text_features(records: Sequence[dict], max_tokens: int,
                            read: Callable[[int], np.ndarray]) -> tuple[LazyRows, np.ndarray]:
    """`_text_features` with the features read when indexed: a `LazyRows` [E, max_tokens, D]
    over `read(record["text_features_row"])` (records of `load_rxr_streamed`)."""
    full = [int(r["text_features_len"]) for r in records]
    report_truncation(full, max_tokens, "instructions' text features (data.max_tokens)",
                      "subwords")
    rows = [int(r["text_features_row"]) for r in records]
    dim = read(rows[0]).shape[-1] if rows else 0

    def row(i: int) -> np.ndarray:
        f = read(rows[i])[:max_tokens]
        if f.ndim != 2 or f.shape[-1] != dim:
            raise ValueError(f"instruction {records[i]['instruction_id']}: text features of "
                             f"shape {f.shape}, expected [subwords, {dim}] like the others")
        out = np.zeros((max_tokens, dim), ml_dtypes.bfloat16)
        out[:len(f)] = f.astype(ml_dtypes.bfloat16)
        return out
    lengths = np.maximum(np.minimum(np.asarray(full, np.int32), max_tokens), 1).astype(np.int32)
    return LazyRows(row, len(rows), (max_tokens, dim), ml_dtypes.bfloat16), lengths


def _masks(records: Sequence[dict], max_path: int, max_tokens: int,
           text_features: bool) -> dict:
    e = len(records)
    word_mask = np.zeros((e, max_path, max_tokens), bool)
    view_mask = np.zeros((e, max_path, NUM_VIEWS), bool)
    has_views, has_words = np.zeros(e, bool), np.zeros(e, bool)
    for i, rec in enumerate(records):
        if rec.get("step_views") is not None:
            sv = np.asarray(rec["step_views"], bool)[:max_path]
            view_mask[i, :len(sv)] = sv
            has_views[i] = True
        if text_features:   # the trace's text_masks index the features' subwords
            if rec.get("step_subwords") is None:
                continue
            sub = np.asarray(rec["step_subwords"], bool)
            m = (len(rec["text_features"]) if rec.get("text_features") is not None
                 else rec["text_features_len"])   # streamed: the length alone
            if sub.shape[1] != m:
                raise ValueError(f"instruction {rec['instruction_id']}: the pose trace's "
                                 f"text_masks has {sub.shape[1]} subwords, its text features "
                                 f"{m}")
            sub = sub[:max_path, :max_tokens]
            word_mask[i, :len(sub), :sub.shape[1]] = sub
        else:
            if rec.get("step_words") is None:
                continue
            sw = np.asarray(rec["step_words"], bool)[:max_path]
            for w, positions in enumerate(token_positions(rec["instruction"],
                                                          rec["timed_words"])):
                for p in positions:
                    if p < max_tokens:
                        word_mask[i, :len(sw), p] = sw[:, w]
        has_words[i] = True
    # b_t: the words spoken at or before step t (Ku et al. 2020, section 5)
    word_mask = np.logical_or.accumulate(word_mask, axis=1)
    return dict(word_mask=word_mask, view_mask=view_mask, has_masks=has_views,
                has_word_mask=has_words)
