"""The 36 standard views of a Matterport panorama and the per-viewpoint view-feature tables.

Views are 12 headings (0, 30, ..., 330 degrees, clockwise from +y like the graph's edge headings)
times 3 elevations (-30, 0, +30 degrees); view index = elevation_index * 12 + heading_index.

A view-feature table is [N, 36, D] float32 (row = graph node, views in absolute orientation):
- user features: the files VLN codebases ship (the Matterport3DSimulator TSV, per-viewpoint
  HDF5, or an `.npz` of `ids` and `features` [V, 36, D]), read by
  `ttw_jax.rxr.view_features.feature_table`;
- synthetic features (`synthetic_view_features`): each view shows the landmark of the neighbour
  that lies in it (an embedding of its id, `ttw_jax.rxr.synthetic.node_landmarks`) plus noise;
- none (D = 0): the agent sees only the angle encodings (`angle_features`) of views and
  navigable directions, a language + structure agent.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.core.pano_graph import PanoGraph

NUM_HEADINGS, NUM_ELEVATIONS = 12, 3
NUM_VIEWS = NUM_HEADINGS * NUM_ELEVATIONS
VIEW_HEADINGS = np.tile(np.arange(NUM_HEADINGS) * (2 * math.pi / NUM_HEADINGS), NUM_ELEVATIONS
                        ).astype(np.float32)                                       # [36]
VIEW_ELEVATIONS = np.repeat(np.radians([-30.0, 0.0, 30.0]), NUM_HEADINGS).astype(np.float32)
ANGLE_DIM = 4
STRUCTURE_DIM = 2   # per navigable direction: edge length, neighbour degree (`observe`)


def nearest_view(heading, elevation):
    """Index (int32, broadcast shape) of the standard view nearest an absolute direction."""
    xp = jnp if isinstance(heading, jnp.ndarray) or isinstance(elevation, jnp.ndarray) else np
    step = 2 * math.pi / NUM_HEADINGS
    h = xp.mod(xp.round(xp.asarray(heading) / step), NUM_HEADINGS)
    e = xp.clip(xp.round(xp.asarray(elevation) / math.radians(30.0)) + 1, 0, NUM_ELEVATIONS - 1)
    return (e * NUM_HEADINGS + h).astype(xp.int32)


VIEW_FOV = math.radians(60.0)   # the standard views' horizontal and vertical field of view
MASK_SHAPE = (128, 256)         # equirectangular masks (the release's `image_mask`)


def pixel_directions(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(heading, elevation) [height, width] of the pixel centres of an equirectangular image
    with heading 0 at the image centre (clockwise to the right) and elevation +90 at the top
    (the layout of the release's `image_mask`)."""
    heading = np.mod((np.arange(width) + 0.5) / width * 2 * math.pi - math.pi, 2 * math.pi)
    elevation = math.pi / 2 - (np.arange(height) + 0.5) / height * math.pi
    return np.broadcast_to(heading[None], (height, width)), np.broadcast_to(
        elevation[:, None], (height, width))


def direction_vectors(heading, elevation) -> np.ndarray:
    """[..., 3] unit vectors (Matterport axes, z up) of headings clockwise from +y."""
    heading, elevation = np.asarray(heading, np.float64), np.asarray(elevation, np.float64)
    return np.stack([np.sin(heading) * np.cos(elevation), np.cos(heading) * np.cos(elevation),
                     np.sin(elevation)], -1)


def in_view(directions: np.ndarray, heading: float, elevation: float,
            fov: float = VIEW_FOV) -> np.ndarray:
    """[...] bool: the (Matterport) `directions` [..., 3] inside the square perspective view of
    field of view `fov` looking at (heading, elevation)."""
    forward = direction_vectors(heading, elevation)
    right = np.array([math.cos(heading), -math.sin(heading), 0.0])
    up = np.cross(right, forward)
    z = directions @ forward
    limit = math.tan(fov / 2) * np.maximum(z, 0)
    return (z > 0) & (np.abs(directions @ right) <= limit) & (np.abs(directions @ up) <= limit)


@functools.lru_cache(maxsize=4)
def view_regions(height: int = MASK_SHAPE[0], width: int = MASK_SHAPE[1]) -> np.ndarray:
    """[36, height, width] bool (read-only, computed once per size): the equirectangular pixels
    each standard view's 60-degree perspective image covers (they overlap)."""
    d = direction_vectors(*pixel_directions(height, width))
    regions = np.stack([in_view(d, h, e) for h, e in zip(VIEW_HEADINGS, VIEW_ELEVATIONS)])
    regions.flags.writeable = False
    return regions


def observed_pixels(extrinsic: np.ndarray, intrinsic: np.ndarray, world_up: str,
                    height: int = MASK_SHAPE[0], width: int = MASK_SHAPE[1]) -> np.ndarray:
    """[T, height, width] bool: the equirectangular pixels each snapshot's camera saw.

    extrinsic [T, 4, 4]: camera-to-world (the camera looks along its local -z, +y up);
    intrinsic [T, 4, 4]: its OpenGL projection matrix; both row-major as the release stores
    them. world_up "y" (the release's three.js frame: Matterport (x, y, z) = (X, -Z, Y)) or
    "z". A direction is seen when it projects inside the image (|x|, |y| <= 1 in normalised
    device coordinates, in front of the camera); depth is not tested (no occlusion)."""
    d = direction_vectors(*pixel_directions(height, width)).reshape(-1, 3)      # [P, 3]
    if world_up == "y":
        d = np.stack([d[:, 0], d[:, 2], -d[:, 1]], -1)
    elif world_up != "z":
        raise ValueError(f"world_up must be 'y' or 'z', got {world_up!r}")
    extrinsic, intrinsic = np.asarray(extrinsic, np.float64), np.asarray(intrinsic, np.float64)
    seen = np.zeros((len(extrinsic), height * width), bool)
    for lo in range(0, len(extrinsic), 16):          # 16 snapshots at a time: bounded memory
        rot = extrinsic[lo:lo + 16, :3, :3]                                     # [t, 3, 3]
        cam = np.einsum("tji,pj->tpi", rot, d)                                  # R^T d
        proj = intrinsic[lo:lo + 16]
        clip = np.einsum("tij,tpj->tpi", proj[:, :, :3], cam) + proj[:, None, :, 3]  # at 1 m
        w = clip[..., 3]
        safe = np.where(np.abs(w) > 1e-9, w, 1e-9)
        seen[lo:lo + 16] = (w > 0) & (np.abs(clip[..., 0] / safe) <= 1) & (
            np.abs(clip[..., 1] / safe) <= 1)
    return seen.reshape(-1, height, width)


def view_weights(observed: np.ndarray, regions: np.ndarray) -> np.ndarray:
    """[..., 36] float: the share of each view's region [36, height, width] among the observed
    pixels [..., height, width] (mean-pooling, as the release's `feature_weights`)."""
    flat = observed.reshape(*observed.shape[:-2], -1).astype(np.int32)
    cover = regions.reshape(len(regions), -1).astype(np.int32)
    # integer products: no BLAS threads (they thrash when other processes hold the cores)
    return (flat @ cover.T) / cover.sum(1)


def pooled_view_mask(observed: np.ndarray, regions: np.ndarray) -> np.ndarray:
    """[..., 36] bool: max-pooling of observed pixels [..., height, width] over each view's
    region [36, height, width] (a view is observed when any pixel it covers was)."""
    return view_weights(observed, regions) > 0


def angle_features(heading, elevation):
    """[..., 4] = (sin, cos) of a relative heading and of an elevation (jnp)."""
    heading, elevation = jnp.broadcast_arrays(jnp.asarray(heading, jnp.float32),
                                              jnp.asarray(elevation, jnp.float32))
    return jnp.stack([jnp.sin(heading), jnp.cos(heading), jnp.sin(elevation),
                      jnp.cos(elevation)], -1)


TABLE_DTYPES = ("float32", "bfloat16")


def device_table(table: np.ndarray, dtype: str = "float32") -> np.ndarray:
    """A view-feature table [N, 36, D] as the simulator keeps it on the devices: float32, or
    ("bfloat16") the bfloat16 bit patterns as uint16, half the memory. Bits, not bfloat16: XLA:CPU
    computes a bfloat16 gather in float32 and so converts the whole table to float32 before a
    scan (measured: 1.2 s against 0.12 s a rollout of a 7,644-viewpoint, 2,048-d table); an
    integer gather is native on every backend. `gather_views` decodes the gathered rows."""
    if dtype == "float32":
        return np.asarray(table, np.float32)
    if dtype == "bfloat16":
        import ml_dtypes
        return np.asarray(table).astype(ml_dtypes.bfloat16).view(np.uint16)
    raise ValueError(f"view-feature table dtype must be one of {TABLE_DTYPES}, got {dtype!r}")


def gather_views(table: jax.Array, node) -> jax.Array:
    """The float32 rows `table[node]` of a `device_table` (float32, or uint16 bfloat16 bits)."""
    rows = table[node]
    if rows.dtype == jnp.uint16:   # bfloat16 bits: the top half of a float32
        return jax.lax.bitcast_convert_type(rows.astype(jnp.uint32) << 16, jnp.float32)
    return rows.astype(jnp.float32)


def empty_view_features(num_nodes: int) -> np.ndarray:
    """The [N, 36, 0] table of an agent that sees only angles."""
    return np.zeros((num_nodes, NUM_VIEWS, 0), np.float32)


def synthetic_view_features(graph: PanoGraph, landmarks: np.ndarray, num_landmarks: int,
                            dim: int, noise: float, seed: int = 0) -> np.ndarray:
    """[N, 36, dim] float32: view v of node n holds the sum of the unit landmark embeddings of
    n's neighbours whose edge direction is nearest to v, plus N(0, noise^2) noise.

    landmarks: [N] int landmark id per node (< num_landmarks). The embeddings are random unit
    vectors drawn from `seed`, shared by all nodes.
    """
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(num_landmarks, dim))
    emb /= np.linalg.norm(emb, axis=-1, keepdims=True)
    nb = np.asarray(graph.neighbors)
    view = nearest_view(np.asarray(graph.headings, np.float64),
                        np.asarray(graph.elevations, np.float64))
    n = nb.shape[0]
    out = rng.normal(scale=noise, size=(n, NUM_VIEWS, dim)).astype(np.float32)
    rows, slots = np.nonzero(nb >= 0)
    np.add.at(out, (rows, view[rows, slots]), emb[np.asarray(landmarks)[nb[rows, slots]]])
    return out
