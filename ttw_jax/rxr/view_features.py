"""Per-viewpoint view features of Matterport3D, read from the files VLN codebases ship.

Formats (`--config.data.features=<file>`; the suffix picks the reader):
- `.tsv`: the Matterport3DSimulator's (`scripts/precompute_img_features.py`, e.g.
  `img_features/ResNet-152-imagenet.tsv` or `ResNet-152-places365.tsv`): one row per included
  viewpoint, no header, tab-separated `scanId, viewpointId, image_w, image_h, vfov, features`,
  `features` the base64 of float32 [36, D] (little-endian, row-major) in the simulator's
  discretised view order: views 0-11 at elevation -30 degrees, 12-23 at 0, 24-35 at +30, with
  headings 0, 30, ..., 330 within each, the order of `ttw_jax.rxr.views`. Rows end in `\\r\\n`
  (csv's default) or `\\n`; one row is about 400 KB of text at D = 2048, beyond Python's
  default csv field limit.
- `.h5` / `.hdf5`: one dataset per `"<scan>_<viewpoint>"`, shape [36, D] (the CLIP / ViT
  feature files of the later VLN codebases).
- `.npz`: `ids` [V] (`"scan/viewpoint"` or `"scan_viewpoint"`) and `features` [V, 36, D].

TSV and HDF5 files are converted once (`convert`, with a progress bar) into a cache folder
`<cache_dir>/<file name>-<hash of its path>/`: `features.f16` (float16 [V, 36, D], read
memory-mapped), `ids.json` (`"scan/viewpoint"` per row) and `meta.json` (the shape, the source's
content fingerprint, and each row's line in the TSV). A restart reads the cache and decodes no
base64. The cache is keyed by content, not by size and modification time, which another feature
file of the same shape copied over the source with `cp -p` keeps: `fingerprint` is a SHA-256 of
the file's size and bytes -- all of them up to `FINGERPRINT_WHOLE` (8 MiB), else
`FINGERPRINT_CHUNKS` (128) chunks of `FINGERPRINT_CHUNK` (64 KiB) at evenly spaced offsets, the
first at the start (a TSV's first rows or header) and the last at the end (its last rows). That
reads 8 MiB per start, where hashing a 4 GB TSV whole would read all of it on every start. A
sampled chunk of a TSV lies within one or two rows (a row of 2,048-d features is about 400 KB
of text), so a file whose rows hold other values does not match; a file of the same size
edited only between the samples would (convert such a file under a new name, or delete its cache
folder). A source whose fingerprint differs is converted again. With several JAX processes
process 0 converts and the others wait at a barrier.

`feature_table(path, nodes, cache_dir, extra_viewpoints=...)` gives the [N, 36, D] rows of a
graph's nodes. Bad input is named by file, line (TSV), dataset (HDF5) or array (npz) and field: a
wrong number of fields or views, a feature size that differs between rows, base64 that does not
decode (a truncated file), non-finite values or values beyond float16's range, a viewpoint listed
twice, a row of a loaded scan whose viewpoint is not in that scan's connectivity graph (unless
`extra_viewpoints="skip"`, `data.features_extra_viewpoints`: such rows are then skipped, and
counted in a log line per file with a few of their ids); and the graph's viewpoints without
features, counted. Rows of scans the graph does not hold are always skipped.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import zipfile
import zlib
from typing import Iterator, Sequence

import ml_dtypes
import numpy as np
from absl import logging

from ttw_jax.core import paths
from ttw_jax.core.pano_graph import NodeTable
from ttw_jax.core.progress import progress as progress_report
from ttw_jax.core.records import RecordFormatError, nonfinite_problem
from ttw_jax.rxr.views import NUM_VIEWS

TSV_FIELDS = ("scanId", "viewpointId", "image_w", "image_h", "vfov", "features")
FORMATS = {".tsv": "tsv", ".h5": "hdf5", ".hdf5": "hdf5", ".npz": "npz"}
CACHE_VERSION = 2   # 2: keyed by content (`fingerprint`), not by size and modification time
FINGERPRINT_WHOLE = 8 << 20   # files up to this size are hashed whole
FINGERPRINT_CHUNKS, FINGERPRINT_CHUNK = 128, 64 << 10
# what `feature_table` does with a row of a loaded scan whose viewpoint its graph lacks
EXTRA_VIEWPOINTS = ("refuse", "skip")
FLOAT16_MAX = float(np.finfo(np.float16).max)
HINT = ("view features: a Matterport3DSimulator TSV (img_features/ResNet-152-imagenet.tsv: "
        "scanId, viewpointId, image_w, image_h, vfov, base64 float32 [36, D]), an HDF5 file "
        "(one [36, D] dataset per '<scan>_<viewpoint>') or an .npz ('ids' [V], 'features' "
        "[V, 36, D])")


class ViewFeatureError(RecordFormatError):
    """A view-feature file exists but does not follow its format; the message names the file,
    the line (TSV), dataset (HDF5) or array (npz), and the field."""


def file_format(path: str) -> str:
    """"tsv", "hdf5" or "npz" from the file name (ValueError naming the accepted suffixes)."""
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if suffix not in FORMATS:
        raise ValueError(f"{path}: unknown view-feature file type {suffix!r}; accepted: "
                         f"{', '.join(sorted(FORMATS))} ({HINT})")
    return FORMATS[suffix]


def encode_tsv_row(scan: str, viewpoint: str, features: np.ndarray, image_w: int = 640,
                   image_h: int = 480, vfov: int = 60) -> str:
    """One row of a Matterport3DSimulator TSV (with its `\\r\\n`) for features [36, D]."""
    blob = base64.b64encode(np.ascontiguousarray(features, "<f4").tobytes()).decode("ascii")
    return "\t".join((scan, viewpoint, str(image_w), str(image_h), str(vfov), blob)) + "\r\n"


def _check_values(feats: np.ndarray, where: str) -> None:
    finite = np.isfinite(feats)
    if not finite.all():
        raise ViewFeatureError(f"{where}: field 'features': non-finite values (view "
                               f"{int(np.argwhere(~finite)[0][0])})")
    big = float(np.abs(feats).max(initial=0.0))
    if big > FLOAT16_MAX:
        raise ViewFeatureError(f"{where}: field 'features': |value| up to {big:.4g}, beyond "
                               f"float16's range ({FLOAT16_MAX:.0f}) that the cache stores")


def _decode_tsv_line(line: bytes, where: str, dim: int | None) -> tuple[str, str, np.ndarray]:
    fields = line.rstrip(b"\r\n").split(b"\t")
    if len(fields) != len(TSV_FIELDS):
        raise ViewFeatureError(f"{where}: {len(fields)} tab-separated fields, expected "
                               f"{len(TSV_FIELDS)} ({', '.join(TSV_FIELDS)})")
    scan, viewpoint = fields[0].decode("utf-8", "replace"), fields[1].decode("utf-8", "replace")
    for name, value in zip(TSV_FIELDS[:2], (scan, viewpoint)):
        if not value:
            raise ViewFeatureError(f"{where}: field '{name}' is empty")
    for name, value in zip(TSV_FIELDS[2:5], fields[2:5]):
        try:
            float(value)
        except ValueError:
            raise ViewFeatureError(f"{where}: field '{name}' is {value[:20]!r}, not a "
                                   "number") from None
    try:
        raw = binascii.a2b_base64(fields[5], strict_mode=True)
    except binascii.Error as e:
        raise ViewFeatureError(f"{where}: field 'features': not base64 ({e}; a truncated "
                               "file?)") from None
    if len(raw) % (4 * NUM_VIEWS) or not raw:
        raise ViewFeatureError(f"{where}: field 'features': {len(raw)} bytes, not float32 "
                               f"[{NUM_VIEWS}, D] (a multiple of {4 * NUM_VIEWS}; a truncated row?)")
    feats = np.frombuffer(raw, "<f4").reshape(NUM_VIEWS, -1)
    if dim is not None and feats.shape[1] != dim:
        raise ViewFeatureError(f"{where}: field 'features': [{NUM_VIEWS}, {feats.shape[1]}], "
                               f"but the rows before it are [{NUM_VIEWS}, {dim}]")
    _check_values(feats, where)
    return scan, viewpoint, feats


def tsv_rows(path: str, progress: bool = False) -> Iterator[tuple[int, str, str, np.ndarray]]:
    """(line, scan, viewpoint, features float32 [36, D]) of every row of a Matterport3DSimulator
    TSV (a header row naming the fields is skipped; blank lines too); ViewFeatureError naming
    the file, line and field for a malformed row."""
    source = paths.resolve(path)
    bar = None
    if progress:
        bar = progress_report(total=source.stat().length, unit="B", unit_scale=True,
                   desc=f"decoding {source.name}")
    dim = None
    try:
        with source.open("rb") as f:
            for line_no, line in enumerate(f, 1):
                if bar is not None:
                    bar.update(len(line))
                if not line.strip() or (line_no == 1 and line.startswith(b"scanId\t")):
                    continue
                scan, viewpoint, feats = _decode_tsv_line(line, f"{path}:{line_no}", dim)
                dim = feats.shape[1]
                yield line_no, scan, viewpoint, feats
    finally:
        if bar is not None:
            bar.close()


def hdf5_rows(path: str, progress: bool = False) -> Iterator[tuple[str, str, str, np.ndarray]]:
    """(dataset name, scan, viewpoint, features float32 [36, D]) of every `"<scan>_<viewpoint>"`
    dataset of an HDF5 file, in name order (ViewFeatureError naming the file and dataset)."""
    import h5py
    source = paths.resolve(path)
    try:
        f = h5py.File(source.open("rb"), "r")
    except OSError as e:
        raise ViewFeatureError(f"{path}: not a readable HDF5 file ({e})") from None
    with f:
        names = sorted(f.keys())
        if progress:
            names = progress_report(names, desc=f"reading {source.name}")
        dim = None
        for name in names:
            where = f"{path}: dataset {name!r}"
            scan, sep, viewpoint = name.partition("_")
            if not (scan and sep and viewpoint):
                raise ViewFeatureError(f"{where}: the name is not '<scan>_<viewpoint>'")
            ds = f[name]
            if not isinstance(ds, h5py.Dataset):
                raise ViewFeatureError(f"{where}: a group, expected a [{NUM_VIEWS}, D] dataset")
            if ds.ndim != 2 or ds.shape[0] != NUM_VIEWS or ds.dtype.kind not in "fiu":
                raise ViewFeatureError(f"{where}: {ds.dtype} {ds.shape}, expected numbers "
                                       f"[{NUM_VIEWS}, D]")
            if dim is not None and ds.shape[1] != dim:
                raise ViewFeatureError(f"{where}: [{NUM_VIEWS}, {ds.shape[1]}], but the datasets "
                                       f"before it are [{NUM_VIEWS}, {dim}]")
            dim = ds.shape[1]
            feats = np.asarray(ds[...], np.float32)
            _check_values(feats, where)
            yield name, scan, viewpoint, feats


def cache_folder(path: str, cache_dir: str) -> str:
    """The cache folder of a source file: `<cache_dir>/<file name>-<hash of its full path>`."""
    full = os.fspath(paths.resolve(path))
    digest = hashlib.sha1(full.encode("utf-8")).hexdigest()[:10]
    return os.path.join(cache_dir, f"{os.path.basename(full)}-{digest}")


def fingerprint(path: str) -> dict:
    """{"size", "sha256"}: the content key of a source file (module docstring): a SHA-256 of
    its size and of all its bytes up to `FINGERPRINT_WHOLE`, else of `FINGERPRINT_CHUNKS`
    chunks of `FINGERPRINT_CHUNK` bytes at evenly spaced offsets from its start to its end."""
    source = paths.resolve(path)
    digest = hashlib.sha256()
    with source.open("rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        digest.update(f"size {size}\n".encode("ascii"))
        if size <= FINGERPRINT_WHOLE:
            f.seek(0)
            digest.update(f.read())
        else:
            last = size - FINGERPRINT_CHUNK
            for k in range(FINGERPRINT_CHUNKS):
                offset = last * k // (FINGERPRINT_CHUNKS - 1)
                f.seek(offset)
                digest.update(f"{offset}\n".encode("ascii") + f.read(FINGERPRINT_CHUNK))
    return {"size": int(size), "sha256": digest.hexdigest()}


def convert(path: str, cache_dir: str, progress: bool = True) -> str:
    """Converts a TSV or HDF5 view-feature file into its cache folder (module docstring) unless
    a cache of the same content (`fingerprint`) is there; returns the folder."""
    fmt = file_format(path)
    if fmt == "npz":
        raise ValueError(f"{path}: an .npz is read directly, not converted")
    folder = cache_folder(path, cache_dir)
    stamp = fingerprint(path)
    meta_path = os.path.join(folder, "meta.json")
    if os.path.isfile(meta_path):
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
        if meta.get("version") == CACHE_VERSION and meta.get("source") == stamp:
            return folder
        logging.warning("%s is not the file %s was converted from (its content fingerprint "
                        "differs): converting it again", path, folder)
    os.makedirs(cache_dir, exist_ok=True)
    tmp = f"{folder}.tmp.{os.getpid()}"
    os.makedirs(tmp, exist_ok=True)
    try:
        _convert_into(tmp, path, fmt, stamp, progress)
    except BaseException:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)     # a failed conversion leaves nothing behind
        raise
    if os.path.isdir(folder):
        import shutil
        shutil.rmtree(folder)
    os.replace(tmp, folder)
    return folder


def _convert_into(tmp: str, path: str, fmt: str, stamp: dict, progress: bool) -> None:
    rows = tsv_rows(path, progress) if fmt == "tsv" else hdf5_rows(path, progress)
    ids, where, seen, dim = [], [], {}, None
    with open(os.path.join(tmp, "features.f16"), "wb") as out:
        for loc, scan, viewpoint, feats in rows:
            key = f"{scan}/{viewpoint}"
            if key in seen:
                raise ViewFeatureError(
                    f"{_where(path, fmt, loc)}: fields 'scanId', 'viewpointId': viewpoint {key} "
                    f"is listed twice (first at {_where(path, fmt, seen[key])})")
            seen[key] = loc
            ids.append(key)
            where.append(loc)
            dim = feats.shape[1]
            out.write(feats.astype(np.float16).tobytes())
    if not ids:
        raise ViewFeatureError(f"{path}: no viewpoint rows ({HINT})")
    with open(os.path.join(tmp, "ids.json"), "w", encoding="utf-8") as f:
        json.dump(ids, f)
    meta = {"version": CACHE_VERSION, "format": fmt, "source": stamp,
            "shape": [len(ids), NUM_VIEWS, dim], "where": where,
            "path": os.fspath(paths.resolve(path))}
    with open(os.path.join(tmp, "meta.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f)


def _where(path: str, fmt: str, loc) -> str:
    return f"{path}:{loc}" if fmt == "tsv" else f"{path}: dataset {loc!r}"


def load_cache(folder: str) -> tuple[list[str], np.ndarray, dict]:
    """(ids, features float16 [V, 36, D] memory-mapped, meta) of a converted cache folder."""
    with open(os.path.join(folder, "meta.json"), encoding="utf-8") as f:
        meta = json.load(f)
    with open(os.path.join(folder, "ids.json"), encoding="utf-8") as f:
        ids = json.load(f)
    feats = np.memmap(os.path.join(folder, "features.f16"), np.float16, "r",
                      shape=tuple(meta["shape"]))
    return ids, feats, meta


def _npz(path: str) -> tuple[list[str], np.ndarray]:
    try:
        z = paths.load_numpy(path)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:   # e.g. a truncated file
        raise ViewFeatureError(f"{path}: not a readable .npz file ({e})") from None
    if not hasattr(z, "files"):
        raise ViewFeatureError(f"{path}: a single array, expected an .npz archive ({HINT})")
    with z:
        for key in ("ids", "features"):
            if key not in z.files:
                raise ViewFeatureError(f"{path}: array '{key}' missing; it has {sorted(z.files)}")
        try:
            raw_ids, feats = z["ids"], z["features"]
        except ValueError:
            raise ViewFeatureError(f"{path}: array 'ids' or 'features' holds Python objects "
                                   "(needs pickle, refused); save strings and numbers") from None
        except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
            raise ViewFeatureError(f"{path}: not a readable .npz file ({e})") from None
    ids = [str(i) if "/" in str(i) else str(i).replace("_", "/", 1) for i in raw_ids.tolist()]
    if feats.ndim != 3 or feats.shape[:2] != (len(ids), NUM_VIEWS) or feats.dtype.kind not in "fiu":
        raise ViewFeatureError(f"{path}: array 'features' is {feats.dtype} {feats.shape}, "
                               f"expected numbers [{len(ids)}, {NUM_VIEWS}, D] (one row per id)")
    first = {}
    for i, key in enumerate(ids):
        if key in first:
            raise ViewFeatureError(f"{path}: array 'ids': viewpoint {key} at rows {first[key]} "
                                   f"and {i}")
        first[key] = i
    finite = np.isfinite(feats).all(axis=(1, 2))
    if not finite.all():
        row = int(np.argmin(finite))
        raise ViewFeatureError(f"{path}: array 'features': non-finite values in row {row} "
                               f"(viewpoint {ids[row]})")
    problem = nonfinite_problem(feats, ml_dtypes.bfloat16)   # the device table's narrowest
    if problem:
        raise ViewFeatureError(f"{path}: array 'features': {problem}")
    return ids, feats


def source_rows(path: str, cache_dir: str) -> tuple[list[str], np.ndarray, list[str]]:
    """(ids "scan/viewpoint", features [V, 36, D] (float16 memory-mapped, or the npz's array),
    where each row comes from) of any accepted file; TSV and HDF5 through their cache, converted
    first if needed (by process 0 alone when there are several JAX processes)."""
    if not paths.resolve(path).exists():
        raise FileNotFoundError(f"view-feature file missing: {path} ({HINT}; see BUILD.md, "
                                "Room-across-Room)")
    fmt = file_format(path)
    if fmt == "npz":
        ids, feats = _npz(path)
        return ids, feats, [f"{path}: array 'ids', row {i}" for i in range(len(ids))]
    import jax
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils
        if jax.process_index() == 0:
            convert(path, cache_dir)
        multihost_utils.sync_global_devices(f"ttw view features {path}")
    folder = convert(path, cache_dir)
    ids, feats, meta = load_cache(folder)
    return ids, feats, [_where(path, fmt, loc) for loc in meta["where"]]


def feature_table(path: str, nodes: NodeTable, cache_dir: str, dtype=np.float32,
                  extra_viewpoints: str = "refuse") -> np.ndarray:
    """[N, 36, D] `dtype` features of the graph's nodes (`nodes.ids`, "scan/viewpoint") from a
    view-feature file (any accepted format). Rows of scans the graph does not hold are skipped;
    a row of a scan it holds whose viewpoint it lacks is a ViewFeatureError naming
    `data.features_extra_viewpoints`, or with `extra_viewpoints="skip"` skipped (their number
    and a few ids logged); graph viewpoints without a row are a ViewFeatureError (counted)."""
    if extra_viewpoints not in EXTRA_VIEWPOINTS:
        raise ValueError(f"data.features_extra_viewpoints must be one of {EXTRA_VIEWPOINTS}, "
                         f"got {extra_viewpoints!r}")
    ids, feats, where = source_rows(path, cache_dir)
    node_of = {v: i for i, v in enumerate(nodes.ids)}
    scans = {v.split("/", 1)[0] for v in nodes.ids}
    rows = np.full(len(nodes.ids), -1, np.int64)
    extra = []
    for r, key in enumerate(ids):
        i = node_of.get(key)
        if i is None:
            if key.split("/", 1)[0] in scans:
                if extra_viewpoints == "skip":
                    extra.append(key)
                    continue
                raise ViewFeatureError(
                    f"{where[r]}: field 'viewpointId': {key.split('/', 1)[1]} is not a viewpoint "
                    f"of scan {key.split('/', 1)[0]}'s connectivity graph (included viewpoints; "
                    "--config.data.features_extra_viewpoints=skip skips such rows)")
            continue
        rows[i] = r
    if extra:
        logging.warning("%s: skipped %d rows of viewpoints that the loaded scans' connectivity "
                        "graphs lack (data.features_extra_viewpoints=skip), e.g. %s", path,
                        len(extra), extra[:3])
    missing = [nodes.ids[i] for i in np.nonzero(rows < 0)[0]]
    if missing:
        raise ViewFeatureError(f"{path}: {len(missing)} of the {len(nodes.ids)} viewpoints of the "
                               f"loaded scans have no features, e.g. {missing[:3]} ({HINT})")
    out = np.empty((len(rows), NUM_VIEWS, feats.shape[-1]), dtype)
    for lo in range(0, len(rows), 1024):          # bounded memory over a memory-mapped file
        out[lo:lo + 1024] = feats[rows[lo:lo + 1024]]
    return out


def write_tsv(path: str, ids: Sequence[str], features: np.ndarray) -> None:
    """Writes features [V, 36, D] of `ids` ("scan/viewpoint") as a Matterport3DSimulator TSV."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        for key, feats in zip(ids, features):
            scan, viewpoint = key.split("/", 1)
            f.write(encode_tsv_row(scan, viewpoint, feats))


def write_hdf5(path: str, ids: Sequence[str], features: np.ndarray) -> None:
    """Writes features [V, 36, D] of `ids` ("scan/viewpoint") as one `"<scan>_<viewpoint>"`
    dataset each, the later VLN codebases' HDF5 layout."""
    import h5py
    with h5py.File(path, "w") as f:
        for key, feats in zip(ids, features):
            f.create_dataset(key.replace("/", "_", 1), data=np.asarray(feats, np.float32))
