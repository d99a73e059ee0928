"""SDR figures: predicted distributions over the panorama beside the gold location (the paper's
Figure 7 and App. C, Figures 9-14: red the Gaussian-smoothed gold location, green the model's
distribution)."""
from __future__ import annotations

import textwrap

import numpy as np
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ttw_jax.core import viz

# The prediction in green, transparent at 0 and 65% opaque at its maximum.
_PREDICTION = LinearSegmentedColormap.from_list("prediction", [(0, 0.9, 0, 0), (0, 0.9, 0, 0.65)])


def first_of_each_text(texts, num: int) -> list[int]:
    """Indices of the first example of each of the first `num` distinct texts."""
    seen, out = set(), []
    for i, text in enumerate(texts):
        if text not in seen:
            seen.add(text)
            out.append(i)
            if len(out) == num:
                break
    return out


def plot_sdr_heatmaps(backgrounds: np.ndarray, probs: np.ndarray, gold: np.ndarray,
                      gold_rc: np.ndarray, distances: np.ndarray, texts: list[str], path: str,
                      threshold_px: float = 80.0) -> None:
    """One panel per example: the panorama's feature magnitude backgrounds [k, H, W] in grey,
    the predicted distribution probs [k, H, W] in green over it (opacity in proportion to the
    probability, its maximum 65% opaque: a flat prediction tints the whole panorama), the gold
    Gaussian gold [k, H, W] as red contours at 10% and 50% of its peak, the gold location
    gold_rc [k, 2] (row, col, continuous) as a red cross and the predicted mode as a green
    circle; the title gives the distance (px, `distances` [k]) and whether it is within
    `threshold_px`, and the description wraps below in full."""
    n = len(probs)
    wrapped = [textwrap.fill(t, 150) for t in texts]
    heights = [2.2 + 0.16 * w.count("\n") for w in wrapped]
    fig, axes = viz.subplots(n, 1, figsize=(12, sum(heights) + 0.6), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, bg, p, g, (r, c), d, text in zip(axes[:, 0], backgrounds, probs, gold, gold_rc,
                                             distances, wrapped):
        ax.imshow(bg, cmap="gray", aspect="auto")
        ax.imshow(p / max(p.max(), 1e-12), cmap=_PREDICTION, vmin=0, vmax=1, aspect="auto")
        ax.contour(g / max(g.max(), 1e-12), levels=(0.1, 0.5), colors="red", linewidths=1.2)
        pr, pc = np.unravel_index(np.argmax(p), p.shape)
        ax.plot([c], [r], "x", color="red", markersize=10, mew=2)
        ax.plot([pc], [pr], "o", mfc="none", color="lime", markersize=10, mew=2)
        verdict = "correct" if d < threshold_px else "wrong"
        ax.set_title(f"{d:.0f} px from the gold location: {verdict} at {threshold_px:.0f} px",
                     fontsize=9, color="darkgreen" if d < threshold_px else "darkred")
        ax.set_xlabel(text, fontsize=8, loc="left")
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0, 0].figure.legend(
        handles=[Line2D([], [], color="red", label="gold Gaussian (10%, 50% of its peak)"),
                 Patch(color=(0, 0.9, 0), label="predicted distribution"),
                 Line2D([], [], ls="", marker="x", color="red", mew=2, label="gold location"),
                 Line2D([], [], ls="", marker="o", mfc="none", color="lime", mew=2,
                        label="predicted mode")],
        loc="upper center", ncol=4, fontsize=8, frameon=False)
    viz.save(fig, path, rect=(0, 0, 1, 1 - 0.45 / (sum(heights) + 0.6)))
