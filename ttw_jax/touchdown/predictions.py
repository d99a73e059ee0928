"""Touchdown navigation prediction files, one line per route, and scoring them back.

`predictions_<split>.jsonl` (JSON lines): `{"route_id": int, "route_panoids": [panoid, ...]}`,
the panoramas the agent visited from the start to where it stopped, consecutive repeats (turns
in place) dropped, in the records' own field name. `read_predictions` reads a file back into
{route_id: panoids}; `score_predictions` measures them against a split's routes with the
evaluation's rules (TC against the goal's undirected neighbourhood, SPD in hops on the directed
graph, SED over de-duplicated sequences, `ttw_jax.touchdown.metrics`), so a file written from an
evaluation scores to the same numbers.
"""
from __future__ import annotations

import json
from typing import Mapping, Sequence

import numpy as np

from ttw_jax.core import paths
from ttw_jax.core.records import read_jsonl
from ttw_jax.core.pano_graph import NodeTable, PanoGraph
from ttw_jax.core.sequence import dedup_consecutive_np
from ttw_jax.touchdown.episodes import hops_to_goal
from ttw_jax.touchdown.metrics import sed_np


def prediction_rows(route_ids: Sequence[int], paths_: np.ndarray, nodes: NodeTable
                    ) -> list[dict]:
    """One row per episode from its visited node ids [E, T] (repeats allowed)."""
    return [{"route_id": int(r), "route_panoids": [nodes.ids[int(n)] for n in
                                                   dedup_consecutive_np(list(p))]}
            for r, p in zip(route_ids, np.asarray(paths_))]


def write_predictions(path: paths.PathLike, rows: Sequence[dict]) -> None:
    paths.write_text(path, "".join(json.dumps(row) + "\n" for row in rows))


def read_predictions(path: str) -> dict[int, list[str]]:
    """{route_id: predicted panoids}; ValueError naming the file, line and field for a
    malformed or repeated line."""
    out = {}
    for where, _, row in read_jsonl(path):
        route, panos = row.get("route_id"), row.get("route_panoids")
        if not isinstance(route, int) or isinstance(route, bool):
            raise ValueError(f"{where}: field 'route_id' must be an integer, got {route!r}")
        if not panos or not all(isinstance(p, str) for p in panos):
            raise ValueError(f"{where}: field 'route_panoids' must be a non-empty list of "
                             "panorama ids")
        if route in out:
            raise ValueError(f"{where}: route {route} predicted twice")
        out[route] = list(panos)
    return out


def score_predictions(predictions: Mapping[int, Sequence[str]], episodes: Mapping[str, np.ndarray],
                      graph: PanoGraph, nodes: NodeTable) -> dict:
    """Mean TC, SPD and SED of `predictions` against the routes of `episodes` (route_id, route
    [E, R] node ids -1 padded, route_len, goal); every route must have a prediction."""
    ids = [int(r) for r in episodes["route_id"]]
    missing = [r for r in ids if r not in predictions]
    if missing:
        raise ValueError(f"{len(missing)} of {len(ids)} routes have no prediction, e.g. "
                         f"{missing[:5]}")
    neighbors = np.asarray(graph.neighbors)
    hops = hops_to_goal(graph, np.asarray(episodes["goal"]))
    tc, spd, sed = [], [], []
    for e, route_id in enumerate(ids):
        pred = nodes.lookup(predictions[route_id], "panorama")
        ref = list(np.asarray(episodes["route"][e][:episodes["route_len"][e]]))
        goal = int(episodes["goal"][e])
        final = int(pred[-1])   # TC: the goal, or linked to it in either direction
        tc.append(float(final == goal or final in neighbors[goal] or goal in neighbors[final]))
        h = hops[e, int(pred[-1])]
        spd.append(float(h) if h >= 0 else np.inf)
        sed.append(sed_np(list(pred), ref, tc[-1]))
    return {"tc": float(np.mean(tc)), "spd": float(np.mean(spd)), "sed": float(np.mean(sed))}
