"""TFDS helpers: the builders' ArrayRecord base class, building a dataset on first use and reading
its examples back without TensorFlow.

A dataset built from manual downloads records the files it was built from (`SOURCES_FILE` in its
version folder: each file's path under `manual_dir`, size and SHA-256); preparing it again from a
`manual_dir` whose files differ in content is refused with the changed files named, so a fixed or
replaced release never silently serves the old data, while the same bytes with a new modification
time (a copy, a re-download) are accepted. A file's hash is computed once and reused while its
stat (size, modification and change times) is the one recorded beside it: an edit always moves
the change time, even one that restores size and modification time. Folders a killed build left
behind (`incomplete.*`) are removed before building.

ArrayRecord files are written through local file descriptors only (they are read from `gs://`
too), so a `tfds_dir` on a bucket is built in a local temporary folder, then uploaded file by file,
`dataset_info.json` last: until it is there the dataset is not prepared, and a killed upload is
built and uploaded again.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile

import tensorflow_datasets as tfds
from absl import logging

from ttw_jax.core import paths

SOURCES_FILE = "ttw_sources.json"


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


def prepared_dir(builder_cls, config, tfds_dir: str | None = None) -> str:
    """The folder of the prepared `builder_cls` `config` (a name or a config object) in
    `tfds_dir` (None: the TFDS default)."""
    config = builder_config(builder_cls, config)
    return str(builder_cls(config=config, data_dir=tfds_dir).data_dir)


def file_sha256(path: paths.PathLike, chunk: int = 1 << 22) -> str:
    """Hex SHA-256 of a file's bytes (any `paths.resolve` path), read in 4 MiB chunks."""
    h = hashlib.sha256()
    with paths.resolve(path).open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def source_fingerprint(manual_dir: str, previous: dict | None = None) -> dict[str, list]:
    """{path under `manual_dir`: [size, mtime ns, ctime ns, sha256]} of every file in it (hidden
    ones skipped; `manual_dir` may be any `paths.resolve` path). A file whose size and times are
    those of its entry in `previous` (an earlier fingerprint) keeps that entry's hash unread."""
    previous = previous or {}
    out = {}
    for rel, st in paths.file_stats(manual_dir).items():
        st = list(st)
        old = previous.get(rel)
        reuse = old is not None and len(old) == 4 and list(old[:3]) == st
        out[rel] = st + [old[3] if reuse else file_sha256(paths.resolve(manual_dir) / rel)]
    return out


def fingerprint_changes(old: dict, new: dict, limit: int = 5) -> list[str]:
    """Human-readable differences between two `source_fingerprint`s (at most `limit`): files
    added, removed, or whose size or content differ. An entry of an older record without a hash
    ([size, mtime]) is compared by size and modification time."""
    def same(a, b):
        if len(a) == 4 and len(b) == 4:
            return a[0] == b[0] and a[3] == b[3]
        return list(a[:2]) == list(b[:2])
    changes = ([f"{p} added" for p in sorted(set(new) - set(old))]
               + [f"{p} removed" for p in sorted(set(old) - set(new))]
               + [f"{p} changed" for p in sorted(set(old) & set(new)) if not same(old[p], new[p])])
    return changes[:limit] + ([f"... {len(changes) - limit} more"] if len(changes) > limit else [])


def prepare(builder_cls, config, tfds_dir: str | None = None,
            manual_dir: str | None = None) -> None:
    """Builds `<name>/<config>` (a name or a config object) in `tfds_dir` (None: the TFDS
    default) unless it is already there; `manual_dir` holds the manual downloads. A dataset
    already built from other files than `manual_dir` holds now is refused (ValueError naming
    them and the folder to delete). With several JAX processes, process 0 alone builds and the
    others wait for it at a barrier (a shared data dir would otherwise race)."""
    import jax
    if jax.process_count() == 1:
        return _prepare(builder_cls, config, tfds_dir, manual_dir)
    from jax.experimental import multihost_utils
    if jax.process_index() == 0:
        _prepare(builder_cls, config, tfds_dir, manual_dir)
    multihost_utils.sync_global_devices(f"ttw prepare {builder_cls.name}/{config}")


def _prepare(builder_cls, config, tfds_dir, manual_dir) -> None:
    config = builder_config(builder_cls, config)
    builder = builder_cls(config=config, data_dir=tfds_dir, file_format="array_record")
    version_dir = paths.resolve(builder.data_dir)
    recorded = version_dir / SOURCES_FILE
    if builder.is_prepared():
        if manual_dir and recorded.exists():
            old = json.loads(recorded.read_text(encoding="utf-8"))
            sources = source_fingerprint(manual_dir, old)
            changes = fingerprint_changes(old, sources)
            if changes:
                raise ValueError(
                    f"{version_dir} was built from other files than {manual_dir} holds now "
                    f"({'; '.join(changes)}): delete that folder to rebuild it from them, or "
                    "choose another data.tfds_dir")
            if sources != old:   # new times, same content: record them (hashes reused next time)
                paths.write_text(recorded, json.dumps(sources))
        return
    sources = source_fingerprint(manual_dir) if manual_dir else None
    download_config = tfds.download.DownloadConfig(manual_dir=manual_dir)
    if paths.is_uri(version_dir):
        _build_and_upload(builder_cls, config, download_config, version_dir)
    else:
        parent = version_dir.parent
        if parent.is_dir():
            for leftover in parent.glob("incomplete.*"):
                logging.warning("removing %s, left by a killed build", leftover)
                leftover.rmtree(missing_ok=True)
        builder.download_and_prepare(download_config=download_config)
    if sources is not None:
        paths.write_text(version_dir / SOURCES_FILE, json.dumps(sources))


def _build_and_upload(builder_cls, config, download_config, version_dir) -> None:
    """Builds `config` in a local temporary folder and uploads its files to `version_dir` on a
    bucket, `dataset_info.json` last (module docstring)."""
    with tempfile.TemporaryDirectory(prefix="ttw_tfds_") as local:
        builder = builder_cls(config=config, data_dir=local, file_format="array_record")
        builder.download_and_prepare(download_config=download_config)
        built = os.fspath(builder.data_dir)
        names = sorted(os.path.relpath(os.path.join(d, f), built)
                       for d, _, files in os.walk(built) for f in files)
        for name in sorted(names, key=lambda n: n == "dataset_info.json"):
            with open(os.path.join(built, name), "rb") as f:
                paths.write_bytes(version_dir / name, f.read())


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
