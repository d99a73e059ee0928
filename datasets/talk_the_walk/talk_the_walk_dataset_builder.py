"""TFDS builder `talk_the_walk`: Talk The Walk natural-language dialogues and their maps.

Configs:
- `synthetic` (default): `ttw_jax.talk_the_walk.language.synthetic` on synthetic neighbourhoods
  (`maps.synthetic_maps(map_seed)`); no download. Split sizes and seeds from `synthetic_splits`
  (default train 600 / valid 150 / test 150, seeds 0 / 1 / 2), each on its own windows.
- `synthetic_real_maps`: the same synthetic dialogues on the real landmark maps, read from the
  manual directory (`<nbh>/map.json` or `<nbh>_map.json`).
- `real`: the official release in the manual directory (flat layout of the extracted
  `talkthewalk.tgz`): any of `talkthewalk.{train,valid,test}.json`, the maps of every
  neighbourhood they use, optionally `configurations.{train,valid,test}.json` (`<nbh>/text.json`,
  `resnetfeat.json` and `dict.txt` may be there and are not read). The dialogue files present are
  merged and split again by their window key (neighbourhood, min_x // 2, min_y // 2) with the
  official rule; windows listed in the configuration files take the split of their file instead.
Every dialogue and map is validated before anything is written.
Splits `train`, `valid`, `test`: one example per dialogue, `record` (the whole episode as JSON
text, so `json.loads` gives back the validated dict), `index` (its position in the split: the
order of the merged files or of the generator) and `neighborhood`. Split `maps`: one example per
neighbourhood, `neighborhood` its name and `record` its `map.json` entries as JSON text.
TensorFlow is not needed: the builder writes ArrayRecord, read back with `tfds.data_source`.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Mapping, Sequence

import numpy as np
import tensorflow_datasets as tfds

from ttw_jax.core import paths, tfds as ttw_tfds
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.language import dialogues as td
from ttw_jax.talk_the_walk.language.synthetic import synthetic_dialogues

SOURCES = ("synthetic", "synthetic_real_maps", "real")
MAPS_SPLIT = "maps"


@dataclasses.dataclass
class TalkTheWalkConfig(tfds.core.BuilderConfig):
    """Where dialogues and maps come from, and the synthetic splits."""

    source: str = "synthetic"   # "synthetic", "synthetic_real_maps" or "real"
    map_seed: int = 0           # `synthetic`: seed of `maps.synthetic_maps`
    # synthetic splits: (name, dialogues, seed of `synthetic_dialogues`)
    synthetic_splits: tuple[tuple[str, int, int], ...] = (
        ("train", 600, 0), ("valid", 150, 1), ("test", 150, 2))

    def validate(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"TalkTheWalkConfig {self.name!r}: source must be one of {SOURCES}, "
                             f"got {self.source!r}")
        for split, _, _ in self.synthetic_splits:
            if split not in maps.SPLITS:
                raise ValueError(f"TalkTheWalkConfig {self.name!r}: unknown synthetic split "
                                 f"{split!r}; expected one of {maps.SPLITS}")


def manual_maps(manual_dir: str, required: Sequence[str] = ()) -> dict[str, list]:
    """name -> validated `map.json` entries of every neighbourhood with a map in `manual_dir`
    (either layout); FileNotFoundError naming the expected paths when a `required` one (or every
    one) is missing."""
    present = [n for n in maps.NEIGHBORHOODS if maps.find_map_file(manual_dir, n)]
    missing = [n for n in required if n not in present]
    if missing or not present:
        expected = ", ".join(p for n in (missing or maps.NEIGHBORHOODS)
                             for p in maps.map_paths(manual_dir, n))
        raise FileNotFoundError(f"missing Talk The Walk map files; expected: {expected}. "
                                f"{maps.SOURCE_HINT}")
    out = {}
    for name in present:
        path = maps.find_map_file(manual_dir, name)
        maps.load_map(path, name)   # validates, errors name the file / entry / field
        with paths.resolve(path).open("r", encoding="utf-8") as f:
            out[name] = json.load(f)
    return out


def configuration_windows(manual_dir: str) -> dict[tuple[str, int, int], str]:
    """window key -> split of every window in the `configurations.{split}.json` files present
    (empty without them); DialogueFormatError for a window listed in two splits."""
    out: dict[tuple[str, int, int], str] = {}
    for split, name in td.CONFIGURATION_FILES.items():
        path = os.path.join(manual_dir, name)
        if not paths.isfile(path):
            continue
        for i, cfg in enumerate(td.read_configurations(path)):
            key = td.window_key(cfg)
            if out.setdefault(key, split) != split:
                raise td.DialogueFormatError(
                    f"{path}: configuration {i}: field 'boundaries': window {list(key)} is also "
                    f"in configurations.{out[key]}.json")
    return out


def split_by_window(dialogues: Sequence[Mapping],
                    windows: Mapping[tuple[str, int, int], str] | None = None
                    ) -> dict[str, list]:
    """split -> dialogues (in their order): the split of `windows` for a listed window key,
    else the official rule (`td.dialogue_split`). Every split of `maps.SPLITS` is a key."""
    out = {s: [] for s in maps.SPLITS}
    windows = windows or {}
    for ep in dialogues:
        out[windows.get(td.window_key(ep)) or td.dialogue_split(ep)].append(ep)
    return out


def manual_dialogues(manual_dir: str) -> dict[str, list[dict]]:
    """split -> validated dialogues of the `talkthewalk.{split}.json` files in `manual_dir`,
    merged (train, valid, test order) and split by window (see the module docstring);
    FileNotFoundError naming the expected files (and where to get them) if there is none."""
    present = [os.path.join(manual_dir, f) for f in td.DIALOGUE_FILES.values()
               if paths.isfile(os.path.join(manual_dir, f))]
    if not present:
        raise FileNotFoundError(
            f"No Talk The Walk dialogue file in {manual_dir}: expected any of "
            f"{', '.join(td.DIALOGUE_FILES.values())}. {td.SOURCE_HINT}")
    dialogues = [ep for path in present for ep in td.read_dialogues(path)]
    return split_by_window(dialogues, configuration_windows(manual_dir))


def split_data(config: TalkTheWalkConfig, manual_dir: str | None
               ) -> tuple[dict[str, list[dict]], dict[str, list]]:
    """(split -> dialogues, name -> `map.json` entries) of `config`; `manual_dir` is only read
    by `synthetic_real_maps` and `real`."""
    config.validate()
    if config.source == "real":
        dialogues = manual_dialogues(manual_dir)
        used = sorted({ep["neighborhood"] for eps in dialogues.values() for ep in eps})
        return dialogues, manual_maps(manual_dir, used)
    if config.source == "synthetic":
        entries = {m.name: maps.to_map_json(m) for m in maps.synthetic_maps(config.map_seed)}
    else:
        entries = manual_maps(manual_dir)
    nmaps = [parse_map(name, e) for name, e in entries.items()]
    dialogues = {split: synthetic_dialogues(nmaps, num, seed, split=split)
                 for split, num, seed in config.synthetic_splits}
    return dialogues, entries


def parse_map(name: str, entries: list) -> maps.NeighborhoodMap:
    """The NeighborhoodMap of `map.json` entries of neighbourhood `name`."""
    return maps.parse_map(entries, f"talk_the_walk map {name}", name, maps.BOUNDARIES[name])


def to_example(record, index: int, neighborhood: str) -> dict:
    """The stored example: `record` (an episode or map entries) as JSON text."""
    return {"index": index, "neighborhood": neighborhood,
            "record": json.dumps(record, ensure_ascii=False, allow_nan=False)}


# de Vries et al. 2018.
CITATION = r"""@article{devries2018talkthewalk,
  title   = {Talk the Walk: Navigating New York City through Grounded Dialogue},
  author  = {de Vries, Harm and Shuster, Kurt and Batra, Dhruv and Parikh, Devi and
             Weston, Jason and Kiela, Douwe},
  journal = {arXiv preprint arXiv:1807.03367},
  year    = {2018}
}"""

class Builder(ttw_tfds.ArrayRecordBuilder):
    """Talk The Walk dialogues, one example per dialogue, and the maps (module docstring)."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Initial release."}
    BUILDER_CONFIGS = [
        TalkTheWalkConfig(name="synthetic", description="Synthetic dialogues on synthetic "
                                                        "neighbourhoods; no download."),
        TalkTheWalkConfig(name="synthetic_real_maps", source="synthetic_real_maps",
                          description="Synthetic dialogues on the real landmark maps (manual "
                                      "download of the maps)."),
        TalkTheWalkConfig(name="real", source="real",
                          description="The official dialogues and maps (manual download)."),
    ]
    DEFAULT_CONFIG_NAME = "synthetic"
    MANUAL_DOWNLOAD_INSTRUCTIONS = (
        "real config: extract the official Talk The Walk release (github.com/facebookresearch/"
        "talkthewalk, scripts/download_data.sh) into the manual directory: any of " +
        ", ".join(td.DIALOGUE_FILES.values()) + ", the map of every neighbourhood they use "
        "(`<neighbourhood>/map.json` or `<neighbourhood>_map.json`) and optionally " +
        ", ".join(td.CONFIGURATION_FILES.values()) + ". synthetic_real_maps config: the map "
        "files only. The synthetic config needs no download.")

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=tfds.features.FeaturesDict({
                "index": tfds.features.Scalar(dtype=np.int64),
                "neighborhood": tfds.features.Text(),
                "record": tfds.features.Text(),
            }),
            homepage="https://github.com/facebookresearch/talkthewalk",
            citation=CITATION,
        )

    def _split_generators(self, dl_manager):
        manual_dir = None
        if self.builder_config.source != "synthetic":
            # an empty or missing manual dir: TFDS raises with MANUAL_DOWNLOAD_INSTRUCTIONS
            manual_dir = os.fspath(dl_manager.manual_dir)
        dialogues, entries = split_data(self.builder_config, manual_dir)
        out = {split: self._generate_examples(
            [(str(i), to_example(ep, i, ep["neighborhood"])) for i, ep in enumerate(eps)])
            for split, eps in dialogues.items() if eps}
        out[MAPS_SPLIT] = self._generate_examples(
            [(name, to_example(e, i, name)) for i, (name, e) in enumerate(entries.items())])
        return out

    def _generate_examples(self, keyed_examples):
        yield from keyed_examples


def load_talk_the_walk(data_dir: str | None = None, config="synthetic",
                       splits: Sequence[str] | None = None
                       ) -> tuple[dict[str, list[dict]], dict[str, maps.NeighborhoodMap]]:
    """Reads a prepared `talk_the_walk/<config>` (a config name or a TalkTheWalkConfig):
    (split -> dialogues in their stored order, every split of `splits` (default train / valid /
    test; [] for a split without dialogues), name -> NeighborhoodMap of the `maps` split)."""
    splits = list(maps.SPLITS if splits is None else splits)
    sources = ttw_tfds.prepared_sources("talk_the_walk", config, data_dir,
                                        prepare_with="ttw_jax.talk_the_walk.language.dataset.prepare")
    unknown = sorted(set(splits) - set(maps.SPLITS))
    if unknown:
        raise ValueError(f"talk_the_walk has no split(s) {unknown}; it has {list(maps.SPLITS)}")
    dialogues = {}
    for split in splits:
        rows = ttw_tfds.all_rows(sources[split]) if split in sources else []
        dialogues[split] = [ttw_tfds.json_record(r) for r in sorted(rows, key=lambda r: int(r["index"]))]
    rows = sorted(ttw_tfds.all_rows(sources[MAPS_SPLIT]), key=lambda r: int(r["index"]))
    nmaps = {}
    for r in rows:
        name = r["neighborhood"]
        name = name.decode("utf-8") if isinstance(name, bytes) else name
        nmaps[name] = parse_map(name, ttw_tfds.json_record(r))
    return dialogues, nmaps
