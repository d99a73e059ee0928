"""Per-panorama visual feature tables and the crop an agent sees at its heading.

A table is [N, W, C]: for each graph node, W columns spanning 360 degrees of its panorama with C
features each (e.g. a CNN feature map pooled over image rows), or [N, H, W, C], whole feature
maps ("images", e.g. the official maps averaged over their channels, for the official 2-D CNN of
`ttw_jax.touchdown.agents`). Where a heading falls in a table is its column convention
(`CONVENTIONS`):
- "centred": column 0 starts at yaw - 180 degrees (the image centre at the node's `yaw`); the
  synthetic tables use it.
- "official": the official Touchdown features (lil-lab `navigator.py`): the navigator rolls a
  panorama's feature map by `shift = int(W * (157.5 + pano_yaw - heading) / 360)` columns
  (`np.roll`, Python's truncating `int`) and the agent's heading is then the middle column W // 2,
  so heading h is column (W // 2 - shift) mod W of the file as released (about yaw - 22.5 + h
  degrees from column 0): official files loaded as "centred" would be rotated by 157.5 degrees.
Users supply their own table (`load_pano_features`; `official_navigation_table` converts the
official per-panorama `.npy` files); `synthetic_pano_features` makes one from the graph itself, in
which the streets leaving a panorama and whether it is an intersection are visible, so agents can
learn to follow streets and count intersections with no images.
"""
from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.core import paths
from ttw_jax.core.pano_graph import NodeTable, PanoGraph
from ttw_jax.core.records import damaged
from ttw_jax.touchdown import projection


CONVENTIONS = ("centred", "official")
OFFICIAL_SHIFT_DEGREES = 157.5     # `shift_angle = 157.5 + pano_yaw - heading` (navigator.py)


def check_convention(convention: str) -> None:
    if convention not in CONVENTIONS:
        raise ValueError(f"feature column convention must be one of {CONVENTIONS}, got "
                         f"{convention!r}")


def heading_column(yaw, heading, width: int, convention: str = "centred"):
    """Column [B] (int) of a width-W panorama of yaw [B] that looks towards `heading` [B]
    (degrees), under the table's column `convention` (module docstring)."""
    check_convention(convention)
    heading = jnp.asarray(heading, jnp.float32)
    if convention == "official":
        shift = jnp.trunc(width * (OFFICIAL_SHIFT_DEGREES + yaw - heading) / 360.0)
        return jnp.mod(width // 2 - shift.astype(jnp.int32), width)
    frac = jnp.mod(heading - yaw + 180.0, 360.0) / 360.0
    return jnp.floor(frac * width).astype(jnp.int32) % width


def crop_to_heading(features: jax.Array, yaw: jax.Array, pano: jax.Array, heading: jax.Array,
                    crop: int, convention: str = "centred") -> jax.Array:
    """The `crop` columns centred on each agent's heading (column `heading_column`, then
    `crop // 2` on its left): [B, crop, C] from a table [N, W, C], or [B, H, crop, C] (every
    row) from images [N, H, W, C]."""
    width = features.shape[-2]
    centre = heading_column(yaw[pano], heading, width, convention)
    cols = jnp.mod(centre[:, None] + jnp.arange(crop) - crop // 2, width)      # [B, crop]
    if features.ndim == 4:
        rows = jnp.arange(features.shape[1])
        return features[pano[:, None, None], rows[None, :, None],
                        cols[:, None, :]].astype(jnp.float32)
    return features[pano[:, None], cols].astype(jnp.float32)


def agent_view(features: jax.Array, yaw: jax.Array, pano: jax.Array, heading: jax.Array,
               crop: int, convention: str = "centred", encoder: str = "table") -> jax.Array:
    """What an agent with `encoder` (`ttw_jax.touchdown.agents.IMAGE_ENCODERS`) sees: for "rgb"
    the 60-degree perspective image of `crop` x `crop` pixels at its heading, [B, crop, crop, 3]
    in [0, 1], rendered from RGB bands [N, Hb, Wb, 3] (`projection.perspective_at_heading`);
    otherwise `crop_to_heading`."""
    if encoder == "rgb":
        if convention != "centred":
            raise ValueError("RGB bands are in the 'centred' column convention (column 0 at "
                             f"yaw - 180), got {convention!r}")
        return projection.perspective_at_heading(features, yaw, pano, heading, crop)
    return crop_to_heading(features, yaw, pano, heading, crop, convention)


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


def synthetic_pano_images(graph: PanoGraph, height: int = 20, width: int = 64, dim: int = 1,
                          noise: float = 0.5, seed: int = 0) -> np.ndarray:
    """[N, height, width, dim] float16 "images" drawn like `synthetic_pano_features`: noise, a
    'street' vector in the lower half of the columns around each out-edge's heading (a band
    width // 32 columns wide, at least 1) and a 'junction' vector in the upper half of every
    column of panoramas with 3 or more out-edges. Street and junction are +-1 per channel, so
    they stand out also with one channel (as the official maps averaged over channels)."""
    rng = np.random.default_rng(seed)
    n = graph.num_nodes
    street, junction = np.where(rng.random((2, dim)) < 0.5, -1.0, 1.0).astype(np.float32)
    images = rng.normal(0, noise, (n, height, width, dim)).astype(np.float32)
    nb = np.asarray(graph.neighbors)
    rows, slots = np.nonzero(nb >= 0)
    cols = np.asarray(heading_column(np.asarray(graph.yaw)[rows],
                                     np.asarray(graph.headings)[rows, slots], width))
    band = max(1, width // 32)
    for offset in range(band):
        c = (cols + offset - band // 2) % width
        images[rows, height // 2:, c] += street
    images[np.asarray(graph.degree) >= 3, :height // 2] += junction
    return images.astype(np.float16)


def synthetic_pano_bands(graph: PanoGraph, height: int = projection.RGB_SIZE,
                         width: int = projection.BAND_WIDTH, noise: float = 0.5, seed: int = 0
                         ) -> np.ndarray:
    """[N, height, width, 3] uint8 RGB bands drawn as `synthetic_pano_images` (streets in the
    lower half of their heading's columns, junctions in the upper half), for `encoder="rgb"`."""
    images = synthetic_pano_images(graph, height, width, 3, noise, seed).astype(np.float32)
    return np.clip(np.round(128 + 60 * images), 0, 255).astype(np.uint8)


def load_pano_features(path: str, nodes: NodeTable) -> tuple[np.ndarray, str]:
    """(table [N, W, C] or images [N, H, W, C] aligned to `nodes`, its column convention) from a
    user feature file.

    `path` is an `.npz` with arrays `panoids` [M] (str) and `features` [M, W, C] or
    [M, H, W, C], and optionally
    `convention` (a string of CONVENTIONS; "centred" when absent; `official_navigation_table`
    writes "official"); every graph node must be present (extra panoids are ignored).
    """
    if not paths.exists(path):
        raise FileNotFoundError(f"panorama feature file missing: {path} (an .npz with 'panoids' "
                                "[M] and 'features' [M, W, C]); leave the path empty to use "
                                "synthetic features")
    with damaged(path, ValueError), paths.load_numpy(path) as z:
        arrays = {k: z[k] for k in ("panoids", "features", "convention") if k in z}
    for key in ("panoids", "features"):
        if key not in arrays:
            raise ValueError(f"{path}: missing array '{key}'")
    ids, feats = [str(p) for p in arrays["panoids"]], arrays["features"]
    convention = str(arrays.get("convention", "centred"))
    check_convention(convention)
    if feats.dtype.kind not in "fiu" or not np.isfinite(feats).all():
        raise ValueError(f"{path}: 'features' must be finite numbers (got dtype {feats.dtype}"
                         f"{'' if feats.dtype.kind not in 'fiu' else ' with NaN or inf'})")
    if feats.ndim not in (3, 4) or feats.shape[0] != len(ids):
        raise ValueError(f"{path}: 'features' has shape {feats.shape}, expected "
                         f"[{len(ids)}, W, C] or [{len(ids)}, H, W, C] to match 'panoids'")
    row = {p: i for i, p in enumerate(ids)}
    missing = [p for p in nodes.ids if p not in row]
    if missing:
        raise ValueError(f"{path}: {len(missing)} graph panoramas have no features, e.g. "
                         f"{missing[:3]}")
    return feats[[row[p] for p in nodes.ids]], convention


LAYOUTS = ("rows", "images", "rgb")


def official_navigation_table(feature_dir: str, panoids, dtype=np.float16,
                              layout: str = "rows") -> np.ndarray:
    """Navigation features of the official per-panorama feature maps `<feature_dir>/<panoid>.npy`
    ([H, W, C], e.g. 100 x 464 x 128): layout "rows" gives [M, W, C], each map's mean over its
    image rows; "images" gives [M, H, W, 1], its mean over channels (the single-channel maps the
    published GA / RConcat reimplementations crop and convolve; 2.7 GB in float16 for the
    29,641 panoramas); "rgb" gives [M, H, W, 3] uint8, the RGB bands of
    `experiments.touchdown_sdr.extract_features --rgb_dir` as written (column 0 at yaw - 180: the
    "centred" convention; 3.8 GB for the 29,641 panoramas). Columns as released (feature maps:
    the official column convention: no roll here, the crop applies the official formula).
    FileNotFoundError names the first missing panoramas."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    panoids = [str(p) for p in panoids]
    files = [paths.join(feature_dir, f"{p}.npy") for p in panoids]
    missing = [p for p in files if not paths.isfile(p)]
    if missing:
        raise FileNotFoundError(f"{len(missing)} of {len(files)} official feature files missing "
                                f"in {feature_dir}, e.g. {missing[:3]} (one `<panoid>.npy` "
                                "[H, W, C] per panorama, see BUILD.md)")
    out, first = None, None
    for i, path in enumerate(files):
        with damaged(path, ValueError):
            x = paths.load_numpy(path)
        if x.dtype.kind not in "fiu" or not np.isfinite(x).all():
            raise ValueError(f"{path}: the feature map must be finite numbers ({x.dtype})")
        if x.ndim != 3 or (first is not None and x.shape != first):
            raise ValueError(f"{path}: shape {x.shape}, expected [H, W, C] like "
                             f"{first or 'the others'}")
        if layout == "rgb" and (x.dtype != np.uint8 or x.shape[-1] != 3):
            raise ValueError(f"{path}: {x.dtype} {x.shape}, expected an RGB band uint8 "
                             "[H, W, 3] (extract_features --rgb_dir)")
        shape = x.shape
        if layout != "rgb":
            x = x.astype(np.float32)
            x = x.mean(0) if layout == "rows" else x.mean(-1, keepdims=True)
        if out is None:   # one allocation: the images of all panoramas are gigabytes
            first = shape
            out = np.empty((len(files),) + x.shape, np.uint8 if layout == "rgb" else dtype)
        out[i] = x
    return out


def write_navigation_table(path: str, panoids, table: np.ndarray, convention: str) -> None:
    """Writes a table for `load_pano_features` (`panoids` [M], `features` [M, W, C] or
    [M, H, W, C], `convention`)."""
    check_convention(convention)
    np.savez(path, panoids=np.asarray([str(p) for p in panoids]), features=table,
             convention=np.asarray(convention))
