"""Talk The Walk figures: learned MASC masks (paper Figure 2)."""
from __future__ import annotations

import numpy as np

from ttw_jax.core import viz


def plot_masks(masks: np.ndarray, labels: list[str], path: str) -> None:
    """masks (S, T, 3, 3) indexed [dx+1, dy+1]; one row per action sequence, one column per step.

    Drawn with north up: cell (row, col) shows the weight on the neighbour at (dx=col-1, dy=1-row).
    """
    s, t = masks.shape[:2]
    fig, axes = viz.subplots(s, t, figsize=(1.8 * t + 1.5, 1.8 * s), squeeze=False)
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
            if j == 0:
                ax.set_ylabel(labels[i], fontsize=8)
    viz.save(fig, path)
