"""Multi-label precision, recall and F1 (numpy), and the trivial baselines' predictions.

Any ratio with a zero denominator is defined as 0 (e.g. precision of a class never predicted,
recall of a class without positives). Micro scores pool the true/false positives and negatives of
all classes; macro scores are unweighted means of the per-class scores (macro F1 is the mean of
per-class F1, not the F1 of macro precision and recall); weighted scores are means of the per-class
scores weighted by each class's support (its positives), as scikit-learn's `average='weighted'`
that the released code reports (0 when no class has a positive).
"""
from __future__ import annotations

import numpy as np


def _ratio(num, den):
    num, den = np.asarray(num, float), np.asarray(den, float)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def _f1(p, r):
    return _ratio(2 * p * r, p + r)


def multilabel_metrics(pred, labels) -> dict:
    """Scores of binary predictions `pred` (N, C) against `labels` (N, C) (0/1 or bool).

    Returns floats micro_{precision,recall,f1}, macro_{precision,recall,f1} and arrays (C,)
    precision, recall, f1, support (positives per class), tp, fp, fn.
    """
    pred, labels = np.asarray(pred).astype(bool), np.asarray(labels).astype(bool)
    if pred.shape != labels.shape or pred.ndim != 2:
        raise ValueError(f"pred and labels must both be (N, C), got {pred.shape} and {labels.shape}")
    tp = (pred & labels).sum(0)
    fp = (pred & ~labels).sum(0)
    fn = (~pred & labels).sum(0)
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    f1 = _f1(precision, recall)
    micro_p, micro_r = float(_ratio(tp.sum(), tp.sum() + fp.sum())), float(_ratio(tp.sum(), tp.sum() + fn.sum()))
    c = pred.shape[1]
    mean = lambda x: float(x.mean()) if c else 0.0
    support = labels.sum(0)
    weighted = lambda x: float((x * support).sum() / support.sum()) if support.sum() else 0.0
    return {"weighted_precision": weighted(precision), "weighted_recall": weighted(recall),
            "weighted_f1": weighted(f1), "micro_precision": micro_p, "micro_recall": micro_r,
            "micro_f1": float(_f1(micro_p, micro_r)),
            "macro_precision": mean(precision), "macro_recall": mean(recall), "macro_f1": mean(f1),
            "precision": precision, "recall": recall, "f1": f1, "support": support,
            "tp": tp, "fp": fp, "fn": fn}


def all_positive(shape) -> np.ndarray:
    """The 'all positive' baseline: every class predicted at every example, bool `shape`."""
    return np.ones(shape, bool)


def random_positive(shape, seed: int, p: float = 0.5) -> np.ndarray:
    """The 'random (0.5)' baseline: each entry positive independently with probability `p` (the
    released code draws `randint(2)`). Bool `shape`."""
    return np.random.default_rng(seed).random(shape) < np.asarray(p)
