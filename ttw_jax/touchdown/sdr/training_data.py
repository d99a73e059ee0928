"""What the SDR trainer reads (`experiments/touchdown_sdr`): the prepared dataset's splits, or
the release's records with their `features/<panoid>.npy` files streamed (`data.stream`), the tune
part held out of train, the vocabulary (ours, or an official checkpoint's) and the encoded
descriptions."""
from __future__ import annotations

from typing import Sequence

import jax
import ml_collections
import numpy as np

from ttw_datasets.touchdown import touchdown_dataset_builder as td_builder
from ttw_jax.core import paths
from ttw_jax.core.vocab import Vocabulary, token_limit
from ttw_jax.touchdown import records as td_records
from ttw_jax.touchdown.dataset import prepare
from ttw_jax.touchdown.sdr import stream as stream_sdr
from ttw_jax.touchdown.sdr.official import OfficialVocabulary


def split_tune(split: dict, fraction: float, seed: int) -> tuple[dict, dict]:
    """Holds out `fraction` of the descriptions (all views of a description stay together)."""
    ids = np.unique(split["route_id"])
    rng = np.random.default_rng(seed)
    tune_ids = rng.choice(ids, max(1, int(round(fraction * len(ids)))), replace=False)
    tune = np.isin(split["route_id"], tune_ids)
    take = lambda mask: {k: (v[mask] if isinstance(v, np.ndarray) else
                             [x for x, m in zip(v, mask) if m]) for k, v in split.items()}
    return take(~tune), take(tune)


def feature_shape(config: ml_collections.ConfigDict) -> tuple[int, int, int]:
    """`data.feature_shape` ("H,W,C") as ints."""
    try:
        shape = tuple(int(x) for x in config.data.feature_shape.split(","))
    except ValueError:
        shape = ()
    if len(shape) != 3 or min(shape) <= 0:
        raise ValueError(f"data.feature_shape must be 'H,W,C' (3 positive ints), got "
                         f"{config.data.feature_shape!r}")
    return shape


def streamed_splits(config: ml_collections.ConfigDict, evals: Sequence[str]) -> dict:
    """`data.stream`: {split: view table} read from the official records in `data.manual_dir`,
    features a `panorama_rows` over its `features/<panoid>.npy` files (each panorama once),
    `feature_file` each view's file."""
    d = config.data
    if not d.manual_dir:
        raise ValueError("data.stream=True reads the official SDR release: set data.manual_dir to "
                         "the folder of train.json / dev.json / test.json and "
                         "features/<panoid>.npy")
    records = td_builder.manual_split_records(d.manual_dir, sdr=True)
    missing = [s for s in ["train", *evals] if s not in records]
    if missing:
        raise ValueError(f"{d.manual_dir} has no record file(s) of split(s) {missing}; it has "
                         f"{sorted(records)}")
    views = {s: [v for r in records[s] for v in td_records.sdr_examples(r)]
             for s in ["train", *evals]}
    shape = feature_shape(config)
    files = td_builder.feature_files(d.manual_dir, (v["panoid"] for vs in views.values()
                                                    for v in vs), shape)
    tables, pano_files = stream_sdr.view_tables(views, files)
    splits = dict(zip(("train", "tune"), split_tune(tables["train"], d.tune_fraction,
                                                    config.seed)))
    splits.update({s: tables[s] for s in evals})
    for s in splits.values():
        s["features"] = stream_sdr.panorama_rows(pano_files, s["pano"], shape)
        s["feature_file"] = [pano_files[p] for p in s["pano"]]   # what a non-finite run names
    return splits


def load_prepared(config: ml_collections.ConfigDict) -> dict:
    """{split: arrays} of the prepared dataset `data.tfds_config` (train and `data.eval_splits`),
    prepared first where needed."""
    d = config.data
    evals = [s for s in d.eval_splits.split(",") if s]
    prepare(d.tfds_config, d.tfds_dir or None, d.manual_dir or None)
    raw = td_builder.load_sdr(d.tfds_dir or None, d.tfds_config)
    missing = [s for s in ["train", *evals] if s not in raw]
    if missing:
        raise ValueError(f"touchdown/{d.tfds_config} has no split(s) {missing}; it has "
                         f"{sorted(raw)}")
    return raw


def load_data(config: ml_collections.ConfigDict, workdir: str, raw: dict | None = None) -> dict:
    """{split: arrays} with features [E, H, W, C] (float16; a `LazyRows` with `data.stream`),
    center [E, 2], tokens [E, L], token_len [E], route_id [E]; 'train' and 'tune' come from the
    train split (the tune part drawn from `config.seed`); with the vocabulary (built on that
    train part) and `max_tokens` = L (`data.max_tokens`, or 0: the longest description of the
    splits). `raw`: `load_prepared`'s splits, when already read (one read for every seed)."""
    d = config.data
    evals = [s for s in d.eval_splits.split(",") if s]
    if d.stream:
        splits = streamed_splits(config, evals)
    else:
        raw = load_prepared(config) if raw is None else raw
        splits = dict(zip(("train", "tune"), split_tune(raw["train"], d.tune_fraction,
                                                        config.seed)))
        splits.update({s: raw[s] for s in evals})
    if config.model.checkpoint:   # the embedding rows follow the official loader's vocabulary
        vocab = official_vocabulary(d.manual_dir)
    else:
        vocab = Vocabulary.load_or_build(paths.resolve(workdir) / "vocab.json",
                                         splits["train"]["text"], save=jax.process_index() == 0)
    out = {}
    max_tokens = token_limit(d.max_tokens, (t for s in splits.values() for t in s["text"]))
    # the release's descriptions are never cut (an error names the longest); synthetic ones warn
    truncate = "warn" if d.tfds_config.startswith("synthetic") and not d.stream else "error"
    for name, s in splits.items():
        tokens, token_len = vocab.encode(s["text"], max_tokens,
                                         f"{name} descriptions (data.max_tokens)", truncate)
        out[name] = dict(features=s["features"], center=np.asarray(s["center"], np.float32),
                         tokens=tokens, token_len=token_len, route_id=np.asarray(s["route_id"]),
                         text=list(s["text"]),
                         **{k: np.asarray(s[k]) for k in ("which", "panoid", "feature_file")
                            if k in s})
    return dict(splits=out, vocab=vocab, max_tokens=max_tokens)


def official_vocabulary(manual_dir: str) -> OfficialVocabulary:
    """The vocabulary of an official checkpoint: the official loader's, rebuilt from the train
    and dev descriptions of the release's record files in `manual_dir`, in file order."""
    if not manual_dir:
        raise ValueError("model.checkpoint (an official LingUNet) needs data.manual_dir: the "
                         "release's train.json and dev.json give its vocabulary")
    views = record_views(manual_dir)
    missing = [s for s in ("train", "dev") if s not in views]
    if missing:
        raise FileNotFoundError(f"model.checkpoint: the official vocabulary is built from "
                                f"train.json and dev.json, and {manual_dir} lacks "
                                f"{[s + '.json' for s in missing]}")
    return OfficialVocabulary([*views["train"]["text"], *views["dev"]["text"]])


def record_views(manual_dir: str) -> dict[str, dict]:
    """{split: {center [E, 2], route_id [E], text}} of the views in which Touchdown is visible,
    from the official record files in `manual_dir` (no features needed)."""
    out = {}
    for split, recs in td_builder.manual_split_records(manual_dir, sdr=True).items():
        views = [v for r in recs for v in td_records.sdr_examples(r)]
        out[split] = {"center": np.array([[v["center_x"], v["center_y"]] for v in views]),
                      "route_id": np.array([v["route_id"] for v in views]),
                      "text": [v["td_location_text"] for v in views]}
    return out
