"""Touchdown SDR views streamed from the release's per-panorama feature files.

The official SDR release keeps one feature map per panorama (`features/<panoid>.npy`, float16
[100, 464, 128], 11.9 MB); a description's views (main, pre, post) reference panoramas by id.
Decoded whole, the training split is about 212 GB (a copy per view). Here each split is a table of
views (centre, route id, text, and `pano`: an index into the list of feature files) and the
features a `LazyRows` that reads a view's panorama file when the view is used, so memory holds
the batches in flight, not the split. Training batches come from a `ttw_jax.core.stream
.BatchStream` over the views.

`write_synthetic_release` writes the official layout (records as JSON lines, one `.npy` per
panorama) from the synthetic SDR scenes at any feature size: the streaming benchmark's and tests'
data.
"""
from __future__ import annotations

import json
import os
from typing import Sequence

import numpy as np

from ttw_jax.core import paths
from ttw_jax.core.records import damaged, first_nonfinite, nonfinite_problem
from ttw_jax.core.stream import LazyRows, NonFiniteInput
from ttw_jax.touchdown.sdr.synthetic import iter_synthetic_sdr_examples

PAPER_FEATURE_SHAPE = (100, 464, 128)   # the release's ResNet-18 features per panorama
FEATURE_DTYPE = np.float16              # the dtype the views are read in (`panorama_rows`)


def panorama_rows(files: Sequence[str], pano: np.ndarray, shape: Sequence[int]) -> LazyRows:
    """[E, H, W, C] float16 rows: row i is the array in `files[pano[i]]` (read when indexed)."""
    pano = np.asarray(pano)

    return LazyRows(lambda i: read_feature_map(files[pano[i]], shape), len(pano), shape,
                    FEATURE_DTYPE)


def read_feature_map(path: str, shape: Sequence[int]) -> np.ndarray:
    """One panorama's feature map `<panoid>.npy`, of `shape`, floating point and finite as
    stored and as `FEATURE_DTYPE`, the dtype the views are read in (ValueError naming the file
    for a damaged file, another shape or dtype; `NonFiniteInput`, a ValueError, for NaN or inf,
    a value float16 cannot hold)."""
    with damaged(path, ValueError):
        x = paths.load_numpy(path)
    if x.shape != tuple(shape):
        raise ValueError(f"{path}: shape {x.shape}, expected {tuple(shape)}")
    if x.dtype.kind != "f":
        raise ValueError(f"{path}: dtype {x.dtype}, expected floating point (float16)")
    bad = first_nonfinite(x, FEATURE_DTYPE)
    if bad:   # a run stops at the step that reads it (`nonfinite_step_<n>.json`)
        raise NonFiniteInput(path, bad[0], nonfinite_problem(x, FEATURE_DTYPE))
    return x


def view_tables(views_by_split: dict[str, list[dict]], files: dict[str, str]
                ) -> tuple[dict[str, dict], list[str]]:
    """({split: {pano [E] int, center [E, 2] float32, route_id [E], which, panoid, text}},
    the feature file of each pano index) from `records.sdr_examples`-form views and
    {panoid: file}. Each panorama's file is listed once however many views reference it."""
    order = sorted({v["panoid"] for views in views_by_split.values() for v in views})
    index = {p: i for i, p in enumerate(order)}
    out = {}
    for split, views in views_by_split.items():
        out[split] = {
            "pano": np.asarray([index[v["panoid"]] for v in views], np.int64),
            "center": np.asarray([[v["center_x"], v["center_y"]] for v in views],
                                 np.float32).reshape(-1, 2),
            "route_id": np.asarray([v["route_id"] for v in views], np.int64),
            "which": np.asarray([v["which"] for v in views], dtype=str),
            "panoid": np.asarray([v["panoid"] for v in views], dtype=str),
            "text": [v["td_location_text"] for v in views]}
    return out, [files[p] for p in order]


def write_synthetic_release(manual_dir: str, num_panoramas: int, seed: int = 0,
                            shape: Sequence[int] = PAPER_FEATURE_SHAPE,
                            fractions: Sequence[tuple[str, float]] = (
                                ("train", 0.8), ("dev", 0.1), ("test", 0.1))) -> dict[str, int]:
    """Writes `num_panoramas` synthetic scenes in the official SDR layout under `manual_dir`
    (`{split}.json` records, one main view each, and `features/<panoid>.npy`); returns
    {split: records}. Deterministic in `seed`; an existing file is kept (resumable)."""
    h, w, c = shape
    os.makedirs(os.path.join(manual_dir, "features"), exist_ok=True)
    bounds = np.cumsum([0] + [int(round(f * num_panoramas)) for _, f in fractions])
    bounds[-1] = num_panoramas
    lines: dict[str, list[str]] = {split: [] for split, _ in fractions}
    for ex in iter_synthetic_sdr_examples(num_panoramas, seed, h, w, c):
        if ex["which"] != "main":
            continue
        split = fractions[int(np.searchsorted(bounds, ex["route_id"], side="right")) - 1][0]
        path = os.path.join(manual_dir, "features", f"{ex['panoid']}.npy")
        if not os.path.exists(path):
            np.save(path + ".tmp.npy", ex["features"])
            os.replace(path + ".tmp.npy", path)
        lines[split].append(json.dumps({
            "route_id": ex["route_id"], "navigation_text": "Go to the spot.",
            "route_panoids": [f"{ex['panoid']}start", ex["panoid"]], "start_heading": 0.0,
            "end_heading": 0.0,
            "main_pano": ex["panoid"], "main_heading": str(round(ex["heading"], 3)),
            "main_static_center": json.dumps({"x": ex["center_x"], "y": ex["center_y"]}),
            "pre_pano": "", "pre_heading": "", "pre_static_center": '{"x": -1, "y": -1}',
            "post_pano": "", "post_heading": "", "post_static_center": '{"x": -1, "y": -1}',
            "td_location_text": ex["td_location_text"]}))
    for split, rows in lines.items():
        with open(os.path.join(manual_dir, f"{split}.json"), "w", encoding="utf-8") as f:
            f.write("".join(r + "\n" for r in rows))
    return {split: len(rows) for split, rows in lines.items()}
