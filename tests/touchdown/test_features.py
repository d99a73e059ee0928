"""Panorama feature tables: the official column convention against the official navigator's
roll, the converter from the official per-panorama files, and the table file's convention."""
import os

import jax.numpy as jnp
import numpy as np
import pytest

from experiments.touchdown_nav import convert_features
from ttw_jax.core.pano_graph import NodeTable
from ttw_jax.touchdown import features as pano_features
from ttw_jax.touchdown.graph import (load_touchdown_graph, read_graph_files,
                                     synthetic_street_grid, write_graph_files)


def official_view(panorama: np.ndarray, yaw: float, heading: float) -> np.ndarray:
    """The official `navigator.py`, written out: roll the [H, W, C] map by
    int(W * (157.5 + yaw - heading) / 360) columns; the heading is then the middle column."""
    width = panorama.shape[1]
    rolled = np.roll(panorama, int(width * (157.5 + yaw - heading) / 360), axis=1)
    return rolled[:, width // 2]


@pytest.mark.parametrize("yaw, heading", [(0, 0), (209, 209), (30, 300), (350, 10),
                                          (123, 0), (0, 180), (271, 271.4), (45, 359.9)])
def test_official_convention_finds_the_column_the_official_roll_centres(yaw, heading):
    # A synthetic panorama whose column k holds k: the column under the agent's heading must be
    # the one the official roll puts in the middle (negative shift angles truncate towards 0).
    width = 464
    panorama = np.broadcast_to(np.arange(width, dtype=np.float32)[None, :, None],
                               (2, width, 1))
    want = official_view(panorama, yaw, heading)[0, 0]
    table = jnp.asarray(panorama.mean(0))[None]                                 # [1, W, 1]
    crop = pano_features.crop_to_heading(table, jnp.asarray([float(yaw)]), jnp.asarray([0]),
                                         jnp.asarray([float(heading)]), 5, "official")
    assert crop[0, :, 0].tolist() == [(want + d) % width for d in (-2, -1, 0, 1, 2)]
    # The same file read in the centred convention looks 157.5 degrees away (within a column).
    centred = int(pano_features.heading_column(jnp.asarray([float(yaw)]),
                                               jnp.asarray([float(heading)]), width)[0])
    off = ((want - centred + width // 2) % width) - width // 2
    assert abs(abs(off) - 157.5 / 360 * width) <= 1.0


@pytest.mark.parametrize("yaw, heading", [(0, 0), (30, 300), (350, 10), (45, 359.9)])
def test_image_crops_keep_every_row_and_the_official_columns(yaw, heading):
    # The 2-D crop of maps [1, H, W, 1]: all H rows, the 100 columns around the column the
    # official roll centres (the published reimplementations' img[:, 182:282] of the rolled map).
    width, height = 464, 3
    panorama = (np.arange(width, dtype=np.float32)[None, :, None]
                + 1000 * np.arange(height, dtype=np.float32)[:, None, None])   # [H, W, 1]
    rolled = np.roll(panorama, int(width * (157.5 + yaw - heading) / 360), axis=1)
    crop = pano_features.crop_to_heading(jnp.asarray(panorama)[None], jnp.asarray([float(yaw)]),
                                         jnp.asarray([0]), jnp.asarray([float(heading)]), 100,
                                         "official")
    assert crop.shape == (1, height, 100, 1)
    np.testing.assert_array_equal(crop[0], rolled[:, 182:282])


def test_unknown_convention_is_refused():
    with pytest.raises(ValueError, match="convention must be one of"):
        pano_features.heading_column(jnp.zeros(1), jnp.zeros(1), 8, "rotated")


def test_converter_writes_the_official_table_and_sdr_links(tmp_path):
    nodes, links = synthetic_street_grid(num_avenues=2, num_streets=2, panos_per_block=2)
    write_graph_files(str(tmp_path / "graph"), nodes, links)
    ids = [n[0] for n in read_graph_files(str(tmp_path / "graph"))[0]]
    official = tmp_path / "official"
    official.mkdir()
    rng = np.random.default_rng(0)
    maps = {p: rng.normal(size=(4, 16, 3)).astype(np.float32) for p in ids}
    for p, x in maps.items():
        np.save(official / f"{p}.npy", x)
    out = str(tmp_path / "table.npz")
    assert convert_features.convert(str(official), str(tmp_path / "graph"), out,
                                    str(tmp_path / "sdr")) == len(ids)
    _, table_nodes = load_touchdown_graph(str(tmp_path / "graph"))
    table, convention = pano_features.load_pano_features(out, table_nodes)
    assert convention == "official" and table.shape == (len(ids), 16, 3)
    for row, p in enumerate(table_nodes.ids):        # the mean over image rows, not rolled
        np.testing.assert_allclose(table[row], maps[p].mean(0), atol=2e-3)
    linked = sorted(os.listdir(tmp_path / "sdr" / "features"))
    assert linked == sorted(f"{p}.npy" for p in ids)
    np.testing.assert_array_equal(np.load(tmp_path / "sdr" / "features" / linked[0]),
                                  maps[linked[0][:-4]])
    # the maps averaged over channels for the official 2-D CNN: [N, H, W, 1], not rolled
    assert convert_features.convert(str(official), str(tmp_path / "graph"), out,
                                    layout="images") == len(ids)
    images, convention = pano_features.load_pano_features(out, table_nodes)
    assert convention == "official" and images.shape == (len(ids), 4, 16, 1)
    for row, p in enumerate(table_nodes.ids):
        np.testing.assert_allclose(images[row, ..., 0], maps[p].mean(-1), atol=2e-3)
    os.remove(official / f"{ids[0]}.npy")
    with pytest.raises(FileNotFoundError, match="1 of .* official feature files missing"):
        convert_features.convert(str(official), str(tmp_path / "graph"), out)


def test_a_table_without_a_convention_is_centred(tmp_path):
    path = str(tmp_path / "t.npz")
    np.savez(path, panoids=np.asarray(["a", "b"]), features=np.zeros((2, 4, 1)))
    table, convention = pano_features.load_pano_features(path, NodeTable.from_ids(["b"]))
    assert convention == "centred" and table.shape == (1, 4, 1)


def test_a_damaged_or_non_finite_table_is_named(tmp_path):
    path = str(tmp_path / "t.npz")
    feats = np.zeros((2, 4, 1))
    feats[1, 2, 0] = np.nan
    np.savez(path, panoids=np.asarray(["a", "b"]), features=feats)
    with pytest.raises(ValueError, match=r"t.npz: 'features' must be finite numbers"):
        pano_features.load_pano_features(path, NodeTable.from_ids(["b"]))
    np.savez(path, panoids=np.asarray(["a", "b"]), features=np.zeros((2, 4, 1)))
    with open(path, "r+b") as f:
        f.truncate(300)
    with pytest.raises(ValueError, match=r"t.npz: not readable"):
        pano_features.load_pano_features(path, NodeTable.from_ids(["b"]))
