"""Per-corner view features and landmark-type labels for landmark classification (Talk The Walk,
Appendix F).

At every corner of a neighbourhood the tourist sees 4 views; a classifier predicts from their
features which of the 9 landmark types (`CLASS_NAMES`) stand at the corner (multi-label, a corner
may have none). Features are user-supplied, keyed by corner `"<nbh>_<cx>_<cy>"` (corner coordinates
as in `ttw_jax.talk_the_walk.maps`), in one of two files:

* `.npz`: arrays `keys` (N,) str and `features` (N, 4, D) float.
* `.json`: an object mapping each key to a list of 4 views, each a list of D numbers:
  `{"fidi_0_3": [[...D], [...D], [...D], [...D]], ...}`. The official release's `resnetfeat.json`
  is organised differently (per neighbourhood and view); convert it to this layout first.

The order of the 4 views is free: the classifier pools over them.

Splits: a corner belongs to the most held-out split among the windows containing it
(`maps.window_split`): test if any test window contains it, else valid if any valid window does,
else train. Held-out corners are thus never trained on, although the official windows overlap.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Mapping, Sequence

import numpy as np

from ttw_jax.core.records import RecordFormatError, is_number, read_json
from ttw_jax.talk_the_walk import maps

CLASS_NAMES = maps.LANDMARK_TYPES[1:maps.EMPTY_ID]  # the 9 landmark types, label column order
NUM_CLASSES = len(CLASS_NAMES)
NUM_VIEWS = 4
SOURCE_HINT = ("View features (ResNet image features or text-recognition embeddings) come from the "
               "official Talk The Walk release (github.com/facebookresearch/talkthewalk, "
               "scripts/download_data.sh), converted to one entry per corner; see "
               "ttw_jax/talk_the_walk/landmarks/features.py for the layout.")
_KEY = re.compile(r"^([A-Za-z]+)_(\d+)_(\d+)$")


class FeatureFormatError(RecordFormatError):
    """A feature file exists but its content is not in the documented layout."""


@dataclasses.dataclass(frozen=True)
class Corners:
    """A set of corners: keys (N,) str `"<nbh>_<cx>_<cy>"` and labels (N, 9) float32 multi-hot."""
    keys: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return int(self.keys.shape[0])


def corner_key(name: str, cx: int, cy: int) -> str:
    return f"{name}_{cx}_{cy}"


def parse_corner_key(key: str) -> tuple[str, int, int] | None:
    """(name, cx, cy) of a key, or None when it is not of the form `<nbh>_<cx>_<cy>`."""
    m = _KEY.match(key) if isinstance(key, str) else None
    return (m.group(1), int(m.group(2)), int(m.group(3))) if m else None


def _fail(path: str, where: str, problem: str) -> FeatureFormatError:
    return FeatureFormatError(f"{path}: {where}: {problem}")


def _check_key(path: str, key, where: str) -> str:
    if not isinstance(key, str) or parse_corner_key(key) is None:
        raise _fail(path, where, f"expected a corner key '<nbh>_<cx>_<cy>' (e.g. 'fidi_0_3'), "
                                 f"got {key!r}")
    return key


def _load_npz(path: str) -> dict[str, np.ndarray]:
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as e:  # a zip/npy decoding error
        raise _fail(path, "file", f"not a readable .npz archive ({e})") from None
    with data:
        for field in ("keys", "features"):
            if field not in data.files:
                raise _fail(path, f"array '{field}'", f"missing; the archive has {sorted(data.files)}")
        try:
            keys = data["keys"]
        except ValueError:
            raise _fail(path, "array 'keys'", "must be a string array, not Python objects "
                                              "(save it with keys.astype(str))") from None
        feats = data["features"]
    if keys.ndim != 1 or keys.dtype.kind != "U":
        raise _fail(path, "array 'keys'", f"expected a 1-D string array, got dtype {keys.dtype} "
                                          f"shape {keys.shape}")
    if feats.ndim != 3 or feats.shape[1] != NUM_VIEWS or feats.shape[0] != len(keys):
        raise _fail(path, "array 'features'", f"expected shape ({len(keys)}, {NUM_VIEWS}, D) "
                                              f"(one row per key), got {feats.shape}")
    if feats.dtype.kind not in "fiu":
        raise _fail(path, "array 'features'", f"expected numbers, got dtype {feats.dtype}")
    out = {}
    for i, key in enumerate(keys.tolist()):
        _check_key(path, key, f"array 'keys', entry {i}")
        if key in out:
            raise _fail(path, f"key {key!r}", "appears more than once in 'keys'")
        out[key] = np.asarray(feats[i], np.float32)
    return out


def _load_json(path: str) -> dict[str, np.ndarray]:
    obj = read_json(path, FeatureFormatError, SOURCE_HINT)
    if not isinstance(obj, dict):
        raise _fail(path, "top level", "expected an object mapping '<nbh>_<cx>_<cy>' to 4 views, "
                                       f"got {type(obj).__name__}")
    out, dim = {}, None
    for key, views in obj.items():
        _check_key(path, key, f"key {key!r}")
        if not isinstance(views, list) or len(views) != NUM_VIEWS:
            got = f"{len(views)} items" if isinstance(views, list) else type(views).__name__
            raise _fail(path, f"key {key!r}", f"expected a list of {NUM_VIEWS} views, got {got}")
        for v, view in enumerate(views):
            where = f"key {key!r}, view {v}"
            if not isinstance(view, list):
                raise _fail(path, where, f"expected a list of numbers, got {type(view).__name__}")
            for j, x in enumerate(view):
                if not is_number(x):
                    raise _fail(path, f"{where}, element {j}", f"expected a finite number, got "
                                                               f"{x!r}")
            if dim is None:
                dim = len(view)
            if len(view) != dim or not dim:
                raise _fail(path, where, f"expected {dim} numbers (the size of the first view), "
                                         f"got {len(view)}")
        out[key] = np.asarray(views, np.float32)
    return out


def load_features(path: str) -> dict[str, np.ndarray]:
    """Reads a `.npz` or `.json` feature file (layouts in the module docstring).

    Returns {corner key: (4, D) float32}. Errors name the file and the offending key / field.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: landmark feature file not found (expected a .npz or .json "
                                f"feature file). {SOURCE_HINT}")
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npz":
        return _load_npz(path)
    if ext == ".json":
        return _load_json(path)
    raise _fail(path, "file name", f"unknown extension {ext!r}; expected .npz or .json")


def save_features(path: str, features: Mapping[str, np.ndarray]) -> None:
    """Writes {key: (4, D)} in the layout `load_features` reads (by the extension of `path`)."""
    keys = sorted(features)
    if path.lower().endswith(".npz"):
        stacked = np.stack([np.asarray(features[k], np.float32) for k in keys]) if keys else \
            np.zeros((0, NUM_VIEWS, 0), np.float32)
        np.savez(path, keys=np.asarray(keys, dtype=str), features=stacked)
    elif path.lower().endswith(".json"):
        with open(path, "w", encoding="utf-8") as f:
            json.dump({k: np.asarray(features[k], float).tolist() for k in keys}, f)
    else:
        raise ValueError(f"{path}: expected a .npz or .json file name")


def corner_keys(nmap: maps.NeighborhoodMap) -> np.ndarray:
    """(X*Y,) keys of a neighbourhood's corners in `np.ndindex(X, Y)` order (cx major)."""
    return np.asarray([corner_key(nmap.name, cx, cy) for cx, cy in np.ndindex(*nmap.corners.shape[:2])])


def corner_labels(nmap: maps.NeighborhoodMap) -> np.ndarray:
    """(X*Y, 9) float32 multi-hot landmark types per corner, rows in `corner_keys` order."""
    ids = nmap.corners.reshape(-1, nmap.corners.shape[-1])
    classes = np.arange(1, NUM_CLASSES + 1)
    return (ids[:, :, None] == classes).any(1).astype(np.float32)


def corner_splits(nmap: maps.NeighborhoodMap) -> np.ndarray:
    """(X*Y,) split name per corner (rule in the module docstring), rows in `corner_keys` order."""
    width, height = nmap.corners.shape[:2]
    rank = np.zeros((width, height), int)  # 0 train, 1 valid, 2 test
    bx, by = nmap.boundary
    for mx in range(bx + 1):
        for my in range(by + 1):
            r = maps.SPLITS.index(maps.window_split(mx, my, nmap.boundary))
            block = rank[2 * mx:2 * mx + maps.WINDOW, 2 * my:2 * my + maps.WINDOW]
            np.maximum(block, r, out=block)
    return np.asarray(maps.SPLITS)[rank.reshape(-1)]


def split_corners(nmaps: Sequence[maps.NeighborhoodMap]) -> dict[str, Corners]:
    """{'train', 'valid', 'test'}: the corners of `nmaps` in each split, neighbourhoods in order."""
    keys = np.concatenate([corner_keys(m) for m in nmaps])
    labels = np.concatenate([corner_labels(m) for m in nmaps])
    splits = np.concatenate([corner_splits(m) for m in nmaps])
    return {s: Corners(keys[splits == s], labels[splits == s]) for s in maps.SPLITS}


def gather_features(features: Mapping[str, np.ndarray], keys: Sequence[str],
                    source: str = "features") -> np.ndarray:
    """(N, 4, D) float32 features of `keys`; a KeyError names `source` and the missing keys."""
    missing = [k for k in keys if k not in features]
    if missing:
        shown = ", ".join(repr(k) for k in missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise KeyError(f"{source}: no features for {len(missing)} of {len(keys)} corners: {shown}")
    if not len(keys):
        return np.zeros((0, NUM_VIEWS, 0), np.float32)
    out = np.stack([np.asarray(features[k], np.float32) for k in keys])
    if out.ndim != 3 or out.shape[1] != NUM_VIEWS:
        raise ValueError(f"{source}: expected ({NUM_VIEWS}, D) features per corner, got {out.shape[1:]}")
    return out


def synthetic_features(nmaps: Sequence[maps.NeighborhoodMap], dim: int = 64, seed: int = 0,
                       noise: float = 0.5, visibility: float = 0.5) -> dict[str, np.ndarray]:
    """Learnable but noisy stand-ins for view features: {corner key: (4, D) float32}.

    Each landmark type has a fixed random prototype (unit norm). In each view every landmark at
    the corner is visible independently with probability `visibility`; the view's feature is the
    sum of the visible landmarks' prototypes plus N(0, noise^2) per dimension. A landmark is
    missed by all 4 views with probability (1 - visibility)^4.
    """
    rng = np.random.default_rng(seed)
    protos = rng.standard_normal((NUM_CLASSES + 1, dim))
    protos /= np.linalg.norm(protos, axis=1, keepdims=True)
    protos[0] = 0.0  # padding / "Empty" contribute nothing
    out = {}
    for m in nmaps:
        ids = m.corners.reshape(-1, m.corners.shape[-1])
        ids = np.where((ids >= 1) & (ids <= NUM_CLASSES), ids, 0)                 # (C, K)
        visible = rng.random((len(ids), NUM_VIEWS, ids.shape[1])) < visibility   # (C, 4, K)
        feats = np.einsum("cvk,ckd->cvd", visible.astype(float), protos[ids])
        feats += noise * rng.standard_normal(feats.shape)
        for key, f in zip(corner_keys(m), feats.astype(np.float32)):
            out[str(key)] = f
    return out
