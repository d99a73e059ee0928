"""ArraMon instances of an `arramon` TFDS config, prepared on first use.

The synthetic config needs nothing; `english` and `hindi` need the official files in
`manual_dir` (see `ttw_datasets.arramon.arramon_dataset_builder`). Instances are the validated
dicts of `ttw_jax.arramon.records`.
"""
from __future__ import annotations

from typing import Sequence

from ttw_datasets.arramon import arramon_dataset_builder as arramon_builder
from ttw_jax.core import tfds as ttw_tfds

# Splits of the release whose references are withheld: the authors keep test_unseen for a
# leaderboard (the paper, section 7; the official README: "Please contact arramonunc@gmail.com
# for the test split"). Such a split gets predictions files, never metrics. The synthetic
# generator's test_unseen has its references.
HIDDEN_SPLITS = ("test_unseen",)


def hidden_splits(config: str) -> tuple[str, ...]:
    """The hidden splits of the `arramon/<config>` instances: HIDDEN_SPLITS for the release's
    (english, hindi), none for the synthetic ones."""
    return () if config == "synthetic" else HIDDEN_SPLITS


def synthetic_seed(split: str) -> int:
    """The generator seed of a split of the synthetic config (its training split: 0)."""
    seeds = {name: seed for name, _, seed in
             arramon_builder.Builder.builder_configs["synthetic"].synthetic_splits}
    return seeds[split]


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
