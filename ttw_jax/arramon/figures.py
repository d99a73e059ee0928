"""ArraMon run figures: `trajectories.png`, the agent's navigation and assembly beside the ground
truth for a few instances (after the paper's Figs. 16 and 17)."""
from __future__ import annotations

import numpy as np

from ttw_jax.arramon import env
from ttw_jax.core import viz

GT, AGENT = "#e377c2", "#2ca02c"            # the paper's pink ground truth, green agent
TURN_STYLES = ("-", "--")                   # turn 1, turn 2 of the ground truth


def _crop(walkable: env.Walkable, m: int, points: np.ndarray, margin: float = 4.0):
    """(image [rows z, cols x] bool, extent) of raster m around points [P, 2] (x, z)."""
    grid = np.asarray(walkable.grid[m])
    origin, res = np.asarray(walkable.origin[m], np.float64), walkable.resolution
    lo = np.floor((points.min(0) - margin - origin) / res).astype(int)
    hi = np.ceil((points.max(0) + margin - origin) / res).astype(int)
    lo, hi = np.maximum(lo, 0), np.minimum(hi, grid.shape)
    image = grid[lo[0]:hi[0], lo[1]:hi[1]].T
    x0, z0 = origin + lo * res
    x1, z1 = origin + hi * res
    return image, (x0, x1, z0, z1)


def _navigation(ax, walkable, episodes, per, i):
    m = int(episodes["map_index"][i])
    gt = [episodes["navi_path"][i, t, :episodes["navi_path_len"][i, t]] for t in range(2)]
    ours = [per[f"navi_xz_{t}"][i, :per[f"navi_xz_len_{t}"][i]] for t in range(2)]
    targets = episodes["target_pos"][i][:, [0, 2]]
    image, extent = _crop(walkable, m, np.concatenate(gt + ours + [targets]))
    ax.imshow(image, origin="lower", extent=extent, cmap="Greys_r", vmin=-1.5, vmax=1.2,
              interpolation="nearest")
    for t in range(2):
        ax.plot(*gt[t].T, TURN_STYLES[t], color=GT, lw=2.5, alpha=0.8,
                label=f"ground truth, turn {t + 1}")
        ax.plot(*ours[t].T, ":", color=AGENT if t == 0 else "#17becf", lw=2,
                label=f"agent, turn {t + 1}")
        ax.plot(*targets[t], "*", ms=14, mec="k", color=("#d62728", "#ff7f0e")[t],
                label=f"target {t + 1}")
    ax.plot(*gt[0][0], "o", color="k", ms=7, label="start")
    ax.plot(*ours[0][-1], "o", color="w", mec="k", ms=7, label="agent's turn-1 end")
    ax.set_xlabel("x")
    ax.set_ylabel("z")
    ax.set_aspect("equal")


def _assembly(ax, episodes, per, i):
    cols, rows = env.GRID_COLUMNS, env.GRID_ROWS
    heights = episodes["heights"][i]
    for gx in range(cols):
        for gz in range(rows):
            ax.add_patch(_square(gx, gz, "#eeeeee" if heights[gx, gz] == 0 else "#bbbbbb"))
            if heights[gx, gz]:
                ax.text(gx, gz - 0.3, f"{heights[gx, gz]} below", ha="center", fontsize=6)
    ax.add_patch(_square(*env.START_CELL, "#f2d43d", hatch="xx"))
    for t in range(2):
        gx, level, gz = episodes["assem_target"][i, t]
        ax.add_patch(_circle(gx, gz, 0.38, "k", "-"))
        ax.text(gx, gz + 0.05, f"T{t + 1}\nL{level}", ha="center", va="center", fontsize=7)
        cells = per[f"assem_cell_{t}"][i, :per[f"assem_cell_len_{t}"][i]]
        ax.plot(cells[:, 0] + 0.08 * t, cells[:, 1] + 0.08 * t, ":", color=AGENT, lw=1.5)
        px, plevel, pz = per[f"placed_{t}"][i]
        ax.add_patch(_circle(px, pz, 0.3 - 0.06 * t, "#1f77b4", "--"))
        ax.text(px + 0.3, pz + 0.3, f"P{t + 1} L{plevel}", color="#1f77b4", fontsize=7)
    ax.plot([], [], "o", mfc="none", mec="k", label="target cell (T turn, L level)")
    ax.plot([], [], "o", mfc="none", mec="#1f77b4", ls="none", label="agent's placement")
    ax.plot([], [], ":", color=AGENT, label="agent's moves")
    ax.plot([], [], "s", color="#f2d43d", label="start, facing +z")
    ax.set_xlim(-0.7, cols - 0.3)
    ax.set_ylim(-0.7, rows - 0.3)
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.set_xlabel("gx")
    ax.set_ylabel("gz (far wall at the top)")
    ax.set_aspect("equal")


def _square(gx, gz, color, hatch=None):
    import matplotlib.patches as mp
    return mp.Rectangle((gx - 0.45, gz - 0.45), 0.9, 0.9, color=color, hatch=hatch, zorder=0)


def _circle(gx, gz, r, color, ls):
    import matplotlib.patches as mp
    return mp.Circle((gx, gz), r, fill=False, ec=color, ls=ls, lw=1.8)


def plot_trajectories(walkable: env.Walkable, episodes: dict, per: dict, path: str,
                      title: str = "") -> None:
    """One row per instance of `per` (the per-episode outputs of `evaluation.make_task_rollout`
    for the first n instances of `episodes`): the navigation paths of both turns on the walkable
    map, the agent's beside the ground truth, and the assembly grid with the agent's placements
    beside the targets."""
    n = len(per["placed_0"])
    fig, axes = viz.subplots(n, 2, figsize=(11, 4.2 * n), squeeze=False,
                             gridspec_kw={"width_ratios": [1.6, 1]})
    for i in range(n):
        _navigation(axes[i, 0], walkable, episodes, per, i)
        _assembly(axes[i, 1], episodes, per, i)
        axes[i, 0].set_title(f"instance {i}: navigation (walkable map light)", fontsize=9)
        axes[i, 1].set_title(f"instance {i}: assembly", fontsize=9)
    axes[0, 0].legend(fontsize=7, loc="best", framealpha=0.85)
    axes[0, 1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), framealpha=0.85)
    if title:
        fig.suptitle(title)
    viz.save(fig, path)
