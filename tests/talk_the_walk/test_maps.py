import json
import os

import numpy as np
import pytest

from ttw_jax.talk_the_walk import maps


def test_real_maps_windows_and_statistics(real_maps_dir):
    loaded = maps.load_maps(real_maps_dir)
    assert sorted(m.name for m in loaded) == ["eastvillage", "fidi", "hellskitchen", "williamsburg"]
    configs = {s: 16 * len(maps.windows(loaded, s)) for s in maps.SPLITS}
    assert configs == {"train": 816, "valid": 256, "test": 128}
    per_corner = np.concatenate([((m.corners > 0) & (m.corners != maps.EMPTY_ID)).sum(-1).ravel()
                                 for m in loaded])
    assert np.bincount(per_corner).tolist() == [214, 220, 24, 2]
    # Every corner without landmarks observes [Empty].
    empty = np.concatenate([m.corners[..., 0].ravel() == maps.EMPTY_ID for m in loaded])
    assert empty.sum() == 214


def test_corner_coordinates_follow_the_orientation_rule(tmp_path):
    entries = [{"x": 1, "y": 2, "orientation": o, "type": "Bank", "name": "b"}
               for o in ("NW", "SW", "NE", "SE")]
    (tmp_path / "fidi_map.json").write_text(json.dumps(entries))
    m = maps.load_maps(str(tmp_path), ["fidi"])[0]
    bank = maps.LANDMARK_TYPES.index("Bank")
    got = {(cx, cy) for cx, cy in np.ndindex(*m.corners.shape[:2]) if m.corners[cx, cy, 0] == bank}
    # NW -> (2, 5), SW -> (2, 4), NE -> (3, 5), SE -> (3, 4)
    assert got == {(2, 5), (2, 4), (3, 5), (3, 4)}
    assert m.corners.shape[:2] == (8, 10)  # fidi [2, 3]: (2*2+4) x (2*3+4) corners


def test_both_layouts_and_synthetic_round_trip(tmp_path):
    synth = maps.synthetic_maps(seed=3, names=["hellskitchen", "fidi"])
    (tmp_path / "hellskitchen").mkdir()
    (tmp_path / "hellskitchen" / "map.json").write_text(json.dumps(maps.to_map_json(synth[0])))
    (tmp_path / "fidi_map.json").write_text(json.dumps(maps.to_map_json(synth[1])))
    loaded = maps.load_maps(str(tmp_path))
    assert [m.name for m in loaded] == ["hellskitchen", "fidi"]
    for a, b in zip(synth, loaded):
        k = max(a.corners.shape[-1], b.corners.shape[-1])
        pad = lambda c: np.sort(np.pad(c, ((0, 0), (0, 0), (0, k - c.shape[-1]))), -1)
        np.testing.assert_array_equal(pad(a.corners), pad(b.corners))


def test_synthetic_maps_have_the_real_statistics():
    synth = maps.synthetic_maps(seed=0)
    assert [m.name for m in synth] == list(maps.NEIGHBORHOODS)
    counts = np.concatenate([((m.corners > 0) & (m.corners != maps.EMPTY_ID)).sum(-1).ravel()
                             for m in synth])
    freq = np.bincount(counts, minlength=4)[:4] / len(counts)
    np.testing.assert_allclose(freq, [214 / 460, 220 / 460, 24 / 460, 2 / 460], atol=0.06)
    splits = maps.load_windows(None, seed=0)
    assert {s: 16 * len(w) for s, w in splits.items()} == {"train": 976, "valid": 320, "test": 160}
    assert maps.synthetic_maps(1)[0].corners.tolist() != synth[0].corners.tolist()
    assert maps.synthetic_maps(0)[0].corners.tolist() == synth[0].corners.tolist()


def test_missing_map_names_expected_files(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        maps.load_maps(str(tmp_path), ["fidi"])
    msg = str(e.value)
    assert os.path.join(str(tmp_path), "fidi", "map.json") in msg
    assert os.path.join(str(tmp_path), "fidi_map.json") in msg
    assert "BUILD.md" in msg
    with pytest.raises(FileNotFoundError, match="maps directory not found"):
        maps.load_maps(str(tmp_path / "nowhere"))


@pytest.mark.parametrize("content, where", [
    ('[{"x": 0, "y": 0,\n "orientation": "NW" "type": "Bank"}]', "line 2, column 22"),
    ('{"x": 0}', "top level"),
    ('[{"x": 0, "y": 0, "orientation": "NW", "type": "Bank"}, {"x": 0, "orientation": "NW"}]',
     "entry 1: missing field 'y'"),
    ('[{"x": "a", "y": 0, "orientation": "NW", "type": "Bank"}]', "entry 0, field 'x'"),
    ('[{"x": 0, "y": 0, "orientation": "N", "type": "Bank"}]', "entry 0, field 'orientation'"),
    ('[{"x": 0, "y": 0, "orientation": "NW", "type": "Castle"}]', "entry 0, field 'type'"),
    ('[{"x": 9, "y": 0, "orientation": "NW", "type": "Bank"}]', "entry 0, fields 'x'/'y'"),
])
def test_malformed_map_names_file_and_problem(tmp_path, content, where):
    path = tmp_path / "fidi_map.json"
    path.write_text(content)
    with pytest.raises(maps.MapFormatError) as e:
        maps.load_maps(str(tmp_path))
    assert str(path) in str(e.value) and where in str(e.value)


def test_numpy_integer_coordinates_are_integers_bools_are_not():
    """`parse_map` (also fed decoded entries by the TFDS builder) takes numpy integers, as every
    reader does since `ttw_jax.core.records`; a bool is not an integer."""
    entry = {"x": np.int64(1), "y": np.int32(2), "orientation": "NE", "type": "Bank"}
    nmap = maps.parse_map([entry], "m.json", "fidi", maps.BOUNDARIES["fidi"])
    assert nmap.corners[3, 5, 0] == maps.LANDMARK_TYPES.index("Bank")
    with pytest.raises(maps.MapFormatError, match="m.json: entry 0, field 'y': expected an "
                                                  "integer, got True"):
        maps.parse_map([dict(entry, y=True)], "m.json", "fidi", maps.BOUNDARIES["fidi"])


def test_split_rule_matches_the_official_counts():
    # 61 / 20 / 10 windows over the five neighbourhoods.
    counts = {s: 0 for s in maps.SPLITS}
    for name, boundary in maps.BOUNDARIES.items():
        for mx in range(boundary[0] + 1):
            for my in range(boundary[1] + 1):
                counts[maps.window_split(mx, my, boundary)] += 1
    assert counts == {"train": 61, "valid": 20, "test": 10}
