"""PNG figures written by the launchers: learning curves and MASC masks (paper Figure 2)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def plot_learning_curve(history: list[dict], path: str, keys=("train/loss", "valid/accuracy"),
                        hlines: dict | None = None) -> None:
    """One panel per key of `history` (dicts with 'step'); `hlines` {label: y} on the last panel."""
    fig, axes = plt.subplots(1, len(keys), figsize=(5 * len(keys), 3.5))
    for ax, key in zip(np.atleast_1d(axes), keys):
        pts = [(h["step"], h[key]) for h in history if key in h]
        if pts:
            ax.plot(*zip(*pts), marker="." if len(pts) < 50 else None)
        ax.set_xlabel("step")
        ax.set_title(key)
        ax.grid(alpha=0.3)
    for label, y in (hlines or {}).items():
        ax.axhline(y, ls="--", color="gray")
        ax.text(ax.get_xlim()[0], y, f" {label}", va="bottom", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_masks(masks: np.ndarray, labels: list[str], path: str) -> None:
    """masks (S, T, 3, 3) indexed [dx+1, dy+1]; one row per action sequence, one column per step.

    Drawn with north up: cell (row, col) shows the weight on the neighbour at (dx=col-1, dy=1-row).
    """
    s, t = masks.shape[:2]
    fig, axes = plt.subplots(s, t, figsize=(1.8 * t + 1.5, 1.8 * s), squeeze=False)
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
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_sdr_heatmaps(backgrounds: np.ndarray, probs: np.ndarray, gold_rc: np.ndarray,
                      texts: list[str], path: str) -> None:
    """Touchdown SDR predictions (as the paper's Figure 7): for each example, the panorama's
    feature magnitude [H, W] in grey, the predicted distribution [H, W] overlaid, the gold location
    (row, col) as a green cross and the predicted mode as a red circle."""
    n = len(probs)
    fig, axes = plt.subplots(n, 1, figsize=(10, 2.2 * n), squeeze=False)
    for ax, bg, p, (r, c), text in zip(axes[:, 0], backgrounds, probs, gold_rc, texts):
        ax.imshow(bg, cmap="gray", aspect="auto")
        ax.imshow(p, cmap="inferno", alpha=0.6, aspect="auto")
        pr, pc = np.unravel_index(np.argmax(p), p.shape)
        ax.plot([c], [r], "x", color="lime", markersize=10, mew=2)
        ax.plot([pc], [pr], "o", mfc="none", color="red", markersize=10, mew=2)
        ax.set_title(text if len(text) < 110 else text[:107] + "...", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
