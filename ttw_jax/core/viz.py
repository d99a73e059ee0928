"""PNG figures: the matplotlib set-up every system shares (Agg, no display) and learning curves."""
from __future__ import annotations

import io

import matplotlib

from ttw_jax.core import paths

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def plot_learning_curve(history: list[dict], path: str, keys=("train/loss", "valid/accuracy"),
                        hlines: dict | None = None, xlabel: str = "step") -> None:
    """One panel per key of `history` (dicts with 'step', drawn along `xlabel`); `hlines`
    {label: y} on the last panel."""
    fig, axes = plt.subplots(1, len(keys), figsize=(5 * len(keys), 3.5))
    for ax, key in zip(np.atleast_1d(axes), keys):
        pts = [(h["step"], h[key]) for h in history if key in h]
        if pts:
            ax.plot(*zip(*pts), marker="." if len(pts) < 50 else None)
        ax.set_xlabel(xlabel)
        ax.set_title(key)
        ax.grid(alpha=0.3)
    for label, y in (hlines or {}).items():
        ax.axhline(y, ls="--", color="gray")
        ax.text(ax.get_xlim()[0], y, f" {label}", va="bottom", fontsize=8)
    save(fig, path)


def subplots(*args, **kwargs):
    """`matplotlib.pyplot.subplots` on the Agg backend: (figure, axes)."""
    return plt.subplots(*args, **kwargs)


def save(fig, path: paths.PathLike, dpi: int = 100, rect=None) -> None:
    """Lays out `fig` (inside `rect` = (left, bottom, right, top) in figure fractions, e.g. to
    leave room for a figure legend), writes it to `path` (PNG; any `paths.resolve` path) and
    closes it."""
    fig.tight_layout(rect=rect)
    buf = io.BytesIO()
    fig.savefig(buf, dpi=dpi, format="png")
    plt.close(fig)
    paths.write_bytes(path, buf.getvalue())
