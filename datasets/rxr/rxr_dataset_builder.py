"""TFDS builder `rxr`: RxR and R2R navigation instructions on Matterport3D, one example per
instruction (the record form of `ttw_jax.rxr.records`).

Configs:
- `synthetic` (default): templated instructions on paths of real Matterport3D graphs
  (`ttw_jax.rxr.synthetic`), English (en-US) and Hindi (hi-IN); the manual directory holds
  the `<scan>_connectivity.json` files (or has them under `connectivity/`). Splits from
  `synthetic_sizes` (default train / val_seen on `synthetic_train_scans`, val_unseen on
  `synthetic_unseen_scans`).
- `guide` (all languages), `guide_en` (en-IN, en-US), `guide_hi` (hi-IN), `guide_te` (te-IN),
  `follower`, `guide_follower`: the official RxR annotations in the manual directory,
  `rxr_{split}_{guide,follower}.jsonl.gz` (or `.jsonl`; the test file may keep its release name
  `rxr_test_standard_public_guide.jsonl.gz`) for split in train, val_seen, val_unseen,
  test_standard; the splits are the files present. Optional per-annotation pose traces
  (`pose_traces/[rxr_{split}/]{id:06d}_{guide|follower}_pose_trace.npz`) give the word / view
  masks, optional `text_features/rxr_{split}/{instruction_id:06d}_{lang}_text_features.npz`
  (the release's multilingual-BERT features) the text features (see `ttw_jax.rxr.records`).
- `guide_follower_xlate`: `guide_follower` plus, in the train split, the release's
  cross-translations (Ku et al. 2020, Table 5, exp. 5): each guide annotation's text features in
  the two other languages (`text_features/rxr_train/{id:06d}_{lang}_text_features.npz`), paired
  with the guide's path (`ttw_jax.rxr.records.cross_translations`): 2 x 126K translated pairs
  beside the 252K guide and follower pairs, the paper's 504K.
- `r2r`: Room-to-Room, `R2R_{train,val_seen,val_unseen,test}.json` in the manual directory (the
  splits are the files present); instruction k of path p gets instruction_id 10 p + k.
Custom configs: `Builder(config=RxrConfig(name=..., source=..., annotators=..., languages=...))`.
Each example: instruction_id, path_id, scan, path, heading (radians), instruction, language,
annotator, edit_distance / distance (NaN when absent), timed_words, has_masks with step_words
[len(path), len(timed_words)] and step_views [len(path), 36] (empty [0, 0] / [0, 36] without a
pose trace), has_step_subwords with step_subwords [len(path), m] (the trace's `text_masks`),
has_text_features with text_features [m, D] stored as bfloat16 bit patterns (uint16, ragged;
`load_rxr` returns `ml_dtypes.bfloat16` arrays; empty [0, 0] without), translated_from (the
original language of a cross-translation, else ""). Key `{instruction_id}_{annotator}`, with
`_{language}` appended for a cross-translation.
TensorFlow is not needed: the builder writes ArrayRecord, read back with `tfds.data_source`.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import os
from typing import Callable, Mapping, Sequence

import ml_dtypes
import numpy as np
import tensorflow_datasets as tfds

from ttw_jax.core import paths, tfds as ttw_tfds
from ttw_jax.rxr import records as rr
from ttw_jax.rxr.views import NUM_VIEWS

SOURCES = ("rxr", "r2r", "synthetic")
R2R_FILES = {s: f"R2R_{s}.json" for s in rr.R2R_SPLITS}
LANGUAGES = rr.RXR_LANGUAGES + ("en",)   # "en": R2R
SYNTHETIC_MODULE = "ttw_jax.rxr.synthetic"
# Small, connected scans (34-61 viewpoints) of R2R's train split, and 3 of its val_unseen scans
# (20-43 viewpoints), so the synthetic config builds fast.
SYNTHETIC_TRAIN_SCANS = ("17DRP5sb8fy", "759xd9YjKW5", "D7G3Y4RVNrH", "HxpKQynjfin",
                         "Pm6F8kyY3z2", "i5noydFURQK", "jh4fc5c5qoQ", "s8pcmisQ38h")
SYNTHETIC_UNSEEN_SCANS = ("8194nk5LbLH", "pLe4wQe7qrG", "x8F5xyUWy9e")


@dataclasses.dataclass
class RxrConfig(tfds.core.BuilderConfig):
    """Where the instructions come from, and which annotators / languages are kept."""

    source: str = "synthetic"                    # "rxr", "r2r" or "synthetic"
    annotators: tuple[str, ...] = ("guide",)     # RxR: "guide" and / or "follower"
    languages: tuple[str, ...] = ()              # kept languages ("hi", "te" allowed); () = all
    cross_translations: bool = False             # RxR: add the train split's cross-translations
    synthetic_train_scans: tuple[str, ...] = SYNTHETIC_TRAIN_SCANS
    synthetic_unseen_scans: tuple[str, ...] = SYNTHETIC_UNSEEN_SCANS
    # passed as `sizes` to `rxr_synthetic.synthetic_split_records`: (split, instructions, seed)
    synthetic_sizes: tuple[tuple[str, int, int], ...] = (
        ("train", 3000, 0), ("val_seen", 300, 1), ("val_unseen", 300, 2))
    synthetic_seed: int = 0

    def kept_languages(self) -> frozenset[str] | None:
        """The normalised `languages` (None: all); ValueError naming an unknown one."""
        if not self.languages:
            return None
        out = set()
        for lang in self.languages:
            norm = lang if lang == "en" else rr.normalize_language(lang)
            if norm is None:
                raise ValueError(f"RxrConfig {self.name!r}: unknown language {lang!r}; choose "
                                 f"from {LANGUAGES} (or 'hi', 'te')")
            out.add(norm)
        return frozenset(out)

    def validate(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"RxrConfig {self.name!r}: source must be one of {SOURCES}, got "
                             f"{self.source!r}")
        if self.source == "rxr" and (not self.annotators or not set(self.annotators) <= {
                "guide", "follower"}):
            raise ValueError(f"RxrConfig {self.name!r}: annotators must be a non-empty subset of "
                             f"('guide', 'follower'), got {self.annotators!r}")
        self.kept_languages()


def _rxr_config(name, annotators=("guide",), languages=(), description="",
                cross_translations=False):
    return RxrConfig(name=name, source="rxr", annotators=annotators, languages=languages,
                     description=description, cross_translations=cross_translations)


def rxr_split_records(manual_dir: str, annotators: Sequence[str] = ("guide",),
                      world_up: str = "auto") -> dict[str, list[dict]]:
    """split -> records of every RxR split with a file of one of `annotators` in `manual_dir`
    (guides first, then followers). FileNotFoundError naming the expected files if none."""
    out = {}
    for split in rr.RXR_SPLITS:
        present = [a for a in annotators if rr.find_rxr_file(manual_dir, split, a)]
        if present:
            out[split] = rr.read_rxr_split(manual_dir, split, present, world_up)
    if not out:
        expected = [rr.rxr_file_names(s, a)[0] for s in rr.RXR_SPLITS for a in annotators]
        raise FileNotFoundError(
            f"No RxR annotation file in {manual_dir}: expected any of {', '.join(expected)} "
            f"(or .jsonl). {rr.RXR_HINT}")
    return out


def r2r_split_records(manual_dir: str) -> dict[str, list[dict]]:
    """split -> records of every `R2R_{split}.json` in `manual_dir` (FileNotFoundError naming
    the expected files if none)."""
    present = {s: paths.join(manual_dir, f) for s, f in R2R_FILES.items()
               if paths.isfile(paths.join(manual_dir, f))}
    if not present:
        raise FileNotFoundError(f"No R2R file in {manual_dir}: expected any of "
                                f"{', '.join(R2R_FILES.values())}. {rr.R2R_HINT}")
    out = {}
    for split, path in present.items():
        out[split] = rr.read_r2r(path, manual_dir=manual_dir)
        if not out[split]:
            raise rr.RecordFormatError(f"{path}: no paths")
    return out


def connectivity_dir(manual_dir: str, scans: Sequence[str]) -> str:
    """`manual_dir` or its `connectivity/` subdirectory, whichever holds the connectivity files;
    FileNotFoundError naming the scans whose `<scan>_connectivity.json` is missing."""
    candidates = [manual_dir, paths.join(manual_dir, "connectivity")]
    for folder in candidates:
        listed = set(paths.listdir(folder)) if paths.isdir(folder) else set()
        missing = [s for s in scans if f"{s}_connectivity.json" not in listed]
        if not missing:
            return folder
        if len(missing) < len(scans):
            break
    raise FileNotFoundError(
        f"Matterport connectivity files missing in {folder}: "
        f"{', '.join(f'{s}_connectivity.json' for s in missing)} (the synthetic configs need the "
        f"graphs of their scans; github.com/peteanderson80/Matterport3DSimulator, "
        f"`connectivity/`)")


def synthetic_split_records(manual_dir: str, config: RxrConfig) -> dict[str, list[dict]]:
    """split -> records of a synthetic config, from `rxr_synthetic.synthetic_split_records` on
    the connectivity files in `manual_dir` (validated; key clashes are refused)."""
    scans = tuple(config.synthetic_train_scans) + tuple(config.synthetic_unseen_scans)
    conn = connectivity_dir(manual_dir, scans)
    generator = importlib.import_module(SYNTHETIC_MODULE).synthetic_split_records
    got = generator(conn, train_scans=list(config.synthetic_train_scans),
                    unseen_scans=list(config.synthetic_unseen_scans),
                    sizes=[tuple(s) for s in config.synthetic_sizes], seed=config.synthetic_seed)
    out = {}
    for split, recs in got.items():
        where = f"{SYNTHETIC_MODULE} split {split!r}"
        out[split] = [rr.check_record(r, f"{where} record {i}") for i, r in enumerate(recs)]
    return out


def _check_keys(records: Sequence[Mapping], where: str) -> None:
    seen = set()
    for r in records:
        key = example_key(r)
        if key in seen:
            raise rr.RecordFormatError(f"{where}: two records have key {key!r} (instruction_id "
                                       f"and annotator must be unique within a split)")
        seen.add(key)


def split_records(config: RxrConfig, manual_dir: str) -> dict[str, list[dict]]:
    """split -> validated records of `config` from `manual_dir`, languages filtered; splits left
    empty by the filter are dropped (ValueError if all are)."""
    config.validate()
    if config.source == "rxr":
        by_split = rxr_split_records(manual_dir, config.annotators)
        if config.cross_translations:
            if "train" not in by_split:
                raise FileNotFoundError(f"rxr/{config.name}: cross-translations are added to the "
                                        f"train split, and {manual_dir} has no train file")
            extra = rr.cross_translations(by_split["train"], manual_dir, "train")
            if not extra:
                raise FileNotFoundError(
                    f"rxr/{config.name}: no cross-translated text features in {manual_dir} "
                    "(text_features/rxr_train/{instruction_id:06d}_{lang}_text_features.npz for "
                    f"the other languages of each guide annotation). {rr.RXR_HINT}")
            by_split["train"] = by_split["train"] + extra
    elif config.source == "r2r":
        by_split = r2r_split_records(manual_dir)
    else:
        by_split = synthetic_split_records(manual_dir, config)
    keep = config.kept_languages()
    if keep is not None:
        found = sorted({r["language"] for recs in by_split.values() for r in recs})
        by_split = {s: [r for r in recs if r["language"] in keep] for s, recs in by_split.items()}
        by_split = {s: recs for s, recs in by_split.items() if recs}
        if not by_split:
            raise ValueError(f"rxr/{config.name}: no instruction in languages {sorted(keep)} "
                             f"in {manual_dir} (it has {found})")
    for split, recs in by_split.items():
        _check_keys(recs, f"rxr/{config.name} split {split!r}")
    return by_split


def example_key(rec: Mapping) -> str:
    key = f"{rec['instruction_id']}_{rec['annotator']}"
    return f"{key}_{rec['language']}" if rec.get("translated_from") else key


def to_example(rec: Mapping) -> dict:
    """The stored example of a record."""
    has_masks = rec.get("step_words") is not None
    tf = rec.get("text_features")
    return {
        "instruction_id": rec["instruction_id"], "path_id": rec["path_id"], "scan": rec["scan"],
        "path": list(rec["path"]), "heading": rec["heading"], "instruction": rec["instruction"],
        "language": rec["language"], "annotator": rec["annotator"],
        "edit_distance": rec["edit_distance"], "distance": rec["distance"],
        "timed_words": list(rec["timed_words"]), "has_masks": has_masks,
        "step_words": (np.asarray(rec["step_words"], bool) if has_masks
                       else np.zeros((0, 0), bool)),
        "step_views": (np.asarray(rec["step_views"], bool) if has_masks
                       else np.zeros((0, NUM_VIEWS), bool)),
        "has_step_subwords": rec.get("step_subwords") is not None,
        "step_subwords": (np.asarray(rec["step_subwords"], bool)
                          if rec.get("step_subwords") is not None else np.zeros((0, 0), bool)),
        "has_text_features": tf is not None,
        "text_features": (to_bfloat16_bits(tf) if tf is not None
                          else np.zeros((0, 0), np.uint16)),
        "translated_from": rec.get("translated_from", ""),
    }


def to_bfloat16_bits(x) -> np.ndarray:
    """The bfloat16 bit patterns (uint16) of float values: how text features are stored, at
    half the bytes of float32 and ragged per example."""
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)


def from_bfloat16_bits(bits) -> np.ndarray:
    """bfloat16 values (`ml_dtypes.bfloat16`) of stored bit patterns."""
    return np.asarray(bits, np.uint16).view(ml_dtypes.bfloat16)


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def from_row(row: Mapping) -> dict:
    """The record of a decoded example (masks / text features None when absent; floats via
    float32)."""
    has_masks = bool(row["has_masks"])
    return rr.new_record(
        instruction_id=int(row["instruction_id"]), path_id=int(row["path_id"]),
        scan=_text(row["scan"]), path=[_text(p) for p in row["path"]],
        heading=float(row["heading"]), instruction=_text(row["instruction"]),
        language=_text(row["language"]), annotator=_text(row["annotator"]),
        edit_distance=float(row["edit_distance"]), distance=float(row["distance"]),
        timed_words=[_text(w) for w in row["timed_words"]],
        step_words=np.asarray(row["step_words"], bool) if has_masks else None,
        step_views=np.asarray(row["step_views"], bool) if has_masks else None,
        step_subwords=(np.asarray(row["step_subwords"], bool)
                       if bool(row["has_step_subwords"]) else None),
        text_features=(from_bfloat16_bits(row["text_features"])
                       if bool(row["has_text_features"]) else None),
        translated_from=_text(row["translated_from"]))


# Ku et al. 2020 (RxR); Anderson et al. 2018 (R2R).
CITATION = r"""@inproceedings{ku2020rxr,
  title     = {Room-Across-Room: Multilingual Vision-and-Language Navigation with Dense
               Spatiotemporal Grounding},
  author    = {Ku, Alexander and Anderson, Peter and Patel, Roma and Ie, Eugene and
               Baldridge, Jason},
  booktitle = {Proceedings of the 2020 Conference on Empirical Methods in Natural Language
               Processing (EMNLP)},
  year      = {2020}
}
@inproceedings{anderson2018r2r,
  title     = {Vision-and-Language Navigation: Interpreting Visually-Grounded Navigation
               Instructions in Real Environments},
  author    = {Anderson, Peter and Wu, Qi and Teney, Damien and Bruce, Jake and Johnson, Mark
               and S{\"u}nderhauf, Niko and Reid, Ian and Gould, Stephen and
               van den Hengel, Anton},
  booktitle = {Proceedings of the IEEE Conference on Computer Vision and Pattern Recognition
               (CVPR)},
  year      = {2018}
}"""

class Builder(ttw_tfds.ArrayRecordBuilder):
    """RxR / R2R instructions, one example per instruction (see the module docstring)."""

    VERSION = tfds.core.Version("1.2.0")
    RELEASE_NOTES = {"1.0.0": "Initial release.",
                     "1.1.0": "Text features as bfloat16 (ragged); the release's text-feature "
                              "files and pose-trace keys (feature_weights, intrinsic_matrix, "
                              "text_masks -> step_subwords).",
                     "1.2.0": "translated_from; the guide_follower_xlate config "
                              "(cross-translations)."}
    BUILDER_CONFIGS = [
        RxrConfig(name="synthetic", description="Synthetic en-US / hi-IN instructions on real "
                                                "Matterport3D graphs (manual dir: connectivity)."),
        _rxr_config("guide", description="RxR guide annotations, all languages."),
        _rxr_config("follower", ("follower",), description="RxR follower annotations."),
        _rxr_config("guide_follower", ("guide", "follower"),
                    description="RxR guide and follower annotations."),
        _rxr_config("guide_follower_xlate", ("guide", "follower"), cross_translations=True,
                    description="RxR guide and follower annotations, and the train split's "
                                "cross-translated text features paired with the guide paths."),
        _rxr_config("guide_en", languages=("en-IN", "en-US"),
                    description="RxR guide annotations in English (en-IN, en-US)."),
        _rxr_config("guide_hi", languages=("hi-IN",),
                    description="RxR guide annotations in Hindi."),
        _rxr_config("guide_te", languages=("te-IN",),
                    description="RxR guide annotations in Telugu."),
        RxrConfig(name="r2r", source="r2r", description="Room-to-Room instructions."),
    ]
    DEFAULT_CONFIG_NAME = "synthetic"
    MANUAL_DOWNLOAD_INSTRUCTIONS = (
        "RxR configs (guide, guide_en, guide_hi, guide_te, follower, guide_follower, "
        "guide_follower_xlate): place any "
        "of the official annotation files `rxr_{split}_guide.jsonl.gz` / "
        "`rxr_{split}_follower.jsonl.gz` (split train, val_seen, val_unseen, test_standard; "
        "`.jsonl` also accepted; e.g. rxr_train_guide.jsonl.gz, "
        "rxr_val_unseen_follower.jsonl.gz, rxr_test_standard_public_guide.jsonl.gz) of "
        "https://github.com/google-research-datasets/RxR in the manual directory; each split "
        "with a file becomes a split. Optional: the release's `pose_traces/rxr_{split}/` "
        "(word / view masks) and `text_features/rxr_{split}/"
        "{instruction_id:06d}_{lang}_text_features.npz` (multilingual-BERT features). "
        "The r2r config: any of "
        "R2R_train.json, R2R_val_seen.json, R2R_val_unseen.json, R2R_test.json "
        "(Matterport3DSimulator `tasks/R2R/data`). The synthetic config: the Matterport3D "
        "`<scan>_connectivity.json` files (Matterport3DSimulator `connectivity/`).")

    def _info(self) -> tfds.core.DatasetInfo:
        text = tfds.features.Text
        zlib = tfds.features.Encoding.ZLIB   # dynamic 2-D shapes need an encoding without TF
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=tfds.features.FeaturesDict({
                "instruction_id": tfds.features.Scalar(dtype=np.int64),
                "path_id": tfds.features.Scalar(dtype=np.int64),
                "scan": text(),
                "path": tfds.features.Sequence(text()),
                "heading": tfds.features.Scalar(dtype=np.float32),
                "instruction": text(),
                "language": text(),
                "annotator": text(),
                "edit_distance": tfds.features.Scalar(dtype=np.float32),
                "distance": tfds.features.Scalar(dtype=np.float32),
                "timed_words": tfds.features.Sequence(text()),
                "has_masks": tfds.features.Scalar(dtype=np.bool_),
                "step_words": tfds.features.Tensor(shape=(None, None), dtype=np.bool_,
                                                   encoding=zlib),
                "step_views": tfds.features.Tensor(shape=(None, NUM_VIEWS), dtype=np.bool_,
                                                   encoding=zlib),
                "has_step_subwords": tfds.features.Scalar(dtype=np.bool_),
                "step_subwords": tfds.features.Tensor(shape=(None, None), dtype=np.bool_,
                                                      encoding=zlib),
                "has_text_features": tfds.features.Scalar(dtype=np.bool_),
                # bfloat16 bit patterns, [num_subwords, D] per example (`to_bfloat16_bits`)
                "text_features": tfds.features.Tensor(shape=(None, None), dtype=np.uint16,
                                                      encoding=zlib),
                "translated_from": text(),
            }),
            homepage="https://github.com/google-research-datasets/RxR",
            citation=CITATION,
        )

    def _split_generators(self, dl_manager):
        # an empty or missing manual dir: TFDS raises with MANUAL_DOWNLOAD_INSTRUCTIONS
        manual_dir = os.fspath(dl_manager.manual_dir)
        by_split = split_records(self.builder_config, manual_dir)
        return {split: self._generate_examples(recs) for split, recs in by_split.items()}

    def _generate_examples(self, records):
        for rec in records:
            yield example_key(rec), to_example(rec)


def load_rxr(data_dir: str | None = None, config="synthetic",
             splits: Sequence[str] | None = None) -> dict[str, list[dict]]:
    """Reads each split (or only `splits`) of a prepared `rxr/<config>` once: split -> records
    (the `ttw_jax.rxr.records` form; heading, edit_distance and distance via float32;
    step_words / step_views None without masks, text_features None without features), sorted by
    `record_order` (instruction_id, annotator, cross-translations after their annotation).
    `config` is a config name (also of a custom `RxrConfig` built in
    `data_dir`) or an `RxrConfig`."""
    sources = ttw_tfds.prepared_sources("rxr", config, data_dir, splits,
                                        "ttw_jax.rxr.dataset.prepare")
    out = {}
    for split, source in sources.items():
        out[split] = sorted((from_row(r) for r in ttw_tfds.all_rows(source)),
                            key=record_order)
    return out


_CHUNK = 512   # examples decoded per data-source call by `load_rxr_streamed`


def record_order(rec: Mapping) -> tuple:
    """How loaded records are sorted: by instruction_id, annotator, then the annotation before
    its cross-translations (by language)."""
    return (rec["instruction_id"], rec["annotator"], bool(rec["translated_from"]),
            rec["language"])


def load_rxr_streamed(data_dir: str | None = None, config="synthetic",
                      splits: Sequence[str] | None = None
                      ) -> tuple[dict[str, list[dict]], dict[str, Callable[[int], np.ndarray]]]:
    """`load_rxr` without holding the text features: ({split: records}, {split: read}), each
    record with `text_features` None and, when the example has features, `text_features_row`
    (its row in the split's ArrayRecord data source) and `text_features_len` (m); `read(row)`
    decodes that row's features [m, D] bfloat16. The examples are decoded `_CHUNK` at a time,
    so memory never holds a split's features."""
    sources = ttw_tfds.prepared_sources("rxr", config, data_dir, splits,
                                        "ttw_jax.rxr.dataset.prepare")
    out, readers = {}, {}
    for split, source in sources.items():
        recs = []
        for lo in range(0, len(source), _CHUNK):
            rows = source.__getitems__(list(range(lo, min(len(source), lo + _CHUNK))))
            for i, row in enumerate(rows, lo):
                rec = from_row({**row, "has_text_features": False})
                if bool(row["has_text_features"]):
                    rec.update(text_features_row=i,
                               text_features_len=int(np.shape(row["text_features"])[0]))
                recs.append(rec)
        out[split] = sorted(recs, key=record_order)
        readers[split] = functools.partial(_read_text_features, source)
    return out, readers


def _read_text_features(source, row: int) -> np.ndarray:
    return from_bfloat16_bits(source[int(row)]["text_features"])
