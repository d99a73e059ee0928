"""RxR / R2R instruction records of an `rxr` TFDS config, prepared on first use.

The synthetic configs need the Matterport `<scan>_connectivity.json` files as `manual_dir`; the
RxR configs the official `rxr_{split}_{guide,follower}.jsonl.gz` files and the r2r config the
`R2R_{split}.json` files (see `ttw_datasets.rxr.rxr_dataset_builder`). Records are the dicts of
`ttw_jax.data.rxr_records`.
"""
from __future__ import annotations

from typing import Sequence

import tensorflow_datasets as tfds

from ttw_datasets.rxr import rxr_dataset_builder as rxr_builder


def _config(config):
    """The builder config argument of a name or an `RxrConfig` (ValueError for unknown names)."""
    if isinstance(config, rxr_builder.RxrConfig):
        return config
    if config not in rxr_builder.Builder.builder_configs:
        raise ValueError(f"unknown rxr config {config!r}; choose from "
                         f"{sorted(rxr_builder.Builder.builder_configs)}")
    return config


def prepare(config, tfds_dir: str | None = None, manual_dir: str | None = None) -> None:
    """Builds `rxr/<config>` (a name or an `RxrConfig`) in `tfds_dir` unless it is already
    there."""
    builder = rxr_builder.Builder(config=_config(config), data_dir=tfds_dir,
                                  file_format="array_record")
    if not builder.is_prepared():
        builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
            manual_dir=manual_dir))


def load_split_records(config, splits: Sequence[str], tfds_dir: str | None = None,
                       manual_dir: str | None = None) -> dict[str, list[dict]]:
    """{split: records} of `splits` of `rxr/<config>`, built first if needed; records sorted by
    (instruction_id, annotator). ValueError for an unknown config or a split it lacks."""
    config = _config(config)
    prepare(config, tfds_dir, manual_dir)
    return rxr_builder.load_rxr(tfds_dir, config, splits=list(splits))
