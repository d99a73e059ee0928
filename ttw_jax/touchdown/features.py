"""Per-panorama visual feature tables and the crop an agent sees at its heading.

A table is [N, W, C]: for each graph node, W columns spanning 360 degrees of its panorama
(equirectangular, the image centre at the node's `yaw`, column 0 starting at yaw - 180) with C
features each (e.g. a CNN feature map pooled over image rows). Users supply their own table
(`load_pano_features`); `synthetic_pano_features` makes one from the graph itself, in which the
streets leaving a panorama and whether it is an intersection are visible, so agents can learn to
follow streets and count intersections with no images.
"""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.core.pano_graph import NodeTable, PanoGraph


def heading_column(yaw, heading, width: int):
    """Column [B] (int) of a width-W panorama that looks towards `heading` (degrees)."""
    frac = jnp.mod(jnp.asarray(heading, jnp.float32) - yaw + 180.0, 360.0) / 360.0
    return jnp.floor(frac * width).astype(jnp.int32) % width


def crop_to_heading(features: jax.Array, yaw: jax.Array, pano: jax.Array, heading: jax.Array,
                    crop: int) -> jax.Array:
    """The `crop` columns centred on each agent's heading: [B, crop, C] from table [N, W, C]."""
    width = features.shape[1]
    centre = heading_column(yaw[pano], heading, width)
    cols = jnp.mod(centre[:, None] + jnp.arange(crop) - crop // 2, width)
    return features[pano[:, None], cols].astype(jnp.float32)


def synthetic_pano_features(graph: PanoGraph, width: int = 16, dim: int = 32, noise: float = 0.5,
                            seed: int = 0) -> np.ndarray:
    """[N, width, dim] float16: per-node noise, a 'street' vector in the column of each out-edge,
    and a 'junction' vector in every column of panoramas with 3 or more out-edges."""
    rng = np.random.default_rng(seed)
    n = graph.num_nodes
    street, junction = rng.normal(0, 1, (2, dim)).astype(np.float32)
    table = rng.normal(0, noise, (n, width, dim)).astype(np.float32)
    nb = np.asarray(graph.neighbors)
    rows, slots = np.nonzero(nb >= 0)
    cols = np.asarray(heading_column(np.asarray(graph.yaw)[rows],
                                     np.asarray(graph.headings)[rows, slots], width))
    np.add.at(table, (rows, cols), street)
    table[np.asarray(graph.degree) >= 3] += junction
    return table.astype(np.float16)


def load_pano_features(path: str, nodes: NodeTable) -> np.ndarray:
    """A user feature table aligned to `nodes`: [N, W, C].

    `path` is an `.npz` with arrays `panoids` [M] (str) and `features` [M, W, C]; every graph node
    must be present (extra panoids are ignored).
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"panorama feature file missing: {path} (an .npz with 'panoids' "
                                "[M] and 'features' [M, W, C]); leave the path empty to use "
                                "synthetic features")
    with np.load(path) as z:
        for key in ("panoids", "features"):
            if key not in z:
                raise ValueError(f"{path}: missing array '{key}'")
        ids, feats = [str(p) for p in z["panoids"]], z["features"]
    if feats.ndim != 3 or feats.shape[0] != len(ids):
        raise ValueError(f"{path}: 'features' has shape {feats.shape}, expected "
                         f"[{len(ids)}, W, C] to match 'panoids'")
    row = {p: i for i, p in enumerate(ids)}
    missing = [p for p in nodes.ids if p not in row]
    if missing:
        raise ValueError(f"{path}: {len(missing)} graph panoramas have no features, e.g. "
                         f"{missing[:3]}")
    return feats[[row[p] for p in nodes.ids]]
