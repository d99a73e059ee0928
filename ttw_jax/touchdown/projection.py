"""Perspective images of equirectangular panoramas, on device.

An equirectangular panorama [H, W, C] spans 360 degrees of heading over its columns and `vfov`
degrees of pitch over its rows (180 for a whole Street View panorama), centred on the horizon:
pixel centre (row r, column c) looks at heading `yaw - 180 + (c + 0.5) * 360 / W` (the image
centre is the panorama's `yaw`, `nodes.txt`) and pitch `vfov / 2 - (r + 0.5) * vfov / H`.

A pinhole camera at pitch 0 with horizontal field of view `hfov` and an h x w image has focal
length f = (w / 2) / tan(hfov / 2) pixels; pixel (u, v) looks along (x, y, f) with
x = u + 0.5 - w / 2 to the right and y = v + 0.5 - h / 2 down, i.e. at heading offset
atan2(x, f) and pitch atan2(-y, sqrt(x^2 + f^2)). `sample_equirect` reads those directions with
bilinear interpolation (columns wrap around, rows clamp at the top and bottom).

Touchdown's features slice each panorama into eight such images of 800 x 460 (Chen et al. 2019,
section 6); the angles are not released, so they are derived from the sizes and the official
navigator (`slice_panoramas`): eight slices share 360 degrees, so hfov = 45 (f = 555.3 px) and
the vertical field of view is 2 atan(400 / 555.3) = 71.5 degrees at pitch 0; slice k is centred
at heading `yaw + 45 k`, so the concatenated map's column 0 looks at `yaw - 22.5`, which is the
column convention of the official features (`navigator.py` rolls by 157.5 + yaw - heading =
180 - 22.5 + yaw - heading, `ttw_jax.touchdown.features`).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def perspective_directions(height: int, width: int, hfov: float) -> tuple[np.ndarray, np.ndarray]:
    """(heading offset, pitch), each [height, width] in degrees, of a pitch-0 pinhole image's
    pixel centres (module docstring)."""
    f = (width / 2) / np.tan(np.radians(hfov) / 2)
    x = np.arange(width) + 0.5 - width / 2
    y = np.arange(height) + 0.5 - height / 2
    x, y = np.broadcast_to(x[None, :], (height, width)), np.broadcast_to(y[:, None], (height, width))
    return np.degrees(np.arctan2(x, f)), np.degrees(np.arctan2(-y, np.hypot(x, f)))


def sample_equirect(images: jax.Array, heading: jax.Array, pitch: jax.Array,
                    vfov: float = 180.0, index: jax.Array | None = None) -> jax.Array:
    """Bilinear samples [B, ..., C] (float32) of equirectangular images [N, H, W, C] at
    `heading` and `pitch` [B, ...] (degrees; heading relative to each image's centre column):
    sample b reads image `index[b]` [B] (image b when `index` is None, N = B)."""
    _, h, w, _ = images.shape
    col = (heading / 360.0 + 0.5) * w - 0.5
    row = (0.5 - pitch / vfov) * h - 0.5
    c0, r0 = jnp.floor(col), jnp.floor(row)
    fc, fr = (col - c0)[..., None], (row - r0)[..., None]
    c0, r0 = c0.astype(jnp.int32), r0.astype(jnp.int32)
    cols = jnp.mod(c0, w), jnp.mod(c0 + 1, w)
    rows = jnp.clip(r0, 0, h - 1), jnp.clip(r0 + 1, 0, h - 1)
    b = jnp.arange(heading.shape[0]) if index is None else index
    b = b.reshape((-1,) + (1,) * (heading.ndim - 1))

    def read(r, c):
        return images[b, r, c].astype(jnp.float32)

    top = read(rows[0], cols[0]) * (1 - fc) + read(rows[0], cols[1]) * fc
    bottom = read(rows[1], cols[0]) * (1 - fc) + read(rows[1], cols[1]) * fc
    return top * (1 - fr) + bottom * fr


SLICES = 8                    # the paper's eight perspective images per panorama
SLICE_SIZE = (800, 460)       # their height x width in pixels (section 6)


def slice_panoramas(panoramas: jax.Array, num_slices: int = SLICES,
                    size: tuple[int, int] = SLICE_SIZE) -> jax.Array:
    """[B, num_slices, h, w, C] float32 perspective slices of whole equirectangular panoramas
    [B, H, W, C]: hfov 360 / num_slices each, slice k centred at heading yaw + k * hfov."""
    hfov = 360.0 / num_slices
    offset, pitch = perspective_directions(*size, hfov)
    heading = np.arange(num_slices)[:, None, None] * hfov + offset[None]      # [S, h, w]
    b = panoramas.shape[0]
    heading = jnp.broadcast_to(jnp.asarray(heading, jnp.float32), (b, *heading.shape))
    pitch = jnp.broadcast_to(jnp.asarray(pitch, jnp.float32), heading.shape)
    return sample_equirect(panoramas, heading, pitch)


RGB_FOV = 60.0          # Table 7: a 60-degree perspective image of 84 x 84 at the heading
RGB_SIZE = 84
BAND_WIDTH = 504        # 1.4 px / degree, above the 84 x 84 view's 1.27 at its centre


def equirect_band(panoramas: jax.Array, width: int = BAND_WIDTH, height: int = RGB_SIZE
                  ) -> jax.Array:
    """uint8 [B, height, width, C]: whole panoramas [B, H, W, C] resized (antialiased) to
    width x width / 2 and cropped to the `height` rows around the horizon, so the band spans
    height * 360 / width degrees of pitch (60 at the defaults: the 60-degree RGB views fit)."""
    b, _, _, c = panoramas.shape
    small = jax.image.resize(panoramas.astype(jnp.float32), (b, width // 2, width, c), "linear",
                             antialias=True)
    top = (width // 2 - height) // 2
    band = small[:, top:top + height]
    return jnp.clip(jnp.round(band), 0, 255).astype(jnp.uint8)


def band_vfov(band_shape: tuple) -> float:
    """Degrees of pitch spanned by the rows of a band [..., H, W, C] with square pixels."""
    return band_shape[-3] * 360.0 / band_shape[-2]


def perspective_at_heading(bands: jax.Array, yaw: jax.Array, pano: jax.Array,
                           heading: jax.Array, size: int = RGB_SIZE, fov: float = RGB_FOV
                           ) -> jax.Array:
    """[B, size, size, C] float32 in [0, 1]: the pitch-0 perspective view of field of view `fov`
    centred on each agent's `heading` [B] (degrees), read from the bands [N, Hb, Wb, C] (uint8,
    column 0 at heading yaw - 180: `equirect_band`) of panoramas `pano` [B] with `yaw` [N]."""
    offset, pitch = perspective_directions(size, size, fov)
    rel = jnp.asarray(heading, jnp.float32) - yaw[pano]
    rel = rel[:, None, None] + jnp.asarray(offset, jnp.float32)
    pitch = jnp.broadcast_to(jnp.asarray(pitch, jnp.float32), rel.shape)
    return sample_equirect(bands, rel, pitch, band_vfov(bands.shape), index=pano) / 255.0
