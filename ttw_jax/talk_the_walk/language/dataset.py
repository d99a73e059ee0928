"""Talk The Walk dialogues and maps of a `talk_the_walk` TFDS config, prepared on first use.

The synthetic config needs nothing; `synthetic_real_maps` and `real` need the official files in
`manual_dir` (see `ttw_datasets.talk_the_walk.talk_the_walk_dataset_builder`). Dialogues are the
validated episode dicts of `ttw_jax.talk_the_walk.language.dialogues`.
"""
from __future__ import annotations

from typing import Sequence

from ttw_datasets.talk_the_walk import talk_the_walk_dataset_builder as ttw_builder
from ttw_jax.core import tfds as ttw_tfds
from ttw_jax.talk_the_walk import maps


def prepare(config, tfds_dir: str | None = None, manual_dir: str | None = None) -> None:
    """Builds `talk_the_walk/<config>` (a name or a config object) in `tfds_dir` unless it is
    already there."""
    ttw_tfds.prepare(ttw_builder.Builder, config, tfds_dir, manual_dir)


def load_dialogues(config="synthetic", tfds_dir: str | None = None,
                   manual_dir: str | None = None, splits: Sequence[str] | None = None
                   ) -> tuple[dict[str, list[dict]], dict[str, maps.NeighborhoodMap]]:
    """(split -> dialogues, name -> NeighborhoodMap) of `talk_the_walk/<config>`, built first
    if needed; every split of `splits` (default train / valid / test), [] for one without
    dialogues. ValueError for an unknown config."""
    config = ttw_tfds.builder_config(ttw_builder.Builder, config)
    prepare(config, tfds_dir, manual_dir)
    return ttw_builder.load_talk_the_walk(tfds_dir, config, splits)
