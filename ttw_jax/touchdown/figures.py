"""Touchdown navigation figures: `trajectories.png`, the agent's route beside the gold route over
the street graph for a few episodes."""
from __future__ import annotations

import numpy as np

from ttw_jax.core import viz
from ttw_jax.core.pano_graph import PanoGraph
from ttw_jax.core.sequence import dedup_consecutive_np


def _panel(ax, graph: PanoGraph, route: list[int], path: list[int], margin: float = 30.0):
    pos = np.asarray(graph.positions)[:, :2]
    nb = np.asarray(graph.neighbors)
    pts = pos[route + path]
    lo, hi = pts.min(0) - margin, pts.max(0) + margin
    inside = np.all((pos >= lo) & (pos <= hi), axis=1)
    src, slot = np.nonzero((nb >= 0) & inside[:, None])
    segs = np.stack([pos[src], pos[nb[src, slot]]], 1)
    for a, b in segs:
        ax.plot([a[0], b[0]], [a[1], b[1]], color="0.82", lw=0.8, zorder=1)
    ax.plot(*pos[route].T, color="tab:blue", lw=4, alpha=0.6, zorder=2, label="gold route")
    ax.plot(*pos[path].T, color="tab:orange", lw=1.8, ls="--", marker=".", ms=4, zorder=3,
            label="agent")
    ax.scatter(*pos[route[0]], s=70, color="black", zorder=4, label="start")
    ax.scatter(*pos[route[-1]], s=180, marker="*", color="tab:red", edgecolor="black",
               zorder=5, label="goal")
    ax.scatter(*pos[path[-1]], s=80, marker="X", color="tab:orange", edgecolor="black",
               zorder=6, label="agent's stop")
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    ax.set_aspect("equal")
    ax.set_xlabel("east (m)")
    ax.set_ylabel("north (m)")


def plot_routes(graph: PanoGraph, episodes: dict, paths_: np.ndarray, tc: np.ndarray,
                path: str, num: int = 4, title: str = "") -> None:
    """The first `num` episodes (route [E, R] -1 padded, route_len, route_id) with the agent's
    visited panoramas `paths_` [E, T] and task completion `tc` [E], one panel each."""
    num = min(num, len(episodes["route_id"]))
    if num == 0:
        return
    fig, axes = viz.subplots(1, num, figsize=(4.2 * num, 4.6))
    axes = np.atleast_1d(axes)
    for i, ax in enumerate(axes):
        route = [int(n) for n in episodes["route"][i][:episodes["route_len"][i]]]
        walked = [int(n) for n in dedup_consecutive_np(list(np.asarray(paths_[i])))]
        _panel(ax, graph, route, walked)
        ok = "completed" if tc[i] else "not completed"
        ax.set_title(f"route {int(episodes['route_id'][i])}: {ok}\n"
                     f"{len(route)} gold / {len(walked)} walked panoramas", fontsize=9)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=9, frameon=False)
    if title:
        fig.suptitle(title)
    viz.save(fig, path, rect=(0, 0.07, 1, 1))
