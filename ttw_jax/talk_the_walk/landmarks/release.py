"""The Talk The Walk release's landmark-classification inputs, read as shipped (Appendix F).

Layouts (the official `ttw/data_loader.py` reads the same files, from its `--data-dir`):

* `resnetfeat.json`: `{"<nbh>": {"<cx>_<cy>_<view>": [2048 floats], ...}, ...}`, the ResNet-152
  penultimate features of the views of every corner; `<cx>_<cy>` are corner coordinates
  (`ttw_jax.talk_the_walk.maps`), `<view>` one of `VIEWS` (two 60-degree views per compass
  direction, their focus 30 degrees apart).
* `<nbh>/text.json`: `{"<cx>_<cy>_<view>": [{"lex_recog": "<recognised text>", ...}, ...]}`, the
  text recognised in each view (other fields of an entry are ignored). A view without an entry
  holds no text.
* a FastText `.vec` file (`wiki.en.vec` style: an optional `<count> <dim>` header line, then
  `<word> <dim floats>` per line) that the user names; it replaces the learned look-up table.

A corner's *relevant views* (`relevant_views`) are the two directions facing away from its
intersection, two images each: the released `get_orientation_keys` (an even `cx` is a west
corner, an even `cy` a south corner).

Every error names the file and the neighbourhood / key / line at fault.
"""
from __future__ import annotations

import io
import json
import os
from typing import Iterable, Mapping

import numpy as np

from ttw_jax.core import paths
from ttw_jax.core.records import RecordFormatError, nonfinite_problem, read_json

VIEWS = ("N1", "N2", "E1", "E2", "S1", "S2", "W1", "W2")
RESNET_FILE = "resnetfeat.json"
TEXT_FILE = "text.json"
SOURCE_HINT = ("The landmark-classification features (resnetfeat.json, <neighbourhood>/text.json) "
               "come with the official Talk The Walk release (github.com/facebookresearch/"
               "talkthewalk, scripts/download_data.sh), in the same folder as the maps; FastText "
               "vectors are a .vec file from fasttext.cc (e.g. wiki.en.vec).")


class FeatureFormatError(RecordFormatError):
    """A feature file exists but its content is not in the release's layout."""


def view_key(cx: int, cy: int, view: str) -> str:
    return f"{cx}_{cy}_{view}"


def relevant_views(cx: int, cy: int) -> tuple[str, str, str, str]:
    """The 4 view keys facing a corner's landmarks: W or E (by `cx` parity), then S or N (by
    `cy`), two images each, in the released order."""
    horizontal = "W" if cx % 2 == 0 else "E"
    vertical = "S" if cy % 2 == 0 else "N"
    return tuple(view_key(cx, cy, d + i) for d in (horizontal, vertical) for i in "12")


def _fail(path: str, where: str, problem: str) -> FeatureFormatError:
    return FeatureFormatError(f"{path}: {where}: {problem}")


def _check_view_key(path: str, where: str, key) -> None:
    parts = key.split("_") if isinstance(key, str) else []
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit() or parts[2] not in VIEWS:
        raise _fail(path, where, f"expected a view key '<cx>_<cy>_<view>' with <view> in {VIEWS} "
                                 f"(e.g. '0_3_W1'), got {key!r}")


def _require(path: str) -> None:
    if not paths.isfile(path):
        raise FileNotFoundError(f"{path}: not found. {SOURCE_HINT}")


def read_resnet(path: str, neighborhoods: Iterable[str] | None = None
                ) -> dict[str, dict[str, np.ndarray]]:
    """{nbh: {view key: (D,) float32}} from `resnetfeat.json` (every neighbourhood in the file,
    or only `neighborhoods`). All vectors must have one length D and be finite as stored and as
    float32."""
    _require(path)
    obj = read_json(path, FeatureFormatError, SOURCE_HINT)
    if not isinstance(obj, dict):
        raise _fail(path, "top level", "expected an object mapping each neighbourhood to "
                                       f"{{'<cx>_<cy>_<view>': [floats]}}, got {type(obj).__name__}")
    wanted = None if neighborhoods is None else set(neighborhoods)
    out, dim = {}, None
    for nbh, views in obj.items():
        if wanted is not None and nbh not in wanted:
            continue
        if not isinstance(views, dict):
            raise _fail(path, f"neighbourhood {nbh!r}", "expected an object mapping view keys to "
                                                        f"feature lists, got {type(views).__name__}")
        raw = {}
        for key, vec in views.items():
            where = f"neighbourhood {nbh!r}, key {key!r}"
            _check_view_key(path, where, key)
            arr = np.asarray(vec) if isinstance(vec, list) else None
            if arr is None or arr.ndim != 1 or arr.dtype.kind not in "fi" or not len(arr):
                raise _fail(path, where, "expected a non-empty flat list of numbers")
            dim = len(arr) if dim is None else dim
            if len(arr) != dim:
                raise _fail(path, where, f"expected {dim} numbers (the length of the first vector), "
                                         f"got {len(arr)}")
            raw[key] = arr
        # finite as stored and as float32, the dtype the vectors are used in: one check per
        # neighbourhood, then the first bad vector's own message
        keys = list(raw)
        problem = nonfinite_problem(np.stack([raw[k] for k in keys]), np.float32) if keys else None
        if problem:
            bad = next(k for k in keys if nonfinite_problem(raw[k], np.float32))
            raise _fail(path, f"neighbourhood {nbh!r}, key {bad!r}",
                        nonfinite_problem(raw[bad], np.float32))
        out[nbh] = {k: a.astype(np.float32) for k, a in raw.items()}
    return out


def read_text(path: str) -> dict[str, list[str]]:
    """{view key: [recognised strings]} from one neighbourhood's `text.json`."""
    _require(path)
    obj = read_json(path, FeatureFormatError, SOURCE_HINT)
    if not isinstance(obj, dict):
        raise _fail(path, "top level", "expected an object mapping '<cx>_<cy>_<view>' to a list of "
                                       f"{{'lex_recog': str}}, got {type(obj).__name__}")
    out = {}
    for key, entries in obj.items():
        where = f"key {key!r}"
        _check_view_key(path, where, key)
        if not isinstance(entries, list):
            raise _fail(path, where, f"expected a list of entries, got {type(entries).__name__}")
        words = []
        for i, e in enumerate(entries):
            if not isinstance(e, dict) or not isinstance(e.get("lex_recog"), str):
                raise _fail(path, f"{where}, entry {i}, field 'lex_recog'",
                            f"expected an object with a string 'lex_recog', got {e!r}"[:300])
            words.append(e["lex_recog"])
        out[key] = words
    return out


def read_vec(path: str, words: Iterable[str]) -> tuple[dict[str, np.ndarray], int]:
    """Vectors of `words` from a FastText `.vec` file: ({word: (dim,) float32}, dim).

    A word is looked up as written, then lower-cased; words in neither form are absent from the
    result (a `.vec` file has no sub-word n-grams, unlike the `.bin` model the released code
    queries). Only the lines of wanted words are parsed in full.
    """
    _require(path)
    wanted = set(words)
    lower = {}
    for w in wanted:
        lower.setdefault(w.lower(), []).append(w)
    exact, folded, dim = {}, {}, None
    with io.TextIOWrapper(paths.open_binary(path), encoding="utf-8", errors="strict") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.rstrip("\n").rstrip(" ").split(" ")
            if lineno == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                dim = int(parts[1])
                continue
            word = parts[0]
            if word not in wanted and word not in lower:
                continue
            try:
                vec = np.asarray(parts[1:], np.float64).astype(np.float32)
            except ValueError:
                raise _fail(path, f"line {lineno} ({word!r})", "expected a word and numbers") from None
            dim = len(vec) if dim is None else dim
            if len(vec) != dim or not np.isfinite(vec).all():
                raise _fail(path, f"line {lineno} ({word!r})",
                            f"expected {dim} finite numbers, got {len(vec)}")
            if word in wanted:
                exact.setdefault(word, vec)
            for w in lower.get(word, ()):
                folded.setdefault(w, vec)
    if dim is None:
        raise _fail(path, "file", "no vectors")
    return {w: exact.get(w, folded.get(w)) for w in wanted if w in exact or w in folded}, dim


# ---------------------------------------------------------------------------------------------
# Synthetic files in the release's layout
# ---------------------------------------------------------------------------------------------

# Words a text recogniser might read on a storefront of each landmark type (label column order).
CLASS_WORDS = (("coffee", "espresso", "cafe"), ("sale", "boutique", "fashion"),
               ("pizza", "grill", "kitchen"), ("bank", "atm", "chase"), ("subway", "station", "mta"),
               ("park", "playground", "field"), ("theater", "tickets", "show"),
               ("bar", "pub", "beer"), ("hotel", "inn", "suites"))
NOISE_WORDS = ("st", "ave", "the", "open", "new", "york", "nyc", "free", "24", "exit", "ii", "of")


def write_synthetic_release(out_dir: str, corner_ids: Mapping[str, np.ndarray], seed: int,
                            dim: int = 64, visibility: float = 0.5, noise: float = 1.0,
                            word_p: float = 0.4, noise_words: float = 1.0) -> None:
    """Writes `resnetfeat.json` and `<nbh>/text.json` in the release's layout for the corners
    `corner_ids` {nbh: (X, Y, K) landmark ids, padded with 0} (e.g. `maps.NeighborhoodMap.corners`).

    ResNet: all 8 views of every corner get N(0, noise^2) features; each landmark of a corner adds
    its type's unit prototype to each relevant view with probability `visibility`. Text: each
    relevant view reads one of its landmarks' words with probability `word_p` per landmark, plus
    Poisson(`noise_words`) noise words anywhere; other views read noise words only.
    """
    rng = np.random.default_rng(seed)
    protos = rng.standard_normal((len(CLASS_WORDS) + 2, dim))
    protos /= np.linalg.norm(protos, axis=1, keepdims=True)
    resnet = {}
    for nbh, ids in corner_ids.items():
        feats, text = {}, {}
        for cx, cy in np.ndindex(*ids.shape[:2]):
            types = [int(t) for t in ids[cx, cy] if 1 <= t <= len(CLASS_WORDS)]
            relevant = set(relevant_views(cx, cy))
            for view in VIEWS:
                key = view_key(cx, cy, view)
                vec = noise * rng.standard_normal(dim)
                words = [str(rng.choice(NOISE_WORDS)) for _ in range(rng.poisson(noise_words))]
                if key in relevant:
                    for t in types:
                        if rng.random() < visibility:
                            vec += protos[t]
                        if rng.random() < word_p:
                            words.append(str(rng.choice(CLASS_WORDS[t - 1])))
                feats[key] = np.round(vec, 5).tolist()
                if words:
                    text[key] = [{"lex_recog": w} for w in words]
        resnet[nbh] = feats
        os.makedirs(os.path.join(out_dir, nbh), exist_ok=True)
        paths.write_text(os.path.join(out_dir, nbh, TEXT_FILE), json.dumps(text))
    paths.write_text(os.path.join(out_dir, RESNET_FILE), json.dumps(resnet))
