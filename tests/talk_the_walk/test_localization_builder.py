"""TF-free tests of the `ttw_localization` TFDS builder (build to ArrayRecord, read with data_source)."""
import numpy as np
import pytest
import tensorflow_datasets as tfds

from ttw_datasets import ttw_localization
from ttw_jax.talk_the_walk import maps


def build(tmp_path, config, manual_dir=None):
    builder = ttw_localization.Builder(config=config, data_dir=str(tmp_path), file_format="array_record")
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=manual_dir) if manual_dir else None)
    return ttw_localization.load_windows(str(tmp_path), config)


def assert_same_windows(got, expected):
    for split in maps.SPLITS:
        g, e = got[split], expected[split]
        order = np.lexsort((e.origin[:, 1], e.origin[:, 0], e.neighborhood))
        assert g.neighborhood.tolist() == e.neighborhood[order].tolist()
        np.testing.assert_array_equal(g.origin, e.origin[order])
        k = e.landmarks.shape[-1]
        np.testing.assert_array_equal(g.landmarks[..., :k], e.landmarks[order])
        assert not g.landmarks[..., k:].any()


def test_synthetic_config_matches_the_generator(tmp_path):
    got = build(tmp_path, "synthetic")
    assert {s: len(w) for s, w in got.items()} == {"train": 61, "valid": 20, "test": 10}
    assert_same_windows(got, maps.load_windows(None, seed=0))


def test_real_config_reads_the_manual_maps(tmp_path, real_maps_dir):
    got = build(tmp_path, "real", manual_dir=real_maps_dir)
    assert {s: 16 * len(w) for s, w in got.items()} == {"train": 816, "valid": 256, "test": 128}
    assert_same_windows(got, maps.load_windows(real_maps_dir))


def test_real_config_without_maps_names_the_expected_files(tmp_path):
    manual = tmp_path / "manual"
    manual.mkdir()
    # An empty manual directory: TFDS refuses with our instructions, which name the layouts.
    with pytest.raises(AssertionError, match="map.json"):
        build(tmp_path / "data", "real", manual_dir=str(manual))
    # Something else there, but no maps: our loader names every file it looked for.
    (manual / "README.txt").write_text("not a map")
    with pytest.raises(FileNotFoundError, match="fidi_map.json"):
        build(tmp_path / "data", "real", manual_dir=str(manual))
