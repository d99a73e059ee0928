"""TFDS helpers: the builders' ArrayRecord base class, building a dataset on first use and reading
its examples back without TensorFlow."""
from __future__ import annotations

import json

import tensorflow_datasets as tfds


class ArrayRecordBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """A `GeneratorBasedBuilder` that writes ArrayRecord unless told otherwise, so a plain
    `Builder(config=...).download_and_prepare()` works without TensorFlow and the result is read
    with `tfds.data_source`. An explicit `file_format`, or the format of a dataset already
    prepared in `data_dir`, wins."""

    def __init__(self, *, file_format=None, **kwargs):
        super().__init__(file_format=file_format, **kwargs)
        if file_format is None and not self.is_prepared():
            self.info.set_file_format(tfds.core.FileFormat.ARRAY_RECORD, override=True)


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


def prepared_sources(name: str, config, data_dir: str | None = None,
                     splits=None, prepare_with: str = "") -> dict:
    """{split: data source} of a prepared `<name>/<config>` (`config` a name or a config object),
    only `splits` if given (ValueError naming the available ones for a missing split);
    FileNotFoundError saying how to build it when it is not prepared (`prepare_with` names a
    function that does)."""
    config = getattr(config, "name", config)
    builder = tfds.builder(f"{name}/{config}", data_dir=data_dir)
    if not builder.is_prepared():
        raise FileNotFoundError(
            f"{name}/{config} is not prepared in {builder.data_dir}: build it first with "
            f"Builder(config={config!r}, data_dir=..., file_format='array_record')"
            f".download_and_prepare(download_config=tfds.download.DownloadConfig("
            f"manual_dir=...))" + (f" or {prepare_with}" if prepare_with else ""))
    sources = builder.as_data_source()
    if splits is not None:
        unknown = sorted(set(splits) - set(sources))
        if unknown:
            raise ValueError(f"{name}/{config} has no split(s) {unknown}; it has "
                             f"{sorted(sources)}")
        sources = {s: sources[s] for s in splits}
    return sources


def all_rows(source) -> list[dict]:
    """Every example of a data source, decoded in one call."""
    return list(source.__getitems__(list(range(len(source))))) if len(source) else []


def json_record(row) -> object:
    """The JSON `record` text field of a decoded example, decoded."""
    text = row["record"]
    return json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
