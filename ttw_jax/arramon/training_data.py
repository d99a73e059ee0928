"""What the ArraMon trainer reads, assembled from the release (or the synthetic builder): the
instances of every split (a split partitioned by map where the release ships too few), the
vocabulary, padded episodes and walkable maps, and, for runs on the release's recorded views,
their features packed into a memory-mapped cache and read as teacher-forcing rows."""
from __future__ import annotations

import os
import zlib
from typing import Sequence

import jax
import ml_collections

from ttw_datasets.arramon import arramon_dataset_builder as arramon_builder
from ttw_jax.arramon import (dataset as arramon_data, episodes as ae, features as arramon_features,
                             render)
from ttw_jax.core import paths
from ttw_jax.core.train.run import splits
from ttw_jax.core.vocab import Vocabulary, token_limit

PARTITIONS = ("partition_train", "partition_dev", "partition_test")
TF_KEYS = tuple(f"{p}_{k}" for p in arramon_features.PHASES
                for k in ("tokens", "token_len", "actions", "len", "feats"))


def partition(records: Sequence[dict], fractions: Sequence[float]) -> dict[str, list[dict]]:
    """{partition_train, partition_dev, partition_test}: records split by crc32 of `mapId`
    (stable across runs and machines; every official split has it, and instances of one map
    stay together) with the given (train, dev) fractions."""
    lo, hi = round(100 * fractions[0]), round(100 * (fractions[0] + fractions[1]))
    out: dict[str, list[dict]] = {name: [] for name in PARTITIONS}
    for r in records:
        bucket = zlib.crc32(str(r["mapId"]).encode()) % 100
        out[PARTITIONS[0 if bucket < lo else 1 if bucket < hi else 2]].append(r)
    return out


def load_records(d: ml_collections.ConfigDict, wanted) -> tuple[dict, dict]:
    """({split: instances} for the `wanted` splits of config.data `d` (partitions included),
    {split: the split whose walkable map it uses})."""
    sources = sorted({s for s in wanted if s not in PARTITIONS}
                     | ({d.partition_split} if d.partition_split else set()))
    records = arramon_data.load_split_records(d.tfds_config, sources, tfds_dir=d.tfds_dir or None,
                                              manual_dir=d.manual_dir or None)
    walk_source = {s: s for s in sources}
    if d.partition_split:
        records.update(partition(records[d.partition_split], d.partition))
        walk_source.update({p: d.partition_split for p in PARTITIONS})
        check_partitions(d, records, wanted)
    elif any(s in PARTITIONS for s in wanted):
        raise ValueError("partition_* splits need config.data.partition_split")
    return records, walk_source


def split_file(d: ml_collections.ConfigDict, split: str) -> str:
    """Where config.data `d`'s `split` comes from: its file in `data.manual_dir`, or the
    synthetic generator's split."""
    if d.tfds_config == "synthetic":
        return f"the synthetic {split} split (seed {arramon_data.synthetic_seed(split)})"
    name = arramon_builder.MANUAL_FILES[d.tfds_config][split]
    return os.path.join(d.manual_dir, name) if d.manual_dir else \
        f"{name} of the prepared arramon/{d.tfds_config}"


def check_partitions(d: ml_collections.ConfigDict, records: dict, wanted) -> None:
    """ValueError naming the partition, the split file, the fractions and the instance count
    when a partition the run uses (`wanted`) holds no instance (a small file)."""
    for name in PARTITIONS:
        if name in wanted and not records[name]:
            n = len(records[d.partition_split])
            raise ValueError(
                f"{name} is empty: data.partition={tuple(d.partition)} (train, dev; test the "
                f"rest) puts none of the {n} instances of {split_file(d, d.partition_split)} "
                f"(data.partition_split={d.partition_split!r}) in it (instances go by crc32 "
                "of mapId, a map's instances together); use a larger file, other fractions or "
                "another split for it (e.g. data.dev_split=val_seen)")


def load_data(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Vocabulary, padded episodes and walkable maps of every split the config names."""
    d = config.data
    wanted = sorted({d.train_split, d.dev_split, *splits(d.eval_splits)})
    records, walk_source = load_records(d, wanted)
    if d.vocab_file:
        vocab = ae.read_vocab_file(vocab_path(d))
    else:
        vocab = Vocabulary.load_or_build(
            paths.resolve(workdir) / "vocab.json",
            (s for r in records[d.train_split] for key in ("navi_inst_gt", "assem_inst_gt")
             for s in r["instructions"][key]), save=jax.process_index() == 0)
    # The walkable map belongs to the source split (a partition shares its split's map).
    maps = {s: ae.walkable_for(records[s]) for s in sorted(set(walk_source[w] for w in wanted))}
    max_tokens = token_limit(d.max_tokens, (t for s in wanted for r in records[s]
                                            for key in ("navi_inst_gt", "assem_inst_gt")
                                            for t in r["instructions"][key]))
    episodes, walkable = {}, {}
    for s in wanted:
        src = walk_source[s]
        walk, index = maps[src]
        if src != s:                  # a partition: map indices of its records in the source
            pos = {id(r): i for i, r in enumerate(records[src])}
            index = index[[pos[id(r)] for r in records[s]]]
        episodes[s] = ae.episodes(records[s], vocab, max_tokens, d.max_objects, index,
                                  truncation(config))
        walkable[s] = walk
        if uses_features(config):
            add_features(episodes[s], walk, records[s], d)
        if rendered_views(config):
            episodes[s].update(render.demonstration_keys(walk, episodes[s]))
    return dict(vocab=vocab, episodes=episodes, walkable=walkable,
                records={s: records[s] for s in wanted}, max_tokens=max_tokens)


def vocab_path(d: ml_collections.ConfigDict) -> str:
    """`data.vocab_file`: a bare file name ("na_vocab.txt") is read from `data.manual_dir`, where
    the release keeps it beside train.json; any other path as given."""
    f = d.vocab_file
    return os.path.join(d.manual_dir, f) if d.manual_dir and os.path.basename(f) == f else f


def truncation(config: ml_collections.ConfigDict) -> str:
    """How an instruction longer than `data.max_tokens` is treated: nothing reads the text in
    `baselines` mode ("ignore"); the release's instructions are never cut ("error", naming the
    longest); synthetic ones are cut with a warning."""
    if config.mode == "baselines":
        return "ignore"
    return "warn" if config.data.tfds_config == "synthetic" else "error"


def uses_features(config: ml_collections.ConfigDict) -> bool:
    """Does the run read the release's recorded image features (`data.features_dir`, a model
    with vision)? L/O and the baselines see nothing."""
    return bool(config.data.features_dir) and config.mode == "train" and config.model.name != "lo"


def symbolic_views(config: ml_collections.ConfigDict) -> bool:
    """Does the agent see the simulator's symbolic views (`views`), a synthetic stand-in for the
    release's images: a trained V/L or V/O without `data.features_dir`."""
    return (config.mode == "train" and config.model.name != "lo" and not config.data.features_dir
            and not config.data.rendered_views)


def rendered_views(config: ml_collections.ConfigDict) -> bool:
    """Does the agent see rendered image features (`ttw_jax.arramon.render`, synthetic cities
    only): a trained V/L or V/O with `data.rendered_views`, evaluated with the true view at its
    own pose and, as a second row, with the nearest recorded pose's view (the proxy of runs on
    the release's features)."""
    return (config.mode == "train" and config.model.name != "lo" and config.data.rendered_views
            and not config.data.features_dir)


def add_features(ep: dict, walkable, records: Sequence[dict], d: ml_collections.ConfigDict):
    """Adds a split's recorded features to its episodes (`ttw_jax.arramon.features`): per
    phase `{phase}_feats` [N, 2, T, 49, 2048] float16 (rows read from the packed cache when
    indexed), `{phase}_feat_pose` [N, 2, T, 3] and `{phase}_recorded` [N, 2, T], T the split's
    padded action length; keeps the packed store as `_packed`. The feature poses are the
    replayed demonstration's, or the recorded ones where these differ (`merge_recorded`; logged).
    The pack is a local memory map: with `data.tfds_dir` on a bucket it defaults to
    ~/tensorflow_datasets/arramon_features."""
    local_tfds = d.tfds_dir if d.tfds_dir and paths.is_local(d.tfds_dir) else ""
    cache = d.features_cache or os.path.join(
        local_tfds or os.path.expanduser("~/tensorflow_datasets"), "arramon_features")
    packed = arramon_features.pack(d.features_dir, records,
                                   {"navi": ep["navi_len"], "assem": ep["assem_len"]}, cache,
                                   d.missing_feature, progress=jax.process_index() == 0)
    poses = arramon_features.demonstration_poses(walkable, ep)
    counts = {}
    for phase in arramon_features.PHASES:
        horizon = ep[f"{phase}_actions"].shape[-1]
        ep[f"{phase}_feats"] = packed.episode_rows(phase, horizon)
        ep[f"{phase}_feat_pose"], counts[phase] = arramon_features.merge_recorded(
            poses[phase], packed.recorded_poses(phase, horizon),
            arramon_features.heading_base(phase, ep["psi0"]))
        ep[f"{phase}_recorded"] = packed.recorded_mask(phase, horizon)
    ep["_packed"] = packed
    if jax.process_index() == 0:
        print(arramon_features.recorded_pose_note(counts, packed.ignored))


def feature_turn_examples(ep: dict) -> dict:
    """`episodes.turn_examples` of a split with features, plus `{phase}_feats` [2N, T, 49,
    2048] rows (read on indexing) for teacher forcing over the recorded views."""
    ex = ae.turn_examples({k: v for k, v in ep.items() if not k.startswith("_")})
    for phase in arramon_features.PHASES:
        ex[f"{phase}_feats"] = ep["_packed"].turn_rows(phase, ep[f"{phase}_actions"].shape[-1])
    return ex
