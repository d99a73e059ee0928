"""SDR prediction files, one line per view, and scoring them back.

`predictions_<split>.jsonl` (JSON lines), per view of the split:

    {"route_id": int, "view": "main" | "pre" | "post" | int, "panoid": str (when known),
     "pixel": [row, col] (the predicted feature pixel, the mode of the distribution),
     "feature_shape": [H, W], "x": float, "y": float}

`x`, `y` are the predicted pixel's centre in [0, 1] (as the records' `*_static_center`), and a
view is `(route_id, view)`, unique in a split. `read_predictions` reads a file back into
{(route_id, view): (row, col, H, W)}; `score_predictions` measures those pixels against a split's
gold centres as the evaluation does (`sdr_metrics.distance_px`, consistency over the
descriptions), so a file written from an evaluation scores to the same numbers.
"""
from __future__ import annotations

import json
from typing import Mapping, Sequence

import numpy as np

from ttw_jax.core import paths
from ttw_jax.core.records import read_jsonl
from ttw_jax.touchdown.sdr import metrics as sdr_metrics

VIEWS = ("main", "pre", "post")


def view_names(split: Mapping) -> list:
    """The view of each example: its `which` as "main" / "pre" / "post" when the split has it
    (an index into `VIEWS`, or the name), else its position within its route."""
    if "which" in split:
        return [VIEWS[int(w)] if not isinstance(w, str) else str(w) for w in split["which"]]
    seen: dict[int, int] = {}
    out = []
    for r in np.asarray(split["route_id"]).tolist():
        out.append(seen.get(r, 0))
        seen[r] = seen.get(r, 0) + 1
    return out


def prediction_rows(split: Mapping, pixels: np.ndarray) -> list[dict]:
    """One row per example of `split` (route_id, which or none, panoid if present, features
    [E, H, W, C]) from its predicted feature pixels [E, 2]."""
    h, w = split["features"].shape[1:3]
    views = view_names(split)
    rows = []
    for i, (r, c) in enumerate(np.asarray(pixels).tolist()):
        row = {"route_id": int(split["route_id"][i]), "view": views[i]}
        if "panoid" in split:
            p = split["panoid"][i]
            row["panoid"] = p.decode() if isinstance(p, bytes) else str(p)
        row.update(pixel=[int(r), int(c)], feature_shape=[int(h), int(w)],
                   x=(c + 0.5) / w, y=(r + 0.5) / h)
        rows.append(row)
    return rows


def write_predictions(path: paths.PathLike, rows: Sequence[dict]) -> None:
    paths.write_text(path, "".join(json.dumps(row) + "\n" for row in rows))


def read_predictions(path: str) -> dict[tuple, tuple[int, int, int, int]]:
    """{(route_id, view): (row, col, H, W)} of a prediction file; ValueError naming the file,
    line and field for a malformed or repeated line."""
    out = {}
    for where, _, row in read_jsonl(path):
        try:
            key = (int(row["route_id"]), row["view"])
            (r, c), (h, w) = row["pixel"], row["feature_shape"]
            r, c, h, w = int(r), int(c), int(h), int(w)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{where}: field {e} missing or malformed (route_id, view, "
                             "pixel [row, col], feature_shape [H, W])") from None
        if not (0 <= r < h and 0 <= c < w):
            raise ValueError(f"{where}: field 'pixel' {[r, c]} outside the {h} x {w} map")
        if key in out:
            raise ValueError(f"{where}: route {key[0]} view {key[1]!r} predicted twice")
        out[key] = (r, c, h, w)
    return out


def score_predictions(predictions: Mapping[tuple, tuple], split: Mapping) -> dict:
    """SDR metrics (`sdr_metrics.NAMES`) of `predictions` against `split` (center [E, 2],
    route_id, which / text as in the evaluation); every view must have a prediction."""
    keys = list(zip(np.asarray(split["route_id"]).tolist(), view_names(split)))
    missing = [k for k in keys if k not in predictions]
    if missing:
        raise ValueError(f"{len(missing)} of {len(keys)} views have no prediction, e.g. "
                         f"{missing[:3]}")
    preds = np.asarray([predictions[k] for k in keys])
    h, w = int(preds[0, 2]), int(preds[0, 3])
    if not (preds[:, 2:] == [h, w]).all():
        raise ValueError("the predictions mix feature-map sizes")
    d = np.asarray(sdr_metrics.distance_px(preds[:, :2], np.asarray(split["center"]), h, w))
    groups = split["text"] if "text" in split else split["route_id"]
    return sdr_metrics.sdr_metrics_np(d, np.asarray(groups))
