"""SDR figures: predicted distributions over the panorama with the gold location (paper Figure 7)."""
from __future__ import annotations

import numpy as np

from ttw_jax.core import viz


def plot_sdr_heatmaps(backgrounds: np.ndarray, probs: np.ndarray, gold_rc: np.ndarray,
                      texts: list[str], path: str) -> None:
    """Touchdown SDR predictions (as the paper's Figure 7): for each example, the panorama's
    feature magnitude [H, W] in grey, the predicted distribution [H, W] overlaid, the gold location
    (row, col) as a green cross and the predicted mode as a red circle."""
    n = len(probs)
    fig, axes = viz.subplots(n, 1, figsize=(10, 2.2 * n), squeeze=False)
    for i, (ax, bg, p, (r, c), text) in enumerate(zip(axes[:, 0], backgrounds, probs, gold_rc,
                                                       texts)):
        ax.imshow(bg, cmap="gray", aspect="auto")
        ax.imshow(p, cmap="inferno", alpha=0.6, aspect="auto")
        pr, pc = np.unravel_index(np.argmax(p), p.shape)
        ax.plot([c], [r], "x", color="lime", markersize=10, mew=2, label="gold location")
        ax.plot([pc], [pr], "o", mfc="none", color="red", markersize=10, mew=2,
                label="predicted mode")
        if i == 0:
            ax.legend(loc="upper right", fontsize=7)
        ax.set_title(text if len(text) < 110 else text[:107] + "...", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    viz.save(fig, path)
