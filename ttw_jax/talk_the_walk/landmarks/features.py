"""Per-corner inputs and labels of landmark classification, as the released protocol builds them.

Every corner of every loaded neighbourhood is one example, in neighbourhood order and then
`np.ndindex` order of its corners (cx major). Its label is multi-hot over `CLASS_NAMES`, the 9
landmark types and Empty (a corner without landmarks), column = landmark id - 1. Its inputs are
the features of its 4 relevant views (`release.relevant_views`): ResNet vectors (4, D) and the
words recognised in them, as ids into a vocabulary of every string in the text files (0 pads).
The train / valid split is a seeded coin per corner (`random_split`), as the released
`create_split` draws one (unseeded there) per corner.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Mapping, Sequence

import numpy as np

from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.landmarks import release

CLASS_NAMES = maps.LANDMARK_TYPES[1:]   # 9 types and Empty: label column = landmark id - 1
NUM_CLASSES = len(CLASS_NAMES)
NUM_VIEWS = 4


@dataclasses.dataclass(frozen=True)
class Corners:
    """keys (N,) `"<nbh>_<cx>_<cy>"`; labels (N, 10) float32 multi-hot; resnet (N, 4, D) float32
    or None; words (N,) lists of the strings read in the relevant views, or None."""
    keys: np.ndarray
    labels: np.ndarray
    resnet: np.ndarray | None = None
    words: list[list[str]] | None = None

    def __len__(self) -> int:
        return int(self.keys.shape[0])


def corner_labels(nmap: maps.NeighborhoodMap) -> np.ndarray:
    """(X*Y, 10) float32: the landmark types at each corner, Empty where there are none."""
    ids = nmap.corners.reshape(-1, nmap.corners.shape[-1])
    labels = (ids[:, :, None] == np.arange(1, NUM_CLASSES + 1)).any(1)
    labels[:, NUM_CLASSES - 1] |= ~labels[:, :NUM_CLASSES - 1].any(1)   # no landmark: Empty
    return labels.astype(np.float32)


def corner_coords(nmap: maps.NeighborhoodMap) -> list[tuple[int, int]]:
    return list(np.ndindex(*nmap.corners.shape[:2]))


def build_corners(nmaps: Sequence[maps.NeighborhoodMap],
                  resnet: Mapping[str, Mapping[str, np.ndarray]] | None = None,
                  text: Mapping[str, Mapping[str, list[str]]] | None = None,
                  resnet_source: str = release.RESNET_FILE) -> Corners:
    """The examples of `nmaps` with the features given: `resnet` {nbh: {view key: (D,)}} (as
    `release.read_resnet`), `text` {nbh: {view key: [str]}} (as `release.read_text`; a view
    without an entry reads nothing). A corner whose relevant view has no ResNet vector is an
    error naming `resnet_source`, the neighbourhood and the key."""
    keys, labels, feats, words = [], [], [], []
    for m in nmaps:
        labels.append(corner_labels(m))
        if resnet is not None and m.name not in resnet:
            raise release.FeatureFormatError(
                f"{resnet_source}: no neighbourhood {m.name!r} (it has {sorted(resnet)})")
        for cx, cy in corner_coords(m):
            keys.append(f"{m.name}_{cx}_{cy}")
            views = release.relevant_views(cx, cy)
            if resnet is not None:
                missing = [k for k in views if k not in resnet[m.name]]
                if missing:
                    raise release.FeatureFormatError(
                        f"{resnet_source}: neighbourhood {m.name!r}: no vector for view "
                        f"{missing[0]!r} of corner ({cx}, {cy})")
                feats.append(np.stack([resnet[m.name][k] for k in views]))
            if text is not None:
                words.append([w for k in views for w in text.get(m.name, {}).get(k, ())])
    return Corners(np.asarray(keys), np.concatenate(labels),
                   np.stack(feats) if resnet is not None else None,
                   words if text is not None else None)


def random_split(n: int, seed: int, valid_fraction: float = 0.3) -> np.ndarray:
    """(n,) bool, True for a validation corner: a uniform draw per corner above
    1 - `valid_fraction` (the released `random.random() > 0.7`), seeded here."""
    return np.random.default_rng(seed).random(n) > 1.0 - valid_fraction


def vocabulary(text: Mapping[str, Mapping[str, list[str]]]) -> list[str]:
    """Every string in the text files (all views of all neighbourhoods), sorted; id = index + 1."""
    return sorted({w for views in text.values() for ws in views.values() for w in ws})


def token_ids(words: Sequence[Sequence[str]], vocab: Sequence[str]) -> np.ndarray:
    """(N, L) int32 ids (index in `vocab` + 1; 0 pads to the longest corner, L >= 1)."""
    index = {w: i + 1 for i, w in enumerate(vocab)}
    out = np.zeros((len(words), max([1] + [len(w) for w in words])), np.int32)
    for i, ws in enumerate(words):
        out[i, :len(ws)] = [index[w] for w in ws]
    return out


def pca(x: np.ndarray, n_components: int, where: str = "features") -> np.ndarray:
    """Projection of the rows of x (M, D) on their first `n_components` principal axes (centred,
    not whitened; each axis signed so that its largest-magnitude score is positive)."""
    x = np.asarray(x, np.float64)
    if not 0 < n_components <= min(x.shape):
        raise ValueError(f"PCA of {where}: n_components must be in 1..{min(x.shape)} (rows, "
                         f"dimensions), got {n_components}")
    xc = x - x.mean(0)
    u, s, _ = np.linalg.svd(xc, full_matrices=False)
    scores = u[:, :n_components] * s[:n_components]
    sign = np.sign(scores[np.abs(scores).argmax(0), np.arange(n_components)])
    return (scores * np.where(sign == 0, 1, sign)).astype(np.float32)


def pca_resnet(resnet: Mapping[str, Mapping[str, np.ndarray]], n_components: int
               ) -> dict[str, dict[str, np.ndarray]]:
    """PCA fitted on every vector of the file (all neighbourhoods, all views), as released."""
    keys = [(n, k) for n, views in resnet.items() for k in views]
    reduced = pca(np.stack([resnet[n][k] for n, k in keys]), n_components, release.RESNET_FILE)
    out = {n: {} for n in resnet}
    for (n, k), v in zip(keys, reduced):
        out[n][k] = v
    return out


def word_table(vocab: Sequence[str], vectors: Mapping[str, np.ndarray], dim: int,
               n_components: int = 0) -> tuple[np.ndarray, int]:
    """((V + 1, dim') float32 rows of `vocab`'s vectors (row 0 and words without a vector are
    zeros), number of words without one). With `n_components`, PCA fitted on the words that
    have a vector (the released code fits on every word of the text files)."""
    found = [i for i, w in enumerate(vocab) if w in vectors]
    rows = np.stack([vectors[vocab[i]] for i in found]) if found else np.zeros((0, dim), np.float32)
    if n_components:
        rows = pca(rows, n_components, "FastText vectors")
    table = np.zeros((len(vocab) + 1, rows.shape[1] if n_components else dim), np.float32)
    table[np.asarray(found, int) + 1] = rows
    return table, len(vocab) - len(found)


def read_release(features_dir: str, nmaps: Sequence[maps.NeighborhoodMap], use_resnet: bool,
                 use_text: bool, resnet_pca: int = 0):
    """(resnet {nbh: {key: (D,)}} or None, text {nbh: {key: [str]}} or None) from a release
    folder: `<features_dir>/resnetfeat.json` and `<features_dir>/<nbh>/text.json`."""
    resnet = text = None
    if use_resnet:
        resnet = release.read_resnet(os.path.join(features_dir, release.RESNET_FILE))
        if resnet_pca:
            resnet = pca_resnet(resnet, resnet_pca)
    if use_text:
        text = {m.name: release.read_text(os.path.join(features_dir, m.name, release.TEXT_FILE))
                for m in nmaps}
    return resnet, text
