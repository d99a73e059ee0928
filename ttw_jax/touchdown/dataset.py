"""Touchdown records of a TFDS config together with the graph they live on.

The `touchdown` TFDS dataset is prepared on first use (synthetic configs need nothing; the
official configs need the record files in `manual_dir`). Synthetic configs come with their
synthetic street grid; the official ones need the real graph (`graph_dir`).
"""
from __future__ import annotations

import functools
import os
from typing import Callable

from ttw_datasets.touchdown import touchdown_dataset_builder as td_builder
from ttw_jax.core import records as core
from ttw_jax.core import tfds as ttw_tfds
from ttw_jax.core.pano_graph import NodeTable, PanoGraph
from ttw_jax.core.train import provenance as prov
from ttw_jax.touchdown.graph import SOURCE_HINT, LinkRow, compile_touchdown, read_graph_files
from ttw_jax.touchdown.records import check_panoids


def prepare(config: str, tfds_dir: str | None = None, manual_dir: str | None = None) -> None:
    """Builds `touchdown/<config>` in `tfds_dir` unless it is already there."""
    ttw_tfds.prepare(td_builder.Builder, config, tfds_dir, manual_dir)


def is_synthetic(config: str) -> bool:
    """Whether `touchdown/<config>` is generated rather than read from a release (an unknown
    name counts as a release: loading it names the known configs)."""
    cfg = td_builder.Builder.builder_configs.get(config)
    return cfg is not None and cfg.synthetic


def data_provenance(config: str, seed: int, tfds_dir: str | None = None,
                    manual_dir: str | None = None, graph_dir: str | None = None) -> dict:
    """The provenance `data` entry of a run on `touchdown/<config>`: synthetic (`seed`), or the
    release folder `manual_dir` (without it, the prepared dataset's folder in `tfds_dir`), with
    the graph folder under "graph" when one was read."""
    if is_synthetic(config):
        return prov.synthetic_data(seed)
    out = prov.release_data(manual_dir or ttw_tfds.prepared_dir(td_builder.Builder, config,
                                                                tfds_dir))
    if graph_dir:
        out["graph"] = prov.release_data(graph_dir)
    return out


def record_location(manual_dir: str, split: str, rec) -> str:
    """`{file}:{line}` of the route `rec` in the official file of `split` in `manual_dir` (read
    once per call: meant for the one record an error is about); the file alone if not found."""
    path = os.path.join(manual_dir, td_builder.MANUAL_FILES[split])
    for where, _, raw in core.read_jsonl(path):
        if raw.get("route_id") == rec["route_id"]:
            return where
    return path


def locator(config: str, split: str, manual_dir: str | None
            ) -> Callable[[dict], str] | None:
    """`record_location` for the records of `split` of an official config built from
    `manual_dir`; None for a synthetic config or without the files."""
    if not manual_dir or td_builder.Builder.builder_configs[config].synthetic:
        return None
    return functools.partial(record_location, manual_dir, split)


def load_touchdown_split_records(config: str, splits, tfds_dir: str | None = None,
                                 manual_dir: str | None = None, graph_dir: str | None = None
                                 ) -> tuple[PanoGraph, NodeTable, list[LinkRow], dict]:
    """(host graph, node table, links rows, {split: navigation records}) for a TFDS config."""
    ttw_tfds.builder_config(td_builder.Builder, config)
    cfg = td_builder.Builder.builder_configs[config]
    if cfg.task != "navigation":
        raise ValueError(f"touchdown/{config} holds SDR examples, not navigation routes")
    prepare(config, tfds_dir, manual_dir)
    records = td_builder.load_navigation(tfds_dir, config)
    missing = [s for s in splits if s not in records]
    if missing:
        raise ValueError(f"touchdown/{config} has no split(s) {missing}; it has {sorted(records)}")
    if cfg.synthetic:
        nodes, links = cfg.grid()
        where = f"synthetic grid of touchdown/{config}"
    else:
        if not graph_dir:
            raise ValueError(f"touchdown/{config} needs the real graph: set graph_dir to the "
                             f"directory holding nodes.txt and links.txt. {SOURCE_HINT}")
        nodes, links = read_graph_files(graph_dir)
        where = os.path.join(graph_dir, "links.txt")
    graph, table = compile_touchdown(nodes, links, where=where)
    for split in splits:
        check_panoids(records[split], table.index, f"touchdown/{config}:{split}",
                      locator(config, split, manual_dir))
    return graph, table, links, {s: records[s] for s in splits}
