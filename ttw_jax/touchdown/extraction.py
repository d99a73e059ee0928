"""Touchdown panoramas (`<panoid>.jpg`, equirectangular) to the paper's features, on device.

Each panorama is sliced into eight perspective images of 800 x 460 (`projection.slice_panoramas`),
normalised as torchvision's ImageNet models expect, passed through a ResNet-18 up to `layer2`
(`resnet.ResNet18`: 128 x 100 x 58 per slice) and the slices concatenated left to right into the
official layout: `<out_dir>/<panoid>.npy`, float16 [100, 464, 128] (rows, columns, channels;
column 0 at heading yaw - 22.5, the official column convention), the files `load_pano_features`
(via `convert_features`) and the SDR builder read. Optionally also an RGB band per panorama for
the RGB navigation agent (Table 7): `<rgb_dir>/<panoid>.npy`, uint8 [84, 504, 3]
(`projection.equirect_band`, column 0 at heading yaw - 180).

`extract_folder` is resumable (a panorama whose outputs exist is skipped; files are written
atomically), batches panoramas of equal size, and reads every image before it gives up: the
unreadable ones are named together in one `UnreadableImages` error after all the others are done.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.core.progress import progress as progress_report
from ttw_jax.touchdown import projection, resnet

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


class UnreadableImages(ValueError):
    """Panorama images that could not be decoded; `paths` lists them, `reasons` says why."""

    def __init__(self, failures: Sequence[tuple[str, str]], done: int):
        self.paths = [p for p, _ in failures]
        self.reasons = dict(failures)
        lines = "\n".join(f"  {p}: {why}" for p, why in failures[:20])
        more = f"\n  ... and {len(failures) - 20} more" if len(failures) > 20 else ""
        super().__init__(f"{len(failures)} panorama image(s) could not be read ({done} others "
                         f"were written; rerun after replacing these):\n{lines}{more}")


def read_panorama(path: str) -> np.ndarray:
    """uint8 RGB [H, W, 3] of an image file; ValueError naming `path` if it cannot be decoded
    or is not a 2:1 equirectangular panorama."""
    from PIL import Image
    try:
        with Image.open(path) as im:
            image = np.asarray(im.convert("RGB"))
    except Exception as e:  # PIL raises many types for damaged files
        raise ValueError(f"{path}: not a readable image ({type(e).__name__}: {e})") from None
    h, w, _ = image.shape
    if w != 2 * h:
        raise ValueError(f"{path}: {w} x {h} pixels, not an equirectangular panorama "
                         "(width = 2 x height)")
    return image


@dataclasses.dataclass(frozen=True)
class Extractor:
    """Jitted panorama -> (features, band) functions. `variables`: ResNet-18 weights
    (`resnet.read_torchvision`); `slice_size` (h, w) of the eight slices (the paper's 800 x 460;
    smaller in tests); `dtype` of the convolutions (float32, or bfloat16 on accelerators);
    `out_dtype` of the features (the release's float16)."""
    variables: Any
    slice_size: tuple[int, int] = projection.SLICE_SIZE
    num_slices: int = projection.SLICES
    dtype: Any = jnp.float32
    out_dtype: Any = jnp.float16

    def __post_init__(self):
        model = resnet.ResNet18("layer2", self.dtype)

        def features(panoramas):
            slices = projection.slice_panoramas(panoramas, self.num_slices, self.slice_size)
            b, s = slices.shape[:2]
            x = resnet.imagenet_normalize(slices.reshape(b * s, *slices.shape[2:]))
            maps = model.apply(self.variables, x)                  # [B * S, h', w', 128]
            maps = maps.reshape(b, s, *maps.shape[1:])
            maps = jnp.moveaxis(maps, 1, 2)                        # [B, h', S, w', 128]
            return maps.reshape(b, maps.shape[1], -1, maps.shape[-1]).astype(self.out_dtype)

        object.__setattr__(self, "features", jax.jit(features))
        object.__setattr__(self, "band", jax.jit(projection.equirect_band))


def _save(path: str, array: np.ndarray) -> None:
    tmp = path + ".tmp.npy"
    np.save(tmp, array)
    os.replace(tmp, path)


def panorama_files(pano_dir: str) -> dict[str, str]:
    """{panoid: path} of the images in `pano_dir` (`<panoid>.jpg`, `.jpeg` or `.png`)."""
    if not os.path.isdir(pano_dir):
        raise FileNotFoundError(f"panorama folder missing: {pano_dir} (one equirectangular "
                                "`<panoid>.jpg` per panorama)")
    files = {}
    for name in sorted(os.listdir(pano_dir)):
        stem, suffix = os.path.splitext(name)
        if suffix.lower() in IMAGE_SUFFIXES:
            files.setdefault(stem, os.path.join(pano_dir, name))
    if not files:
        raise FileNotFoundError(f"{pano_dir}: no panorama images (`<panoid>.jpg`)")
    return files


def extract_folder(extractor: Extractor, pano_dir: str, out_dir: str, rgb_dir: str = "",
                   batch_size: int = 8, progress: bool = True,
                   on_batch: Callable[[int], None] | None = None) -> dict:
    """Writes the features (and bands, with `rgb_dir`) of every panorama in `pano_dir` not yet
    done; returns {"done", "skipped", "panoramas"}. Raises `UnreadableImages` at the end if any
    image could not be read (all others are written first)."""
    files = panorama_files(pano_dir)
    os.makedirs(out_dir, exist_ok=True)
    if rgb_dir:
        os.makedirs(rgb_dir, exist_ok=True)

    def outputs(panoid):
        out = [os.path.join(out_dir, f"{panoid}.npy")]
        return out + ([os.path.join(rgb_dir, f"{panoid}.npy")] if rgb_dir else [])

    todo = [p for p in files if not all(os.path.isfile(o) for o in outputs(p))]
    failures: list[tuple[str, str]] = []
    done = 0
    bar = None
    if progress:
        bar = progress_report(total=len(todo), desc="panoramas", unit="pano")

    def flush(ids, images):
        nonlocal done
        if not ids:
            return
        batch = np.stack(images + [images[-1]] * (batch_size - len(images)))   # fixed shapes
        feats = np.asarray(extractor.features(batch))
        bands = np.asarray(extractor.band(batch)) if rgb_dir else None
        for i, panoid in enumerate(ids):
            out = outputs(panoid)
            _save(out[0], feats[i])
            if rgb_dir:
                _save(out[1], bands[i])
        done += len(ids)
        if bar is not None:
            bar.update(len(ids))
        if on_batch is not None:
            on_batch(done)

    ids, images = [], []
    for panoid in todo:
        try:
            image = read_panorama(files[panoid])
        except ValueError as e:
            failures.append((files[panoid], str(e).split(": ", 1)[-1]))
            if bar is not None:
                bar.update(1)
            continue
        if images and image.shape != images[0].shape:     # batch panoramas of equal size
            flush(ids, images)
            ids, images = [], []
        ids.append(panoid)
        images.append(image)
        if len(ids) == batch_size:
            flush(ids, images)
            ids, images = [], []
    flush(ids, images)
    if bar is not None:
        bar.close()
    if failures:
        raise UnreadableImages(failures, done)
    return {"done": done, "skipped": len(files) - len(todo), "panoramas": len(files)}
