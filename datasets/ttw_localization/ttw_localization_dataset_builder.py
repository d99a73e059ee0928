"""TFDS builder `ttw_localization`: the 4x4-corner windows of Talk The Walk neighbourhoods.

One example per window, split by the official window rule (train / valid / test). Configs:
- `synthetic` (default): neighbourhoods sampled with the real per-corner statistics; no download.
- `real`: the landmark maps of the official release, placed in the manual directory as
  `<nbh>/map.json` or `<nbh>_map.json` (see BUILD.md).
TensorFlow is not needed: the builder writes ArrayRecord, read back with `tfds.data_source`.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow_datasets as tfds

from ttw_datasets.talk_the_walk.talk_the_walk_dataset_builder import CITATION
from ttw_jax.core import tfds as ttw_tfds
from ttw_jax.talk_the_walk import maps

MAX_LANDMARKS = 4  # landmark ids per corner, zero-padded (the real maps have at most 3)


@dataclasses.dataclass
class TTWLocalizationConfig(tfds.core.BuilderConfig):
    synthetic_seed: int | None = 0  # None: read real maps from the manual directory


class Builder(ttw_tfds.ArrayRecordBuilder):
    """Talk The Walk 4x4 windows: landmark ids per corner, neighbourhood and window origin."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Initial release."}
    BUILDER_CONFIGS = [
        TTWLocalizationConfig(name="synthetic", description="Synthetic neighbourhoods (seed 0)."),
        TTWLocalizationConfig(name="real", synthetic_seed=None,
                              description="The official landmark maps (manual download)."),
    ]
    DEFAULT_CONFIG_NAME = "synthetic"
    MANUAL_DOWNLOAD_INSTRUCTIONS = (
        "Place the Talk The Walk landmark maps (`<neighbourhood>/map.json` as in the official "
        "release, or `<neighbourhood>_map.json`) for any of " + ", ".join(maps.NEIGHBORHOODS) +
        " in the manual directory. " + maps.SOURCE_HINT)

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=__doc__,
            features=tfds.features.FeaturesDict({
                "landmarks": tfds.features.Tensor(shape=(maps.WINDOW, maps.WINDOW, MAX_LANDMARKS),
                                                  dtype=np.int32),
                "neighborhood": tfds.features.Text(),
                "origin": tfds.features.Tensor(shape=(2,), dtype=np.int32),
            }),
            homepage="https://github.com/facebookresearch/talkthewalk",
            citation=CITATION,
        )

    def _split_generators(self, dl_manager):
        if self.builder_config.synthetic_seed is None:
            loaded = maps.load_maps(str(dl_manager.manual_dir))
        else:
            loaded = maps.synthetic_maps(self.builder_config.synthetic_seed)
        k = max(m.corners.shape[-1] for m in loaded)
        if k > MAX_LANDMARKS:
            raise ValueError(f"a corner has {k} landmarks; this builder stores at most {MAX_LANDMARKS}")
        return {split: self._generate_examples(maps.windows(loaded, split)) for split in maps.SPLITS}

    def _generate_examples(self, w: maps.Windows):
        pad = MAX_LANDMARKS - w.landmarks.shape[-1]
        for i in range(len(w)):
            key = f"{w.neighborhood[i]}_{w.origin[i][0]}_{w.origin[i][1]}"
            yield key, {"landmarks": np.pad(w.landmarks[i], ((0, 0), (0, 0), (0, pad))),
                        "neighborhood": str(w.neighborhood[i]), "origin": w.origin[i]}


def load_windows(data_dir: str | None = None, config: str = "synthetic") -> dict[str, maps.Windows]:
    """Reads a prepared `ttw_localization/<config>` once into padded numpy `Windows` per split,
    ordered by (neighbourhood, origin)."""
    sources = tfds.data_source(f"ttw_localization/{config}", data_dir=data_dir, download=False)
    out = {}
    for split in maps.SPLITS:
        rows = sorted((src["neighborhood"].decode(), tuple(src["origin"].tolist()), src["landmarks"])
                      for src in (sources[split][i] for i in range(len(sources[split]))))
        out[split] = maps.Windows(
            np.stack([r[2] for r in rows]).astype(np.int32) if rows else
            np.zeros((0, maps.WINDOW, maps.WINDOW, MAX_LANDMARKS), np.int32),
            np.asarray([r[0] for r in rows]), np.asarray([r[1] for r in rows], np.int32).reshape(-1, 2))
    return out
