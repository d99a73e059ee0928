"""Touchdown navigation episodes as padded numpy arrays: tokens, start state, route, gold actions.

Records (original schema, see `ttw_jax.touchdown.records`) are decoded once per split into
fixed-shape arrays so every split shares one compiled program. Gold actions follow the route under
the official navigator's rules (`TouchdownReference.gold_actions`).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ttw_jax.core.pano_graph import NodeTable, PanoGraph, distances_from
from ttw_jax.core.vocab import Vocabulary
from ttw_jax.touchdown.reference import STOP, TouchdownReference


def episodes(records: Sequence[dict], nodes: NodeTable, reference: TouchdownReference,
             vocab: Vocabulary, max_tokens: int, max_route: int, horizon: int,
             locate: Callable[[dict], str] | None = None, truncate: str = "warn") -> dict:
    """Padded arrays for navigation records (dicts with `route_panoids`, `start_heading`,
    `navigation_text`, `route_id`). An error about one record starts with `locate(record)` (its
    file and line, `ttw_jax.touchdown.dataset.record_location`) when given.

    A route with consecutive panoramas that no link joins is refused (ValueError), as R2R's are.

    Returns start_pano, start_heading, goal, route_len, gold_len, token_len, route_id: [E] int32;
    route [E, max_route] (-1 padded; a longer route raises ValueError); gold [E, horizon] actions (STOP padded; sequences longer than
    the horizon are cut); tokens [E, max_tokens] (a longer instruction: `truncate`, see
    `Vocabulary.encode`).
    """
    e = len(records)
    route = np.full((e, max_route), -1, np.int32)
    gold = np.full((e, horizon), STOP, np.int32)
    route_len, gold_len = np.zeros(e, np.int32), np.zeros(e, np.int32)
    heading = np.zeros(e, np.int32)
    for i, rec in enumerate(records):
        ids = nodes.lookup(rec["route_panoids"], "panorama")
        if len(ids) > max_route:
            at = f"{locate(rec)}: " if locate else ""
            raise ValueError(f"{at}route_id {rec['route_id']}: route of {len(ids)} panoramas exceeds "
                             f"data.max_route={max_route}; raise it (SED compares whole routes)")
        gap = reference.unlinked_step(rec["route_panoids"])
        if gap:
            at = f"{locate(rec)}: " if locate else ""
            raise ValueError(f"{at}route_id {rec['route_id']}: field 'route_panoids': "
                             f"consecutive panoramas {gap[0]} -> {gap[1]} are not linked in "
                             "links.txt")
        route[i, :len(ids)] = ids
        route_len[i] = len(ids)
        heading[i] = round(rec["start_heading"]) % 360
        acts = reference.gold_actions(rec["route_panoids"], int(heading[i]))[:horizon]
        gold[i, :len(acts)] = acts
        gold_len[i] = len(acts)
    tokens, token_len = vocab.encode([r["navigation_text"] for r in records], max_tokens,
                                     "navigation instructions (data.max_tokens)", truncate)
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
