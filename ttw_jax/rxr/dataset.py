"""RxR / R2R instruction records of an `rxr` TFDS config, prepared on first use.

The synthetic configs need the Matterport `<scan>_connectivity.json` files as `manual_dir`; the
RxR configs the official `rxr_{split}_{guide,follower}.jsonl.gz` files and the r2r config the
`R2R_{split}.json` files (see `ttw_datasets.rxr.rxr_dataset_builder`). Records are the dicts of
`ttw_jax.rxr.records`.
"""
from __future__ import annotations

import os
from typing import Sequence

from ttw_datasets.rxr import rxr_dataset_builder as rxr_builder
from ttw_jax.core import paths, records as core
from ttw_jax.core import tfds as ttw_tfds
from ttw_jax.rxr import records as rr


def prepare(config, tfds_dir: str | None = None, manual_dir: str | None = None) -> None:
    """Builds `rxr/<config>` (a name or a config object) in `tfds_dir` unless it is already
    there."""
    ttw_tfds.prepare(rxr_builder.Builder, config, tfds_dir, manual_dir)


def load_split_records(config, splits: Sequence[str], tfds_dir: str | None = None,
                       manual_dir: str | None = None) -> dict[str, list[dict]]:
    """{split: records} of `splits` of `rxr/<config>`, built first if needed; records sorted by
    (instruction_id, annotator). ValueError for an unknown config or a split it lacks."""
    config = ttw_tfds.builder_config(rxr_builder.Builder, config)
    prepare(config, tfds_dir, manual_dir)
    return rxr_builder.load_rxr(tfds_dir, config, splits=list(splits))


def load_split_records_streamed(config, splits: Sequence[str], tfds_dir: str | None = None,
                                manual_dir: str | None = None):
    """`load_split_records` without the text features in memory: ({split: records},
    {split: read(row) -> [m, D] bfloat16}); see `rxr_dataset_builder.load_rxr_streamed`."""
    config = ttw_tfds.builder_config(rxr_builder.Builder, config)
    prepare(config, tfds_dir, manual_dir)
    return rxr_builder.load_rxr_streamed(tfds_dir, config, splits=list(splits))


RXR_ANNOTATORS = ("guide", "follower")


def record_location(config, split: str, rec: dict, manual_dir: str | None = None) -> str:
    """Where a record of `split` comes from, for an error message: `{file}: entry {i}` of
    `R2R_{split}.json` or `{file}:{line}` of the split's RxR guide / follower file in
    `manual_dir`, else `rxr/{config}:{split}` (synthetic data, or no manual files at hand).
    Reads the file once per call: meant for the one record an error is about."""
    name = getattr(config, "name", config)
    if manual_dir:
        if rec["annotator"] == "r2r":
            path = os.path.join(manual_dir, rxr_builder.R2R_FILES.get(split, ""))
            if paths.isfile(path):
                entries = core.read_json(path)
                for i, entry in enumerate(entries if isinstance(entries, list) else []):
                    if isinstance(entry, dict) and entry.get("path_id") == rec["path_id"]:
                        return f"{path}: entry {i}"
        elif rec["annotator"] in RXR_ANNOTATORS:
            path = rr.find_rxr_file(manual_dir, split, rec["annotator"])
            if path is not None:
                for where, _, raw in core.read_jsonl(path):
                    if raw.get("instruction_id") == rec["instruction_id"]:
                        return where
    return f"rxr/{name}:{split}"


def text_features_paths(split: str, rec: dict, manual_dir: str) -> list[str]:
    """The paths, in `manual_dir`, that preparing the dataset looks for `rec`'s text features at
    (`records.text_features_candidates`: an RxR record's under `text_features/rxr_{split}/`
    first, an R2R record's under `text_features/`), for an error message."""
    if rec["annotator"] == "r2r":
        return rr.text_features_candidates(manual_dir, rec["instruction_id"], "en")
    return rr.text_features_candidates(manual_dir, rec["instruction_id"], rec["language"], split)


def evaluated_records(records: Sequence[dict], annotators: Sequence[str]) -> list[dict]:
    """The records an evaluation scores: of the RxR annotations only those by `annotators` (a
    non-empty subset of guide / follower; the paper evaluates the guides' paths), R2R and
    synthetic records always."""
    if not annotators or not set(annotators) <= set(RXR_ANNOTATORS):
        raise ValueError(f"evaluated annotators must be a non-empty subset of {RXR_ANNOTATORS}, "
                         f"got {tuple(annotators)}")
    return [r for r in records
            if r["annotator"] not in RXR_ANNOTATORS or r["annotator"] in annotators]
