"""What the RxR / R2R trainer reads, assembled from the release (or the synthetic builder): the
record sets of every split (languages, annotators, the train holdout, a second dataset for
multitask training), the Matterport graph and its geodesics, the vocabulary and padded episodes,
the view-feature table (converted once into a memory-mapped cache), and the training batches
(on-device sampling or a grain stream, each seed's own where they depend on it)."""
from __future__ import annotations

import os
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from ttw_jax.core import paths
from ttw_jax.core.stream import BatchStream, mixture_index
from ttw_jax.core.train import data_parallel as dp
from ttw_jax.core.train.run import splits
from ttw_jax.core.vocab import Vocabulary, token_limit
from ttw_jax.rxr import (dataset as rxr_data, episodes as rxr_episodes, evaluation as r2r_eval,
                         house, predictions, view_features, views)
from ttw_jax.rxr.graph import SOURCE_HINT, geodesic_table, list_scans, load_matterport_graph
from ttw_jax.rxr.records import hidden_splits
from ttw_jax.rxr.synthetic import node_landmarks

HOLDOUT = "train_holdout"   # dev split carved out of train (`data.holdout_every`)
SECOND_ROWS = 1 << 40   # streamed multitask: the second dataset's text-feature rows start here
SECOND = "multitask"    # the `dataset` tag of the second dataset's records
BATCH_KEYS = ("start", "heading", "path", "path_len", "gold", "tokens", "token_len",
              "text_features", "word_mask", "view_mask", "has_masks", "has_word_mask")


def view_feature_table(config: ml_collections.ConfigDict, graph, nodes) -> np.ndarray:
    """[N, 36, D] view features for the config's agent kind (D = 0: angles only), as the devices
    keep them (`views.device_table`: float32, or `data.feature_dtype=bfloat16`'s bits, half the
    memory of a large table on every device)."""
    d = config.data
    if config.model.name == "language_only" or not d.features:
        return views.empty_view_features(len(nodes))
    if d.features == "synthetic":
        landmarks = node_landmarks([i.split("/", 1)[1] for i in nodes.ids], d.num_landmarks)
        table = views.synthetic_view_features(graph, landmarks, d.num_landmarks, d.feature_dim,
                                              d.feature_noise, seed=config.seed)
    else:
        table = view_features.feature_table(d.features, nodes, features_cache(config),
                                            extra_viewpoints=d.features_extra_viewpoints)
    return views.device_table(table, d.feature_dtype)


def features_cache(config: ml_collections.ConfigDict) -> str:
    """Where TSV / HDF5 view features are converted: `data.features_cache`, else
    ~/.cache/ttw_jax/view_features (a local folder of each host: the cache is memory-mapped)."""
    return config.data.features_cache or os.path.expanduser("~/.cache/ttw_jax/view_features")


def load_records(config_name: str, wanted: Sequence[str], tfds_dir: str, manual_dir: str,
                 stream: bool) -> tuple[dict, dict]:
    """({split: records}, {split: read(row)} when streamed) of an `rxr` TFDS config."""
    if stream:
        return rxr_data.load_split_records_streamed(config_name, wanted, tfds_dir=tfds_dir or None,
                                                    manual_dir=manual_dir or None)
    return rxr_data.load_split_records(config_name, wanted, tfds_dir=tfds_dir or None,
                                       manual_dir=manual_dir or None), {}


def keep_languages(records: Sequence[dict], languages: Sequence[str]) -> list[dict]:
    """The records in `languages` (groups as the paper's tables give them, "en", "hi", "te", or
    locales, "en-IN"); all when empty."""
    if not languages:
        return list(records)
    return [r for r in records if r["language"] in languages
            or r2r_eval.language_group(r["language"]) in languages]


def evaluation_splits(config: ml_collections.ConfigDict) -> list[str]:
    """The splits reported: `data.eval_splits`, and with `data.multitask` the second dataset's
    `data.multitask_eval_splits` as `<config>/<split>`."""
    d = config.data
    return splits(d.eval_splits) + ([f"{d.multitask}/{s}" for s in splits(d.multitask_eval_splits)]
                                    if d.multitask else [])


def withheld(config: ml_collections.ConfigDict) -> set[str]:
    """The splits (as `evaluation_splits` names them) whose references the release withholds
    (`records.hidden_splits`): they get leaderboard predictions, never metrics."""
    d = config.data
    out = set(hidden_splits(d.tfds_config))
    if d.multitask:
        out |= {f"{d.multitask}/{s}" for s in hidden_splits(d.multitask)}
    return out


def load_data(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Graph, geodesics, view features, vocabulary and padded episodes of every named split (with
    `data.multitask` the second dataset's evaluation splits too, named `<config>/<split>`), the
    training mixture's row index, and with `eval.human` the follower and guide records of the
    evaluation splits."""
    d = config.data
    if not d.connectivity_dir:
        raise ValueError("set data.connectivity_dir to the directory of Matterport "
                         f"<scan>_connectivity.json files. {SOURCE_HINT}")
    wanted = sorted({d.train_split, d.dev_split, *splits(d.eval_splits)} - {HOLDOUT})
    manual = d.connectivity_dir if d.tfds_config == "synthetic" else d.manual_dir
    if d.stream and not d.text_features:
        raise ValueError("data.stream=True streams the text features: set "
                         "data.text_features=True (the other arrays fit in memory)")
    records, readers = load_records(d.tfds_config, wanted, d.tfds_dir, manual, d.stream)
    sources = {s: d.tfds_config for s in records}
    second_train = []
    if d.multitask:
        extra = splits(d.multitask_eval_splits)
        recs2, readers2 = load_records(d.multitask, ["train", *extra], d.tfds_dir,
                                       d.multitask_dir, d.stream)
        for s in extra:
            records[f"{d.multitask}/{s}"] = [dict(r, dataset=SECOND) for r in recs2[s]]
            sources[f"{d.multitask}/{s}"] = d.multitask
            if s in readers2:
                readers[f"{d.multitask}/{s}"] = readers2[s]
        second_train = [dict(r, dataset=SECOND) for r in recs2["train"]]
        if d.stream:   # one reader for the mixed train split: the second's rows shifted
            first, second = readers[d.train_split], readers2["train"]
            readers[d.train_split] = lambda row: (second(row - SECOND_ROWS) if row >= SECOND_ROWS
                                                  else first(row))
            second_train = [dict(r, text_features_row=r["text_features_row"] + SECOND_ROWS)
                            if r.get("text_features_row") is not None else r
                            for r in second_train]
    # the complete id set of each withheld split, before any filter: what its leaderboard takes
    complete = {s: predictions.leaderboard_ids(records[s]) for s in withheld(config)
                if s in records}
    if HOLDOUT in {d.dev_split, *splits(d.eval_splits)}:   # every holdout_every-th train path
        train_records = records[d.train_split]
        records[HOLDOUT] = [r for r in train_records if r["path_id"] % d.holdout_every == 0]
        readers[HOLDOUT] = readers.get(d.train_split)
        sources[HOLDOUT] = d.tfds_config
        records[d.train_split] = [r for r in train_records
                                  if r["path_id"] % d.holdout_every != 0]
    evaluated = sorted(set(records) - {d.train_split})
    languages_kept = splits(d.languages)
    records = {s: keep_languages(recs, languages_kept) for s, recs in records.items()}
    second_train = keep_languages(second_train, languages_kept)
    if d.train_annotators:
        who = splits(d.train_annotators)
        records[d.train_split] = [r for r in records[d.train_split] if r["annotator"] in who]
    # the human reference: the followers' paths against the guides', before the filter below
    human = {s: records[s] for s in evaluation_splits(config)} if config.eval.human else {}
    # Evaluation scores the paths of `data.eval_annotators` only (the paper: guides), whichever
    # annotators the model trains on.
    annotators = splits(d.eval_annotators)
    for s in evaluated:
        records[s] = rxr_data.evaluated_records(records[s], annotators)
        if not records[s]:
            raise ValueError(f"split {s!r} of rxr/{sources[s]} has no annotations by "
                             f"{annotators} (data.eval_annotators) in languages "
                             f"{languages_kept or 'all'} (data.languages)")
    train_records = records[d.train_split] + second_train
    if not train_records:
        raise ValueError(f"the train split {d.train_split!r} of rxr/{d.tfds_config} has no "
                         f"records left (data.languages={d.languages!r}, "
                         f"data.train_annotators={d.train_annotators!r})")
    records[d.train_split] = train_records
    all_splits = sorted(records)
    scans = sorted({r["scan"] for s in all_splits for r in records[s]})
    languages = sorted({r["language"] for s in all_splits for r in records[s]})
    # 0: as long as the longest reference path of the loaded splits
    max_path = d.max_path if d.max_path > 0 else max(len(r["path"]) for s in all_splits
                                                     for r in records[s])

    def locate(split):   # an error about a record names its file and line (or entry)
        base = d.train_split if split == HOLDOUT else split.split("/", 1)[-1]

        def where(rec):
            second = rec.get("dataset") == SECOND
            return rxr_data.record_location(d.multitask if second else d.tfds_config, base, rec,
                                            (d.multitask_dir if second else manual) or None)
        return where

    def text_features_at(split):   # where preparing the dataset looked for a record's features
        base = d.train_split if split == HOLDOUT else split.split("/", 1)[-1]

        def looked(rec):
            folder = d.multitask_dir if rec.get("dataset") == SECOND else manual
            return rxr_data.text_features_paths(base, rec, folder) if folder else []
        return looked
    known = set(list_scans(d.connectivity_dir))
    for s in all_splits:     # a scan without a graph is named by its record, not the graph file
        rec = next((r for r in records[s] if r["scan"] not in known), None)
        if rec is not None:
            raise ValueError(f"{locate(s)(rec)}: field 'scan': {rec['scan']!r} has no "
                             f"connectivity file in {d.connectivity_dir} (expected "
                             f"{rec['scan']}_connectivity.json)")
    graph, nodes, scan_of = load_matterport_graph(d.connectivity_dir, scans)
    vocab = Vocabulary.load_or_build(
        paths.resolve(workdir) / "vocab.json", (r["instruction"] for r in train_records),
        save=jax.process_index() == 0)
    max_tokens = text_limit(d, records)
    episodes = {s: rxr_episodes.episodes(
        records[s], nodes, graph, vocab, languages, max_tokens, max_path, d.text_features,
        locate=locate(s), read_text_features=readers.get(s), split=s,
        text_features_at=text_features_at(s))
        for s in all_splits}
    distances = "connectivity poses"
    metric_graph = graph
    if d.house_dir:
        centres = house.panorama_centres(d.house_dir, nodes, scans)
        metric_graph = graph.replace(lengths=house.edge_lengths(graph, centres))
        distances = "house panorama centres"
    mixture = sizes = None
    if d.multitask and d.multitask_share >= 0:
        sizes = (len(train_records) - len(second_train), len(second_train))
        mixture = mixture_index(*sizes, d.multitask_share, config.seed)
    return dict(graph=graph, nodes=nodes, geodesic=geodesic_table(metric_graph, scan_of),
                vocab=vocab, languages=languages, episodes=episodes, max_path=max_path,
                max_tokens=max_tokens,
                features=view_feature_table(config, graph, nodes), human=human,
                distances=distances, mixture=mixture, mixture_sizes=sizes, sources=sources,
                complete_ids=complete)


def text_limit(d: ml_collections.ConfigDict, records: dict) -> int:
    """The instructions' padded length: `data.max_tokens` when positive (longer ones are cut
    with a warning), else (0) the longest instruction of `records` ({split: [record]}), in
    tokens, or in text-feature subwords with `data.text_features`."""
    if d.max_tokens > 0:
        return d.max_tokens
    recs = [r for rs in records.values() for r in rs]
    if not d.text_features:
        return token_limit(0, (r["instruction"] for r in recs))
    lengths = [int(r["text_features_len"]) if r.get("text_features_len") is not None
               else len(r["text_features"]) for r in recs
               if r.get("text_features_len") is not None or r.get("text_features") is not None]
    return max(lengths + [1])


def seed_inputs(config: ml_collections.ConfigDict, data: dict, shared, loaded_seed: int,
                replicate: Callable) -> tuple:
    """(view features on the devices, the multitask mixture's row index) of `config`'s seed.
    `data` was loaded for `loaded_seed`, its features put on the devices as `shared`: synthetic
    features and the mixture of another seed are drawn from that seed."""
    same = config.seed == loaded_seed
    features = (shared if same or config.data.features != "synthetic" else
                replicate(jnp.asarray(view_feature_table(config, data["graph"], data["nodes"]))))
    mixture = data["mixture"]
    if mixture is not None and not same:
        mixture = mixture_index(*data["mixture_sizes"], config.data.multitask_share, config.seed)
    return features, mixture


def train_sampler(config: ml_collections.ConfigDict, train_eps: dict, mixture, names, mesh):
    """The training batches: this process's rows of each batch read by grain's threads
    (`data.stream`, shuffled by `config.seed`), else drawn on the devices from the step's key;
    both from the rows `mixture` lists (the multitask mixture) when given."""
    if config.data.stream:
        keys = [k for k in BATCH_KEYS if k in train_eps]
        stream = BatchStream.of_rows(train_eps, keys, config.batch_size, config.seed,
                                     config.data.stream_threads, index=mixture)
        return dp.StreamSampler(stream, mesh, names)
    return dp.episode_sampler({k: train_eps[k] for k in BATCH_KEYS if k in train_eps},
                              config.batch_size, mesh, index=mixture, names=names)
