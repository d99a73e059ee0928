"""TFDS builder `touchdown`: Touchdown navigation routes and SDR (Touchdown-location) views.

Configs:
- `synthetic_navigation` (default) / `synthetic_sdr`: templated routes walked on
  `synthetic_street_grid` (splits train / dev / test, disjoint route ids); no download.
- `navigation` / `sdr`: the official records in the manual directory, any of `train.json`,
  `dev.json`, `test.json` (the release's names) and `touchdown_unseen_dev_sample.json` (split
  `dev_sample`); the splits are the files present.
Navigation: one example per route (key `{route_id}`). SDR: one example per view (main / pre / post)
in which Touchdown is visible (key `{route_id}_{which}`): the panorama's feature map `features`
[H, W, C] float16, Touchdown's centre (x, y) in [0, 1] and the description.
- `sdr` reads the feature maps from the manual directory: `features/<panoid>.npy` (or
  `<panoid>.npy`), each of the config's `feature_shape` (default (100, 464, 128), the 8 ResNet18
  slices of Chen et al. 2019 side by side); every file is checked before anything is written.
  Other sizes: `Builder(config=TouchdownConfig(name=..., task="sdr", synthetic=False,
  feature_shape=(H, W, C)), ...)`.
- `synthetic_sdr` renders feature-space scenes (`ttw_jax.touchdown.sdr.synthetic`) whose description
  picks out an object by type, colour and ordinal; sizes in `synthetic_sdr_splits` and
  `synthetic_sdr_shape`.
TensorFlow is not needed: the builder writes ArrayRecord, read back with `tfds.data_source`.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import os
from typing import Iterable, Mapping, Sequence

import numpy as np
import tensorflow_datasets as tfds

from ttw_jax.core import paths, tfds as ttw_tfds
from ttw_jax.core.records import check_npy_size, damaged, nonfinite_problem
from ttw_jax.touchdown import records as tr
from ttw_jax.touchdown.graph import synthetic_street_grid
from ttw_jax.touchdown.sdr.stream import FEATURE_DTYPE
from ttw_jax.touchdown.sdr.synthetic import iter_synthetic_sdr_examples
from ttw_jax.touchdown.synthetic import synthetic_records
from ttw_jax.touchdown.validate import RECORD_FILES

# split name -> file name in the manual directory
MANUAL_FILES = RECORD_FILES
TASKS = ("navigation", "sdr")


@dataclasses.dataclass
class TouchdownConfig(tfds.core.BuilderConfig):
    """The task, and for synthetic configs the street grid and the split sizes / seeds."""

    task: str = "navigation"   # "navigation" or "sdr"
    synthetic: bool = True     # False: read the official records from the manual directory
    # `synthetic_street_grid` arguments (its defaults)
    num_avenues: int = 6
    num_streets: int = 10
    panos_per_block: int = 6
    spacing_m: float = 10.0
    rotation_deg: float = 29.0
    grid_seed: int = 0
    # synthetic splits: (name, routes, seed); route ids run on consecutively across the splits
    synthetic_splits: tuple[tuple[str, int, int], ...] = (
        ("train", 2000, 0), ("dev", 200, 1), ("test", 200, 2))
    max_route_len: int = 45
    # SDR: shape [H, W, C] of the real panorama feature maps (the `.npy` files)
    feature_shape: tuple[int, int, int] = (100, 464, 128)
    # synthetic SDR: (name, descriptions, seed), route ids consecutive across the splits, and
    # the scenes' [H, W, C]
    synthetic_sdr_splits: tuple[tuple[str, int, int], ...] = (
        ("train", 1000, 0), ("dev", 150, 1), ("test", 150, 2))
    synthetic_sdr_shape: tuple[int, int, int] = (25, 116, 12)

    def sdr_feature_shape(self) -> tuple[int, int, int]:
        """[H, W, C] of this config's SDR feature maps (ValueError unless 3 positive ints)."""
        shape = self.synthetic_sdr_shape if self.synthetic else self.feature_shape
        field = "synthetic_sdr_shape" if self.synthetic else "feature_shape"
        if (len(tuple(shape)) != 3 or
                not all(isinstance(d, (int, np.integer)) and d > 0 for d in shape)):
            raise ValueError(f"TouchdownConfig {self.name!r}: {field} must be 3 positive ints "
                             f"(H, W, C), got {shape!r}")
        return tuple(int(d) for d in shape)

    def grid(self):
        """(nodes rows, links rows) of this config's synthetic street grid."""
        return synthetic_street_grid(self.num_avenues, self.num_streets, self.panos_per_block,
                                     self.spacing_m, self.rotation_deg, self.grid_seed)


def synthetic_split_records(config: TouchdownConfig) -> dict[str, list[dict]]:
    """The synthetic records of each split of `config` (original schema), route ids disjoint."""
    nodes, links = config.grid()
    index = {n[0]: i for i, n in enumerate(nodes)}
    out, first = {}, 0
    for split, num_routes, seed in config.synthetic_splits:
        recs = synthetic_records(links, num_routes, seed, max_route_len=config.max_route_len,
                                 first_route_id=first)
        tr.check_panoids(recs, index, f"synthetic split {split!r}")
        out[split], first = recs, first + num_routes
    return out


def manual_split_records(manual_dir: str, sdr: bool) -> dict[str, list[dict]]:
    """The validated records of each official file present in `manual_dir` (split -> records)."""
    files = {s: paths.join(manual_dir, f) for s, f in MANUAL_FILES.items()}
    present = {s: p for s, p in files.items() if paths.isfile(p)}
    if not present:
        raise FileNotFoundError(
            f"No Touchdown record files in {manual_dir}: expected any of "
            f"{', '.join(MANUAL_FILES.values())}. {tr.SOURCE_HINT}")
    out = {}
    for split, path in present.items():
        out[split] = tr.read_records(path, sdr=sdr)
        if not out[split]:
            raise tr.RecordFormatError(f"{path}: no records")
    return out


FEATURE_PATTERNS = (os.path.join("features", "{panoid}.npy"), "{panoid}.npy")


def _npy_header(path: str) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) of an `.npy` file, from its header, after checking the file holds every
    byte the header announces (a truncated file would fail at training time)."""
    return check_npy_size(path, ValueError)


def _check_feature_array(path: str, shape, dtype, feature_shape) -> None:
    if tuple(shape) != tuple(feature_shape):
        raise ValueError(f"{path}: feature map has shape {tuple(shape)}, but the config's "
                         f"feature_shape is {tuple(feature_shape)}")
    if not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer)):
        raise ValueError(f"{path}: feature map has dtype {dtype}, expected a float (float16)")


def feature_files(manual_dir: str, panoids: Iterable[str],
                  feature_shape: Sequence[int]) -> dict[str, str]:
    """panoid -> path of its feature map in `manual_dir` (`features/<panoid>.npy`, else
    `<panoid>.npy`; any `paths.resolve` folder, listed once rather than one stat per file),
    after checking them all: FileNotFoundError naming how many are missing, the first of them
    and the expected paths; ValueError naming a file whose shape is not
    `feature_shape` (both shapes) or whose dtype is not numeric. Only the headers are read."""
    found_files: dict[str, str] = {}
    missing: dict[str, None] = {}   # insertion-ordered set
    listed = set()                  # every file of the pattern folders, relative to manual_dir
    for folder in {os.path.dirname(pat) for pat in FEATURE_PATTERNS}:
        where = paths.join(manual_dir, folder) if folder else manual_dir
        if paths.isdir(where):
            listed |= {os.path.join(folder, f) for f in paths.listdir(where)}
    for panoid in panoids:
        if panoid in found_files or panoid in missing:
            continue
        found = next((paths.join(manual_dir, pat.format(panoid=panoid))
                      for pat in FEATURE_PATTERNS if pat.format(panoid=panoid) in listed), None)
        if found is None:
            missing[panoid] = None
        else:
            found_files[panoid] = found
    missing = list(missing)
    if missing:
        total = len(found_files) + len(missing)
        shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
        expected = [os.path.join(manual_dir, pat.format(panoid="<panoid>"))
                    for pat in FEATURE_PATTERNS]
        raise FileNotFoundError(
            f"{len(missing)} of {total} panorama feature files missing (first: {shown}); "
            f"expected {expected[0]} or {expected[1]}: a float16 array of shape "
            f"{tuple(feature_shape)} per panorama (set TouchdownConfig.feature_shape for "
            f"other sizes)")
    # A bucket answers each header read after a round trip: read them 32 at a time there.
    files = list(found_files.values())
    threads = 32 if files and paths.is_uri(files[0]) else 1
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        headers = list(pool.map(_npy_header, files))
    for path, header in zip(files, headers):
        _check_feature_array(path, *header, feature_shape)
    return found_files


def synthetic_sdr_split_sizes(config: "TouchdownConfig") -> dict[str, tuple[int, int, int]]:
    """split -> (descriptions, seed, first route id) of a synthetic SDR config."""
    out, first = {}, 0
    for split, num, seed in config.synthetic_sdr_splits:
        out[split], first = (num, seed, first), first + num
    return out


# Chen et al. 2019.
CITATION = r"""@inproceedings{chen2019touchdown,
  title     = {Touchdown: Natural Language Navigation and Spatial Reasoning in Visual Street
               Environments},
  author    = {Chen, Howard and Suhr, Alane and Misra, Dipendra and Snavely, Noah and
               Artzi, Yoav},
  booktitle = {Proceedings of the IEEE/CVF Conference on Computer Vision and Pattern
               Recognition (CVPR)},
  year      = {2019}
}"""

class Builder(ttw_tfds.ArrayRecordBuilder):
    """Touchdown navigation routes or SDR views (see the module docstring)."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Initial release."}
    SDR_VERSION = "1.1.0"   # the SDR configs' own version: examples carry `features`
    BUILDER_CONFIGS = [
        TouchdownConfig(name="synthetic_navigation",
                        description="Synthetic routes on a synthetic street grid; no download."),
        TouchdownConfig(name="synthetic_sdr", task="sdr", version=SDR_VERSION,
                        release_notes={SDR_VERSION: "Feature-space scenes with panorama "
                                                    "features."},
                        description="Synthetic feature-space SDR scenes; no download."),
        TouchdownConfig(name="navigation", synthetic=False,
                        description="Official navigation records (manual download)."),
        TouchdownConfig(name="sdr", task="sdr", synthetic=False, version=SDR_VERSION,
                        release_notes={SDR_VERSION: "Examples carry the panorama features."},
                        description="Official SDR views with panorama feature maps (manual "
                                    "download)."),
    ]
    DEFAULT_CONFIG_NAME = "synthetic_navigation"
    MANUAL_DOWNLOAD_INSTRUCTIONS = (
        "Place any of the official Touchdown record files " +
        ", ".join(f"`{f}`" for f in MANUAL_FILES.values()) +
        " (one JSON object per line; the first three are `data/train.json`, `data/dev.json` and "
        "`data/test.json` of github.com/lil-lab/touchdown) in the manual directory. Each file "
        "present becomes a split (train, dev, test, dev_sample). The SDR configs also need "
        "each panorama's feature map, `features/<panoid>.npy` (or `<panoid>.npy`) in the manual "
        "directory: float16 of the config's feature_shape (default (100, 464, 128)).")

    def _info(self) -> tfds.core.DatasetInfo:
        if self.builder_config.task == "navigation":
            features = {
                "route_id": tfds.features.Scalar(dtype=np.int64),
                "navigation_text": tfds.features.Text(),
                "route_panoids": tfds.features.Sequence(tfds.features.Text()),
                "start_heading": tfds.features.Scalar(dtype=np.float32),
                "end_heading": tfds.features.Scalar(dtype=np.float32),
            }
        elif self.builder_config.task == "sdr":
            features = {
                "route_id": tfds.features.Scalar(dtype=np.int64),
                "which": tfds.features.Text(),
                "panoid": tfds.features.Text(),
                "heading": tfds.features.Scalar(dtype=np.float32),
                "center": tfds.features.Tensor(shape=(2,), dtype=np.float32),
                "td_location_text": tfds.features.Text(),
                # raw bytes: a float list would store float16 as float32, value by value
                "features": tfds.features.Tensor(
                    shape=self.builder_config.sdr_feature_shape(), dtype=np.float16,
                    encoding=tfds.features.Encoding.BYTES),
            }
        else:
            raise ValueError(f"task must be one of {TASKS}, got {self.builder_config.task!r}")
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=tfds.features.FeaturesDict(features),
            homepage="https://github.com/lil-lab/touchdown",
            citation=CITATION,
        )

    def _split_generators(self, dl_manager):
        cfg = self.builder_config
        sdr = cfg.task == "sdr"
        if cfg.synthetic and sdr:
            shape = cfg.sdr_feature_shape()
            return {split: self._generate_synthetic_sdr(num, seed, first, shape)
                    for split, (num, seed, first) in synthetic_sdr_split_sizes(cfg).items()}
        if cfg.synthetic:
            by_split = synthetic_split_records(cfg)
        else:   # an empty or missing manual dir: TFDS raises with MANUAL_DOWNLOAD_INSTRUCTIONS
            manual_dir = os.fspath(dl_manager.manual_dir)
            by_split = manual_split_records(manual_dir, sdr)
        if not sdr:
            return {split: self._generate_examples(recs) for split, recs in by_split.items()}
        # check every feature file before anything is written
        panoids = (ex["panoid"] for split in by_split for rec in by_split[split]
                   for ex in tr.sdr_examples(rec))
        paths = feature_files(manual_dir, panoids, cfg.sdr_feature_shape())
        return {split: self._generate_examples(recs, paths) for split, recs in by_split.items()}

    def _generate_examples(self, records, feature_paths: Mapping[str, str] | None = None):
        if self.builder_config.task == "navigation":
            for rec in records:
                ex = tr.navigation_example(rec)
                yield f"{ex['route_id']}", ex
            return
        shape = self.builder_config.sdr_feature_shape()
        for rec in records:
            for ex in tr.sdr_examples(rec):
                path = feature_paths[ex["panoid"]]
                with damaged(path, ValueError):
                    features = paths.load_numpy(path)
                _check_feature_array(path, features.shape, features.dtype, shape)
                problem = nonfinite_problem(features, FEATURE_DTYPE)   # stored as float16
                if problem:
                    raise ValueError(f"{path}: {problem}")
                yield f"{ex['route_id']}_{ex['which']}", _sdr_row(ex, features)

    def _generate_synthetic_sdr(self, num: int, seed: int, first_route_id: int, shape):
        for ex in iter_synthetic_sdr_examples(num, seed, *shape, first_route_id=first_route_id):
            yield f"{ex['route_id']}_{ex['which']}", _sdr_row(ex, ex["features"])


def _sdr_row(ex: Mapping, features: np.ndarray) -> dict:
    """The stored SDR example of an `sdr_examples`-form dict and its feature map."""
    return {"route_id": ex["route_id"], "which": ex["which"], "panoid": ex["panoid"],
            "heading": ex["heading"],
            "center": np.asarray([ex["center_x"], ex["center_y"]], np.float32),
            "td_location_text": ex["td_location_text"],
            "features": np.asarray(features, np.float16)}


def _sources(data_dir: str | None, config, needs: str):
    """The data sources (split -> source) of a prepared `touchdown/<config>`; `config` is a name
    (a config of `Builder`, or a custom `TouchdownConfig` already built in `data_dir`) or a
    `TouchdownConfig`."""
    sources = ttw_tfds.prepared_sources("touchdown", config, data_dir)
    first = next(iter(sources.values()), None)
    if first is not None and needs not in first.dataset_info.features:
        raise ValueError(f"touchdown/{getattr(config, 'name', config)} has no '{needs}' "
                         f"feature (wrong task for this reader?)")
    return sources


def load_navigation(data_dir: str | None = None,
                    config: str = "synthetic_navigation") -> dict[str, list[dict]]:
    """Reads each split of a prepared `touchdown/<config>` (navigation task) once: split -> list of
    {route_id: int, navigation_text: str, route_panoids: list[str], start_heading: float,
    end_heading: float} (the `navigation_example` form; headings via float32), by route_id."""
    out = {}
    for split, source in _sources(data_dir, config, "navigation_text").items():
        out[split] = sorted((
            {"route_id": int(r["route_id"]), "navigation_text": r["navigation_text"].decode(),
             "route_panoids": [p.decode() for p in r["route_panoids"]],
             "start_heading": float(r["start_heading"]), "end_heading": float(r["end_heading"])}
            for r in ttw_tfds.all_rows(source)), key=lambda e: e["route_id"])
    return out


_READ_BYTES = 256 << 20   # feature bytes decoded per data-source call in `load_sdr` (at most)


def _permute_rows(arr: np.ndarray, perm: np.ndarray) -> None:
    """arr[:] = arr[perm] in place, following the permutation's cycles (one row of scratch)."""
    done = np.zeros(len(perm), bool)
    for start in range(len(perm)):
        if done[start] or perm[start] == start:
            continue
        scratch = arr[start].copy()
        j = start
        while True:
            done[j] = True
            k = int(perm[j])
            if k == start:
                arr[j] = scratch
                break
            arr[j] = arr[k]
            j = k


def load_sdr(data_dir: str | None = None, config="synthetic_sdr",
             splits: Sequence[str] | None = None) -> dict[str, dict]:
    """Reads each split (or only `splits`) of a prepared `touchdown/<config>` (SDR task) once
    into arrays, rows ordered by (route_id, view main/pre/post):
    split -> {features: [E, H, W, C] float16, center: [E, 2] float32 (x, y in [0, 1]),
    route_id: [E] int64, which: [E] str, panoid: [E] str, heading: [E] float32 (NaN where the
    release leaves it empty), text: list of E str}.

    `config` is a config name (also of a custom `TouchdownConfig` built in `data_dir`) or a
    `TouchdownConfig`. The features array is allocated once and filled in place."""
    sources = _sources(data_dir, config, "features")
    if splits is not None:
        unknown = sorted(set(splits) - set(sources))
        if unknown:
            raise ValueError(f"touchdown/{getattr(config, 'name', config)} has no split(s) "
                             f"{unknown}; it has {sorted(sources)}")
        sources = {s: sources[s] for s in splits}
    order = {v: i for i, v in enumerate(tr.VIEWS)}
    out = {}
    for split, source in sources.items():
        n = len(source)
        shape = tuple(source.dataset_info.features["features"].shape)
        features = np.empty((n,) + shape, np.float16)
        center = np.empty((n, 2), np.float32)
        route_id = np.empty(n, np.int64)
        heading = np.empty(n, np.float32)
        view = np.empty(n, np.int64)
        which, panoid, text = [], [], []
        example_bytes = max(1, 2 * int(np.prod(shape)))   # float16
        chunk = min(256, max(1, _READ_BYTES // example_bytes))
        for lo in range(0, n, chunk):
            for i, r in enumerate(source.__getitems__(list(range(lo, min(n, lo + chunk)))), lo):
                features[i] = r["features"]
                center[i] = r["center"]
                route_id[i] = r["route_id"]
                heading[i] = r["heading"]
                which.append(r["which"].decode())
                panoid.append(r["panoid"].decode())
                text.append(r["td_location_text"].decode())
                view[i] = order.get(which[-1], len(order))
        perm = np.lexsort((view, route_id))
        _permute_rows(features, perm)
        out[split] = {
            "features": features, "center": center[perm], "route_id": route_id[perm],
            "which": np.asarray(which, dtype=str)[perm],
            "panoid": np.asarray(panoid, dtype=str)[perm],
            "heading": heading[perm], "text": [text[i] for i in perm]}
    return out
