"""The complete Touchdown task (Chen et al. 2019, section 8, "Complete task performance"): follow
the navigation instruction, then resolve the spatial description at the panorama where the agent
stopped; task completion is finding Touchdown.

An episode's SDR views are the panoramas from which Touchdown is visible (the release's `main`
view at the route's last panorama, `pre` at the one before it, `post` one step past it). The
agent finds Touchdown when it stops at one of its episode's views and the SDR model's prediction
there lies within the threshold (the SDR metrics' distances, `d < t`); stopping anywhere else is
a failure, whatever the SDR model predicts (Touchdown is not in that panorama).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ttw_jax.touchdown.graph import LinkRow
from ttw_jax.touchdown.sdr.metrics import THRESHOLDS_PX
from ttw_jax.touchdown.sdr.synthetic import iter_synthetic_sdr_examples

NAMES = tuple(f"acc_{t}" for t in THRESHOLDS_PX) + ("found", "distance")


def stop_views(final_panoid: Sequence[str], route_id: np.ndarray, view_route_id: np.ndarray,
               view_panoid: Sequence[str]) -> np.ndarray:
    """[E] index of the view at each episode's stopping panorama (final_panoid [E], the
    episodes' route_id [E]) among the views (view_route_id [V], view_panoid [V]), or -1 where
    Touchdown is not visible from there."""
    where = {(int(r), str(p)): i for i, (r, p) in enumerate(zip(view_route_id, view_panoid))}
    return np.asarray([where.get((int(r), str(p)), -1) for r, p in zip(route_id, final_panoid)],
                      np.int64)


def full_task_distances(view: np.ndarray, view_distance: np.ndarray) -> np.ndarray:
    """[E] distance in px of each episode's SDR prediction at its stop (view [E] from
    `stop_views`, view_distance [V]); +inf where the agent stopped out of Touchdown's sight."""
    view, view_distance = np.asarray(view), np.asarray(view_distance, np.float64)
    if not len(view_distance):
        return np.full(len(view), np.inf)
    return np.where(view >= 0, view_distance[np.maximum(view, 0)], np.inf)


def full_task_metrics(distances: np.ndarray, thresholds=THRESHOLDS_PX) -> dict:
    """`acc_{t}`: share of episodes that found Touchdown within t px (d < t); `found`: share
    that stopped where Touchdown is visible; `distance`: mean distance over those (None if
    none did: JSON has no NaN)."""
    distances = np.asarray(distances, np.float64)
    seen = np.isfinite(distances)
    out = {f"acc_{t}": float(np.mean(distances < t)) if len(distances) else 0.0
           for t in thresholds}
    out["found"] = float(seen.mean()) if len(distances) else 0.0
    out["distance"] = float(distances[seen].mean()) if seen.any() else None
    return out


def synthetic_goal_views(records: Sequence[dict], links: Sequence[LinkRow], seed: int,
                         shape: tuple[int, int, int]) -> dict:
    """Synthetic SDR views at the ends of synthetic navigation routes, in the release's layout:
    route i gets the i-th scene of `iter_synthetic_sdr_examples(len(records), seed, *shape)`
    with its `main` view at the route's last panorama, `pre` at the one before and `post` at the
    goal's first out-neighbour off the route (each only where the scene has that view and the
    panorama exists). Returns the arrays of `load_sdr` (features, center, route_id, which,
    panoid, heading, text)."""
    out_edges: dict[str, list[str]] = {}
    for start, _, end in links:
        out_edges.setdefault(start, []).append(end)
    scenes = iter_synthetic_sdr_examples(len(records), seed, *shape)
    rows = []
    by_index = {}
    for ex in scenes:
        by_index.setdefault(ex["route_id"], []).append(ex)
    for i, rec in enumerate(records):
        route = list(rec["route_panoids"])
        goal = route[-1]
        beyond = [p for p in out_edges.get(goal, []) if p not in route]
        panos = {"main": goal, "pre": route[-2] if len(route) > 1 else None,
                 "post": beyond[0] if beyond else None}
        for ex in by_index[i]:
            if panos[ex["which"]] is not None:
                rows.append((int(rec["route_id"]), ex["which"], panos[ex["which"]], ex))
    return {
        "features": np.stack([ex["features"] for *_, ex in rows]).astype(np.float16),
        "center": np.asarray([[ex["center_x"], ex["center_y"]] for *_, ex in rows], np.float32),
        "route_id": np.asarray([r[0] for r in rows], np.int64),
        "which": np.asarray([r[1] for r in rows], dtype=str),
        "panoid": np.asarray([r[2] for r in rows], dtype=str),
        "heading": np.asarray([ex["heading"] for *_, ex in rows], np.float32),
        "text": [ex["td_location_text"] for *_, ex in rows]}
