"""Talk The Walk figures: learned MASC masks (paper Figure 2) and the localization learning
curve against the bounds."""
from __future__ import annotations

import numpy as np

from ttw_jax.core import viz


def plot_masks(masks: np.ndarray, labels: list[str], path: str) -> None:
    """masks (S, T, 3, 3) indexed [dx+1, dy+1]; one row per action sequence, one column per step.

    Drawn with north up: cell (row, col) shows the weight on the neighbour at (dx=col-1, dy=1-row).
    """
    s, t = masks.shape[:2]
    fig, axes = viz.subplots(s, t, figsize=(1.8 * t + 2.2, 1.8 * s), squeeze=False)
    for i in range(s):
        for j in range(t):
            ax = axes[i, j]
            ax.imshow(masks[i, j].T[::-1], vmin=0, vmax=1, cmap="Blues")
            for (r, c), v in np.ndenumerate(masks[i, j].T[::-1]):
                ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=7)
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_title(f"step {j + 1}", fontsize=9)
            if j == 0:   # the sequence's actions one per line, left of the row
                ax.set_ylabel(labels[i].replace("-", "\n"), fontsize=7, rotation=0,
                              ha="right", va="center", labelpad=6)
    fig.suptitle("MASC masks: each 3 x 3 grid is the step's kernel over the guide's map, the "
                 "weight on the neighbouring corner\nat that offset (north up, centre = the same "
                 "corner, darker = more; a step north reads from the corner south of it);\n"
                 "rows: action sequences, columns: steps", fontsize=8)
    viz.save(fig, path, rect=(0, 0, 1, 1 - 0.6 / (1.8 * s)))


def plot_localization_curve(history: list[dict], path: str, bounds: dict[str, float],
                            chance: float) -> None:
    """Two panels from the run's metric history: the training loss, and train / valid accuracy
    with `bounds` ({label: accuracy}, e.g. the exact Bayes bound with and without actions) and
    `chance` as horizontal lines, with a legend."""
    fig, (loss_ax, acc_ax) = viz.subplots(1, 2, figsize=(11, 3.8))
    for ax, keys in ((loss_ax, ("train/loss",)), (acc_ax, ("train/accuracy", "valid/accuracy"))):
        for key in keys:
            pts = [(h["step"], h[key]) for h in history if key in h]
            if pts:
                ax.plot(*zip(*pts), marker="." if len(pts) < 50 else None,
                        label=key.replace("/", " "))
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    loss_ax.set_title("training loss")
    acc_ax.set_title("localization accuracy")
    styles = ("--", "-.", ":")
    for (label, y), style in zip(bounds.items(), styles):
        acc_ax.axhline(y, ls=style, color="black", lw=1, label=f"{label} ({y:.3f})")
    acc_ax.axhline(chance, ls=":", color="gray", lw=1, label=f"chance ({chance:.3f})")
    acc_ax.set_ylim(0, 1)
    acc_ax.legend(fontsize=7, loc="lower right")
    viz.save(fig, path)
