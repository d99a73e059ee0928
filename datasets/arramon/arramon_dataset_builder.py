"""TFDS builder `arramon`: ArraMon navigation + assembly instances (Kim et al. 2020), one example
per instance (two turns; the `ttw_jax.arramon.records` schema).

Configs:
- `synthetic` (default): `ttw_jax.arramon.synthetic.synthetic_instances` (one synthetic city
  per instance, with its `world`); no download. Splits, sizes and seeds from `synthetic_splits`
  (default train 2000 / val_seen 200 / val_unseen 200 / test_unseen 200, seeds 0-3). Every
  instance has its own city, so "seen" and "unseen" differ only in the seed.
- `english`: the official files in the manual directory, any of `train.json`, `val_seen.json`,
  `val_unseen.json`, `test_unseen.json` (github.com/hyounghk/ArraMon, `data/`; the test split is
  sent by e-mail by the authors, arramonunc@gmail.com); the splits are the files present.
- `hindi`: the Hindi instances, same schema with Hindi instructions, from
  `{split}_hindi.json` (`train_hindi.json`, `val_seen_hindi.json`, `val_unseen_hindi.json`,
  `test_unseen_hindi.json`) in the manual directory; rename the release's files to these names.
Every instance is validated (`validate_instance`) before anything is written.
Each example: `record`, the whole instance as JSON text (floats written with Python's shortest
round-trip repr, so `json.loads` gives back exactly the validated dict, including any `world`),
plus `index` (its position in the split's file or generator output; the reader sorts by it),
`mapId` and `code` (empty when the instance has none: the official val_unseen carries neither
`code` nor `filename`) for filtering. Key: `{mapId}_{index}`, from what every instance has.
TensorFlow is not needed: the builder writes ArrayRecord, read back with `tfds.data_source`.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Mapping, Sequence

import numpy as np
import tensorflow_datasets as tfds

from ttw_jax.arramon import records as ar
from ttw_jax.arramon.synthetic import synthetic_instances
from ttw_jax.core import paths, tfds as ttw_tfds

SOURCES = ("synthetic", "english", "hindi")
SPLITS = ("train", "val_seen", "val_unseen", "test_unseen")
# source -> split -> file name in the manual directory
MANUAL_FILES = {"english": {s: f"{s}.json" for s in SPLITS},
                "hindi": {s: f"{s}_hindi.json" for s in SPLITS}}


@dataclasses.dataclass
class ArramonConfig(tfds.core.BuilderConfig):
    """Where the instances come from, and the synthetic splits."""

    source: str = "synthetic"   # "synthetic", "english" or "hindi"
    # synthetic splits: (name, instances, seed of `synthetic_instances`)
    synthetic_splits: tuple[tuple[str, int, int], ...] = (
        ("train", 2000, 0), ("val_seen", 200, 1), ("val_unseen", 200, 2), ("test_unseen", 200, 3))

    def validate(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"ArramonConfig {self.name!r}: source must be one of {SOURCES}, "
                             f"got {self.source!r}")


def manual_split_instances(manual_dir: str, source: str) -> dict[str, list[dict]]:
    """split -> validated instances of every `source` file ("english" / "hindi") present in
    `manual_dir`; FileNotFoundError naming the expected files (and where to get them) if none."""
    files = MANUAL_FILES[source]
    present = {s: os.path.join(manual_dir, f) for s, f in files.items()
               if paths.isfile(os.path.join(manual_dir, f))}
    if not present:
        raise FileNotFoundError(
            f"No ArraMon {source} file in {manual_dir}: expected any of "
            f"{', '.join(files.values())}. {ar.SOURCE_HINT}")
    out = {}
    for split, path in present.items():
        out[split] = ar.read_arramon(path)
        if not out[split]:
            raise ar.ArramonFormatError(f"{path}: no instances")
    return out


def synthetic_split_instances(config: ArramonConfig) -> dict[str, list[dict]]:
    """split -> synthetic instances of `config` (validated by the generator)."""
    return {split: synthetic_instances(num, seed) for split, num, seed in config.synthetic_splits}


def split_instances(config: ArramonConfig, manual_dir: str | None) -> dict[str, list[dict]]:
    """split -> validated instances of `config` (`manual_dir` is only read by english / hindi)."""
    config.validate()
    if config.source == "synthetic":
        return synthetic_split_instances(config)
    return manual_split_instances(manual_dir, config.source)


def example_keys(instances: Sequence[Mapping]) -> list[str]:
    """The example key of each instance: `{mapId}_{index}` (index: its position in
    `instances`), from fields every official split has (`code` is optional)."""
    return [f"{inst['mapId']}_{i}" for i, inst in enumerate(instances)]


def to_example(inst: Mapping, index: int) -> dict:
    """The stored example of an instance at position `index` of its split."""
    return {"index": index, "code": inst.get("code", ""), "mapId": inst["mapId"],
            "record": json.dumps(inst, ensure_ascii=False, allow_nan=False)}


# Kim et al. 2020.
CITATION = r"""@inproceedings{kim2020arramon,
  title     = {ArraMon: A Joint Navigation-Assembly Instruction Interpretation Task in Dynamic
               Environments},
  author    = {Kim, Hyounghun and Zala, Abhay and Burri, Graham and Tan, Hao and Bansal, Mohit},
  booktitle = {Findings of the Association for Computational Linguistics: EMNLP 2020},
  year      = {2020}
}"""

class Builder(ttw_tfds.ArrayRecordBuilder):
    """ArraMon instances, one example per instance (see the module docstring)."""

    VERSION = tfds.core.Version("1.1.0")
    RELEASE_NOTES = {"1.0.0": "Initial release.",
                     "1.1.0": "`code` and `filename` optional (empty `code` feature when "
                              "absent); example keys `{mapId}_{index}`."}
    BUILDER_CONFIGS = [
        ArramonConfig(name="synthetic", description="Synthetic cities, routes, objects and "
                                                    "assembly grids; no download."),
        ArramonConfig(name="english", source="english",
                      description="Official English instances (manual download)."),
        ArramonConfig(name="hindi", source="hindi",
                      description="Official Hindi instances (manual download, "
                                  "`{split}_hindi.json`)."),
    ]
    DEFAULT_CONFIG_NAME = "synthetic"
    MANUAL_DOWNLOAD_INSTRUCTIONS = (
        "english config: place any of " + ", ".join(MANUAL_FILES["english"].values()) +
        " (JSON lists of instances, the `data/` folder of https://github.com/hyounghk/ArraMon; "
        "the test split is sent on request by e-mail to the authors, arramonunc@gmail.com) in "
        "the manual directory; each file present becomes a split. hindi config: the Hindi "
        "files of the same release, renamed to " + ", ".join(MANUAL_FILES["hindi"].values()) +
        ". The synthetic config needs no download.")

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=tfds.features.FeaturesDict({
                "index": tfds.features.Scalar(dtype=np.int64),
                "code": tfds.features.Text(),
                "mapId": tfds.features.Scalar(dtype=np.int64),
                "record": tfds.features.Text(),
            }),
            homepage="https://github.com/hyounghk/ArraMon",
            citation=CITATION,
        )

    def _split_generators(self, dl_manager):
        manual_dir = None
        if self.builder_config.source != "synthetic":
            # an empty or missing manual dir: TFDS raises with MANUAL_DOWNLOAD_INSTRUCTIONS
            manual_dir = os.fspath(dl_manager.manual_dir)
        by_split = split_instances(self.builder_config, manual_dir)
        return {split: self._generate_examples(insts) for split, insts in by_split.items()}

    def _generate_examples(self, instances):
        for i, (key, inst) in enumerate(zip(example_keys(instances), instances)):
            yield key, to_example(inst, i)


def load_arramon(data_dir: str | None = None, config="synthetic",
                 splits: Sequence[str] | None = None) -> dict[str, list[dict]]:
    """Reads each split (or only `splits`) of a prepared `arramon/<config>` once: split ->
    instances (exactly the validated dicts), in their order in the file / generator output.
    `config` is a config name (also of a custom `ArramonConfig` built in `data_dir`) or an
    `ArramonConfig`; ValueError naming the available splits for a missing one."""
    sources = ttw_tfds.prepared_sources("arramon", config, data_dir, splits,
                                        "ttw_jax.arramon.dataset.prepare")
    out = {}
    for split, source in sources.items():
        rows = ttw_tfds.all_rows(source)
        out[split] = [ttw_tfds.json_record(r) for r in sorted(rows, key=lambda r: int(r["index"]))]
    return out
