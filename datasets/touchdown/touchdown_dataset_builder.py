"""TFDS builder `touchdown`: Touchdown navigation routes and SDR (Touchdown-location) views.

Configs:
- `synthetic_navigation` (default) / `synthetic_sdr`: templated routes walked on
  `synthetic_street_grid` (splits train / dev / test, disjoint route ids); no download.
- `navigation` / `sdr`: the official records in the manual directory, any of `train.json`,
  `dev.json`, `test.json` (the release's names) and `touchdown_unseen_dev_sample.json` (split
  `dev_sample`); the splits are the files present.
Navigation: one example per route (key `{route_id}`). SDR: one example per view (main / pre / post)
in which Touchdown is visible (key `{route_id}_{which}`), with its centre (x, y) in [0, 1].
TensorFlow is not needed: the builder writes ArrayRecord, read back with `tfds.data_source`.
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import tensorflow_datasets as tfds

from ttw_jax.data import touchdown_records as tr
from ttw_jax.data.touchdown_synthetic import synthetic_records
from ttw_jax.graphs.touchdown import synthetic_street_grid

# split name -> file name in the manual directory
MANUAL_FILES = {"train": "train.json", "dev": "dev.json", "test": "test.json",
                "dev_sample": "touchdown_unseen_dev_sample.json"}
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
    paths = {s: os.path.join(manual_dir, f) for s, f in MANUAL_FILES.items()}
    present = {s: p for s, p in paths.items() if os.path.isfile(p)}
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


class Builder(tfds.core.GeneratorBasedBuilder):
    """Touchdown navigation routes or SDR views (see the module docstring)."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Initial release."}
    BUILDER_CONFIGS = [
        TouchdownConfig(name="synthetic_navigation",
                        description="Synthetic routes on a synthetic street grid; no download."),
        TouchdownConfig(name="synthetic_sdr", task="sdr",
                        description="SDR views of the synthetic routes; no download."),
        TouchdownConfig(name="navigation", synthetic=False,
                        description="Official navigation records (manual download)."),
        TouchdownConfig(name="sdr", task="sdr", synthetic=False,
                        description="Official SDR views (manual download)."),
    ]
    DEFAULT_CONFIG_NAME = "synthetic_navigation"
    MANUAL_DOWNLOAD_INSTRUCTIONS = (
        "Place any of the official Touchdown record files " +
        ", ".join(f"`{f}`" for f in MANUAL_FILES.values()) +
        " (one JSON object per line; the first three are `data/train.json`, `data/dev.json` and "
        "`data/test.json` of github.com/lil-lab/touchdown) in the manual directory. Each file "
        "present becomes a split (train, dev, test, dev_sample).")

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
            }
        else:
            raise ValueError(f"task must be one of {TASKS}, got {self.builder_config.task!r}")
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=tfds.features.FeaturesDict(features),
            homepage="https://github.com/lil-lab/touchdown",
        )

    def _split_generators(self, dl_manager):
        cfg = self.builder_config
        sdr = cfg.task == "sdr"
        if cfg.synthetic:
            by_split = synthetic_split_records(cfg)
        else:   # an empty or missing manual dir: TFDS raises with MANUAL_DOWNLOAD_INSTRUCTIONS
            by_split = manual_split_records(os.fspath(dl_manager.manual_dir), sdr)
        return {split: self._generate_examples(recs) for split, recs in by_split.items()}

    def _generate_examples(self, records):
        if self.builder_config.task == "navigation":
            for rec in records:
                ex = tr.navigation_example(rec)
                yield f"{ex['route_id']}", ex
            return
        for rec in records:
            for ex in tr.sdr_examples(rec):
                yield f"{ex['route_id']}_{ex['which']}", {
                    "route_id": ex["route_id"], "which": ex["which"], "panoid": ex["panoid"],
                    "heading": ex["heading"],
                    "center": np.asarray([ex["center_x"], ex["center_y"]], np.float32),
                    "td_location_text": ex["td_location_text"]}


def _sources(data_dir: str | None, config: str, needs: str):
    builder = tfds.builder(f"touchdown/{config}", data_dir=data_dir)
    if not builder.is_prepared():
        raise FileNotFoundError(
            f"touchdown/{config} is not prepared in {builder.data_dir}: build it first with "
            f"Builder(config={config!r}, data_dir=..., file_format='array_record')"
            f".download_and_prepare()")
    sources = builder.as_data_source()
    first = next(iter(sources.values()), None)
    if first is not None and needs not in first.dataset_info.features:
        raise ValueError(f"touchdown/{config} has no '{needs}' feature (wrong task for this "
                         f"reader?)")
    return sources


def _rows(source) -> list[dict]:
    return list(source.__getitems__(list(range(len(source))))) if len(source) else []


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
            for r in _rows(source)), key=lambda e: e["route_id"])
    return out


def load_sdr(data_dir: str | None = None,
             config: str = "synthetic_sdr") -> dict[str, list[dict]]:
    """Reads each split of a prepared `touchdown/<config>` (SDR task) once: split -> list of
    {route_id: int, which: str, panoid: str, heading: float, center_x: float, center_y: float,
    td_location_text: str} (the `sdr_examples` form; floats via float32), by (route_id, view
    main/pre/post)."""
    order = {v: i for i, v in enumerate(tr.VIEWS)}
    out = {}
    for split, source in _sources(data_dir, config, "td_location_text").items():
        out[split] = sorted((
            {"route_id": int(r["route_id"]), "which": r["which"].decode(),
             "panoid": r["panoid"].decode(), "heading": float(r["heading"]),
             "center_x": float(r["center"][0]), "center_y": float(r["center"][1]),
             "td_location_text": r["td_location_text"].decode()}
            for r in _rows(source)), key=lambda e: (e["route_id"], order.get(e["which"], 3)))
    return out
