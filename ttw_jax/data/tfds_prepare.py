"""Building a TFDS dataset of this project on first use (ArrayRecord, no TensorFlow)."""
from __future__ import annotations

import tensorflow_datasets as tfds


def builder_config(builder_cls, config):
    """The `config` argument for `builder_cls`: a config object as it is, a known config name
    as it is; ValueError naming the known configs otherwise."""
    if isinstance(config, tfds.core.BuilderConfig):
        return config
    if config not in builder_cls.builder_configs:
        raise ValueError(f"unknown {builder_cls.name} config {config!r}; choose from "
                         f"{sorted(builder_cls.builder_configs)}")
    return config


def prepare(builder_cls, config, tfds_dir: str | None = None,
            manual_dir: str | None = None) -> None:
    """Builds `<name>/<config>` (a name or a config object) in `tfds_dir` (None: the TFDS
    default) unless it is already there; `manual_dir` holds the manual downloads."""
    builder = builder_cls(config=builder_config(builder_cls, config), data_dir=tfds_dir,
                          file_format="array_record")
    if not builder.is_prepared():
        builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
            manual_dir=manual_dir))
