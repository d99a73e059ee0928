"""ArraMon instances of an `arramon` TFDS config, prepared on first use.

The synthetic config needs nothing; `english` and `hindi` need the official files in
`manual_dir` (see `ttw_datasets.arramon.arramon_dataset_builder`). Instances are the validated
dicts of `ttw_jax.arramon.records`.
"""
from __future__ import annotations

from typing import Sequence

from ttw_datasets.arramon import arramon_dataset_builder as arramon_builder
from ttw_jax.core import tfds as ttw_tfds


def prepare(config, tfds_dir: str | None = None, manual_dir: str | None = None) -> None:
    """Builds `arramon/<config>` (a name or a config object) in `tfds_dir` unless it is already
    there."""
    ttw_tfds.prepare(arramon_builder.Builder, config, tfds_dir, manual_dir)


def load_split_records(config, splits: Sequence[str], tfds_dir: str | None = None,
                       manual_dir: str | None = None) -> dict[str, list[dict]]:
    """{split: instances} of `splits` of `arramon/<config>`, built first if needed; instances in
    their file / generator order. ValueError for an unknown config or a split it lacks."""
    config = ttw_tfds.builder_config(arramon_builder.Builder, config)
    prepare(config, tfds_dir, manual_dir)
    return arramon_builder.load_arramon(tfds_dir, config, splits=list(splits))
