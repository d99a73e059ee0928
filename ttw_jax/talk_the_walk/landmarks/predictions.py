"""Per-corner landmark predictions, written beside `results.json` for each evaluated split, and a
scorer that re-reads them to the run's scores.

`predictions_<split>.npz` (split `train` or `valid`; a numpy archive of plain arrays, read with
`allow_pickle=False`) holds one row per corner of the split, in the order the corners were scored,
batch after batch:

    corner        (N,) str        "<nbh>_<cx>_<cy>", the corner's key (`features.Corners.keys`)
    neighborhood  (N,) str        its neighbourhood
    location      (N, 2) int32    (cx, cy), its coordinates on the corner grid (`maps`)
    index         (N,) int32      its position among all the run's corners (the example order)
    batch         (N,) int32      the batch it was scored in, 0, 1, ... (non-decreasing)
    labels        (N, C) bool     the gold multi-hot labels, columns `class_names`
    logits        (N, C) float32  the classifier's logits
    predictions   (N, C) bool     the predicted labels: logits >= 0 (sigmoid >= 0.5)
    weights       (N, C) float32  the loss weights of the corner (`losses.class_weights`)
    class_names   (C,) str        the 9 landmark types and Empty
    split         () str
    epoch         () int32        the kept epoch (the one early stopping selected)
    random        (N, C) bool     valid only: the draw of the 'random (0.5)' baseline

The valid file holds the kept parameters' logits (`params.safetensors`, `model.write_params`).
The train file holds the logits of the kept epoch's training pass: each batch is scored before
its update, as the released code scores train, so they come from parameters that change from
batch to batch.

`score_predictions` recomputes from a file what the run reports: the means over batches,
weighted by batch size, of the loss and of the weighted precision, recall and F1 (Table 18's
columns; `batch_means`, which the trainer uses too), and the scores over the whole split (weighted,
micro, macro and per class; `summarize`), for valid also those of the 'all positive' and
'random (0.5)' baselines. F1, precision and recall come from `predictions`; the loss from
`logits` and `weights` (recomputed here, so it matches the run's to float rounding).
"""
from __future__ import annotations

import io
from typing import Mapping, Sequence

import numpy as np

from ttw_jax.core import paths
from ttw_jax.core.records import RecordFormatError
from ttw_jax.talk_the_walk.landmarks.losses import weighted_bce
from ttw_jax.talk_the_walk.landmarks.metrics import all_positive, multilabel_metrics

SPLITS = ("train", "valid")
# The Table 18 scores, each a mean over batches weighted by batch size.
SCORES = ("loss", "weighted_f1", "weighted_precision", "weighted_recall")
ROW_FIELDS = ("corner", "neighborhood", "location", "index", "batch", "labels", "logits",
              "predictions", "weights")
FIELDS = (*ROW_FIELDS, "class_names", "split", "epoch")


def file_name(split: str) -> str:
    return f"predictions_{split}.npz"


def summarize(m: Mapping, class_names: Sequence[str]) -> dict:
    """JSON-ready scores of `metrics.multilabel_metrics`: the weighted / micro / macro floats and
    per class {precision, recall, f1, support}."""
    out = {k: v for k, v in m.items() if k.startswith(("weighted_", "micro_", "macro_"))}
    out["per_class"] = {name: {"precision": float(m["precision"][c]),
                               "recall": float(m["recall"][c]), "f1": float(m["f1"][c]),
                               "support": int(m["support"][c])}
                        for c, name in enumerate(class_names)}
    return out


def batch_bounds(batch: np.ndarray) -> list[tuple[int, int]]:
    """[(start, stop)] of the runs of equal values of `batch` (N,): the rows of each batch."""
    batch = np.asarray(batch)
    if not len(batch):
        return []
    starts = [int(i) for i in np.flatnonzero(np.r_[True, batch[1:] != batch[:-1]])]
    return list(zip(starts, [*starts[1:], len(batch)]))


def batch_means(batch: np.ndarray, pred: np.ndarray, labels: np.ndarray,
                losses: Sequence[float]) -> dict:
    """{SCORES: mean over the batches weighted by their sizes}: `batch` (N,) the batch of each
    row (rows of a batch contiguous, batches in order), `pred` and `labels` (N, C), `losses` the
    loss of each batch. The weighted scores of a batch are `multilabel_metrics`'."""
    bounds = batch_bounds(batch)
    if len(bounds) != len(losses):
        raise ValueError(f"{len(bounds)} batches but {len(losses)} losses")
    total = dict.fromkeys(SCORES, 0.0)
    for (a, b), loss in zip(bounds, losses):
        s = multilabel_metrics(pred[a:b], labels[a:b])
        for k in SCORES:
            total[k] += (b - a) * (float(loss) if k == "loss" else s[k])
    return {k: v / len(pred) for k, v in total.items()}


def corner_fields(keys: Sequence[str]) -> dict:
    """{neighborhood (N,) str, location (N, 2) int32} of corner keys "<nbh>_<cx>_<cy>"."""
    parts = [str(k).rsplit("_", 2) for k in keys]
    return {"neighborhood": np.asarray([p[0] for p in parts], dtype=str),
            "location": np.asarray([[int(p[1]), int(p[2])] for p in parts],
                                   np.int32).reshape(-1, 2)}


def build(split: str, epoch: int, keys: np.ndarray, index: np.ndarray, batch: np.ndarray,
          labels: np.ndarray, logits: np.ndarray, weights: np.ndarray,
          class_names: Sequence[str], random: np.ndarray | None = None) -> dict:
    """The arrays of a predictions file (module docstring), rows as given."""
    logits = np.asarray(logits, np.float32)
    out = {"corner": np.asarray(keys, dtype=str), **corner_fields(keys),
           "index": np.asarray(index, np.int32), "batch": np.asarray(batch, np.int32),
           "labels": np.asarray(labels) > 0, "logits": logits, "predictions": logits >= 0,
           "weights": np.asarray(weights, np.float32),
           "class_names": np.asarray(class_names, dtype=str), "split": np.asarray(split),
           "epoch": np.asarray(epoch, np.int32)}
    if random is not None:
        out["random"] = np.asarray(random, bool)
    return out


def write_predictions(path: paths.PathLike, arrays: Mapping[str, np.ndarray]) -> None:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    paths.write_bytes(path, buf.getvalue())


def _fail(path, field: str, problem: str) -> RecordFormatError:
    return RecordFormatError(f"{path}: field {field!r}: {problem}")


def read_predictions(path: paths.PathLike) -> dict:
    """The arrays of a predictions file, checked: every field present with the shapes of the
    module docstring, batches contiguous and in order, `predictions` equal to `logits >= 0`.
    RecordFormatError naming the file, the field (and the first corner) at fault."""
    with paths.load_numpy(path) as z:
        data = {k: z[k] for k in z.files}
    missing = [f for f in FIELDS if f not in data]
    if missing:
        raise _fail(path, missing[0], "missing")
    n, c = len(data["corner"]), len(data["class_names"])
    shapes = {"neighborhood": (n,), "location": (n, 2), "index": (n,), "batch": (n,),
              "labels": (n, c), "logits": (n, c), "predictions": (n, c), "weights": (n, c),
              "random": (n, c)}
    for field, shape in shapes.items():
        if field in data and data[field].shape != shape:
            raise _fail(path, field, f"shape {data[field].shape}, expected {shape}")
    if n and np.any(np.diff(data["batch"]) < 0):
        raise _fail(path, "batch", "the rows of a batch must be contiguous, batches in order")
    wrong = np.flatnonzero((data["predictions"].astype(bool) != (data["logits"] >= 0)).any(1))
    if len(wrong):
        raise _fail(path, "predictions", f"differs from logits >= 0 at corner "
                                         f"{data['corner'][wrong[0]]!r}")
    return data


def score_predictions(data: Mapping[str, np.ndarray]) -> dict:
    """The scores of a predictions file's arrays (`read_predictions`): {split, epoch, corners,
    batch_means {SCORES}, model (`summarize`), and for a file with the random draw (valid)
    all_positive and random}."""
    pred, labels = data["predictions"].astype(bool), data["labels"].astype(bool)
    names = [str(s) for s in data["class_names"]]
    batch = data["batch"]
    losses = [float(weighted_bce(data["logits"][a:b], labels[a:b], data["weights"][a:b]))
              for a, b in batch_bounds(batch)]
    out = {"split": str(data["split"]), "epoch": int(data["epoch"]), "corners": len(pred),
           "batch_means": batch_means(batch, pred, labels, losses),
           "model": summarize(multilabel_metrics(pred, labels), names)}
    if "random" in data:
        out["all_positive"] = summarize(multilabel_metrics(all_positive(labels.shape), labels),
                                        names)
        out["random"] = summarize(multilabel_metrics(data["random"], labels), names)
    return out
