"""TF-free tests of the `talk_the_walk` TFDS builder (build to ArrayRecord, read with
data_source) and of `ttw_jax.talk_the_walk.language.dataset`."""
import json
import os

import numpy as np
import pytest
import tensorflow_datasets as tfds

from ttw_datasets.talk_the_walk import talk_the_walk_dataset_builder as tb
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.language import dataset as ttw_language_data, dialogues as td
from ttw_jax.talk_the_walk.language.synthetic import synthetic_dialogues


def build(data_dir, config, manual_dir=None):
    builder = tb.Builder(config=config, data_dir=str(data_dir), file_format="array_record")
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(manual_dir))
        if manual_dir else None)


def assert_same_maps(got: dict, expected):
    assert list(got) == [m.name for m in expected]
    for m in expected:
        g, e = got[m.name].corners, m.corners
        k = max(g.shape[-1], e.shape[-1])
        assert got[m.name].boundary == m.boundary
        np.testing.assert_array_equal(np.pad(g, ((0, 0), (0, 0), (0, k - g.shape[-1]))),
                                      np.pad(e, ((0, 0), (0, 0), (0, k - e.shape[-1]))))


def test_configs():
    assert tb.Builder.DEFAULT_CONFIG_NAME == "synthetic"
    configs = tb.Builder.builder_configs
    assert {n: c.source for n, c in configs.items()} == {
        "synthetic": "synthetic", "synthetic_real_maps": "synthetic_real_maps", "real": "real"}
    assert configs["synthetic"].synthetic_splits == (("train", 600, 0), ("valid", 150, 1),
                                                     ("test", 150, 2))
    with pytest.raises(ValueError, match="source must be one of"):
        tb.TalkTheWalkConfig(name="x", source="emergent").validate()
    with pytest.raises(ValueError, match="unknown synthetic split"):
        tb.TalkTheWalkConfig(name="x", synthetic_splits=(("dev", 1, 0),)).validate()
    with pytest.raises(ValueError, match="unknown talk_the_walk config"):
        ttw_language_data.load_dialogues("nope")


def test_synthetic_default_round_trip(tmp_path):
    dialogues, got_maps = ttw_language_data.load_dialogues(tfds_dir=str(tmp_path))
    nmaps = maps.synthetic_maps(0)
    assert {s: len(d) for s, d in dialogues.items()} == {"train": 600, "valid": 150, "test": 150}
    for split, num, seed in tb.Builder.builder_configs["synthetic"].synthetic_splits:
        assert dialogues[split] == synthetic_dialogues(nmaps, num, seed, split=split)
        assert {td.dialogue_split(ep) for ep in dialogues[split]} == {split}
    assert_same_maps(got_maps, nmaps)
    # the stored rows
    source = tfds.builder("talk_the_walk/synthetic", data_dir=str(tmp_path)).as_data_source()
    assert set(source) == {"train", "valid", "test", "maps"}
    row = source["valid"][3]
    ep = dialogues["valid"][int(row["index"])]
    assert row["neighborhood"].decode() == ep["neighborhood"]
    assert json.loads(row["record"].decode()) == ep
    only, _ = tb.load_talk_the_walk(str(tmp_path), "synthetic", splits=["test"])
    assert list(only) == ["test"] and only["test"] == dialogues["test"]
    with pytest.raises(ValueError, match="no split"):
        tb.load_talk_the_walk(str(tmp_path), "synthetic", splits=["dev"])


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """A manual directory in the release's flat layout: fidi as `fidi/map.json`, hellskitchen as
    `hellskitchen_map.json`, two dialogue files (the splits mixed up), optional extra files."""
    root = tmp_path_factory.mktemp("release")
    nmaps = maps.synthetic_maps(3, names=("hellskitchen", "fidi"))
    (root / "fidi").mkdir()
    (root / "fidi" / "map.json").write_text(json.dumps(maps.to_map_json(nmaps[1])))
    (root / "fidi" / "text.json").write_text("{}")
    (root / "hellskitchen_map.json").write_text(json.dumps(maps.to_map_json(nmaps[0])))
    (root / "resnetfeat.json").write_text("{}")
    (root / "dict.txt").write_text("the\t10\n")
    dialogues = synthetic_dialogues(nmaps, 24, seed=9)
    dialogues[0]["landmarks"] = [{"x": 1}]
    dialogues[1]["dialog"][0]["assignment_id"] = "X"
    (root / "talkthewalk.train.json").write_text(json.dumps(dialogues[:15]))
    (root / "talkthewalk.valid.json").write_text(json.dumps(dialogues[15:]))
    return root, nmaps, dialogues


def test_real_config_round_trip(tmp_path, release):
    root, nmaps, dialogues = release
    got, got_maps = ttw_language_data.load_dialogues("real", str(tmp_path), str(root))
    assert got == tb.split_by_window(dialogues)       # merged, then split by window, in order
    assert sum(map(len, got.values())) == 24 and all(got.values())
    for split, eps in got.items():
        assert all(td.dialogue_split(ep) == split for ep in eps)
    assert_same_maps(got_maps, nmaps)
    # prepared: the manual files are not read again
    again, _ = ttw_language_data.load_dialogues("real", str(tmp_path))
    assert again == got


def test_configurations_define_the_split(tmp_path, release):
    root, nmaps, dialogues = release
    manual = tmp_path / "manual"
    manual.mkdir()
    for name in os.listdir(root):
        os.symlink(root / name, manual / name)
    moved = dialogues[0]
    assert td.dialogue_split(moved) != "test"
    cfg = {"neighborhood": moved["neighborhood"], "boundaries": moved["boundaries"],
           "target_location": moved["target_location"]}
    (manual / "configurations.test.json").write_text(json.dumps([cfg]))
    got, _ = ttw_language_data.load_dialogues("real", str(tmp_path / "data"), str(manual))
    key = td.window_key(moved)
    assert [td.window_key(ep) for ep in got["test"]].count(key) >= 1
    assert all(td.window_key(ep) != key for s in ("train", "valid") for ep in got[s])
    assert sum(map(len, got.values())) == 24
    # a window in two configuration files
    (manual / "configurations.valid.json").write_text(json.dumps([cfg]))
    with pytest.raises(td.DialogueFormatError, match="configurations.test.json: configuration 0: "
                       "field 'boundaries': window .* is also in configurations.valid.json"):
        tb.configuration_windows(str(manual))


def test_a_split_without_dialogues_reads_empty(tmp_path, release):
    root, nmaps, dialogues = release
    manual = tmp_path / "manual"
    manual.mkdir()
    os.symlink(root / "fidi", manual / "fidi")
    train = [ep for ep in dialogues if td.dialogue_split(ep) == "train"
             and ep["neighborhood"] == "fidi"]
    (manual / "talkthewalk.test.json").write_text(json.dumps(train))
    got, got_maps = ttw_language_data.load_dialogues("real", str(tmp_path / "data"), str(manual))
    assert got == {"train": train, "valid": [], "test": []} and list(got_maps) == ["fidi"]


def test_missing_and_malformed_files(tmp_path, release):
    root, nmaps, dialogues = release
    manual = tmp_path / "manual"
    manual.mkdir()
    # an empty manual directory: TFDS refuses with our instructions
    with pytest.raises(AssertionError, match="talkthewalk.train.json"):
        build(tmp_path / "d0", "real", manual)
    # maps but no dialogues: the expected files and where to get them
    (manual / "hellskitchen_map.json").symlink_to(root / "hellskitchen_map.json")
    with pytest.raises(FileNotFoundError, match="talkthewalk.train.json, talkthewalk.valid.json,"
                                                " talkthewalk.test.json.*download_data.sh"):
        build(tmp_path / "d1", "real", manual)
    # dialogues in fidi, whose map is missing
    (manual / "talkthewalk.test.json").symlink_to(root / "talkthewalk.train.json")
    with pytest.raises(FileNotFoundError, match="fidi/map.json.*fidi_map.json"):
        build(tmp_path / "d2", "real", manual)
    # a malformed episode: file, episode and field
    bad = json.loads((root / "talkthewalk.valid.json").read_text())
    bad[2]["dialog"][1]["episode_done"] = 0
    (manual / "talkthewalk.valid.json").write_text(json.dumps(bad))
    with pytest.raises(td.DialogueFormatError, match=r"talkthewalk.valid.json: episode 2: "
                                                     r"field 'dialog\[1\].episode_done'"):
        build(tmp_path / "d3", "real", manual)
    # not prepared
    with pytest.raises(FileNotFoundError, match="is not prepared"):
        tb.load_talk_the_walk(str(tmp_path / "d4"), "real")


def test_synthetic_dialogues_on_the_real_maps(tmp_path, real_maps_dir):
    dialogues, got_maps = ttw_language_data.load_dialogues(
        "synthetic_real_maps", str(tmp_path), real_maps_dir)
    real = maps.load_maps(real_maps_dir)
    assert_same_maps(got_maps, real)
    assert {s: len(d) for s, d in dialogues.items()} == {"train": 600, "valid": 150, "test": 150}
    for split, eps in dialogues.items():
        for i, ep in enumerate(eps):
            td.validate_dialogue(ep, split, i)
            assert td.dialogue_split(ep) == split and ep["neighborhood"] in got_maps
    ex = td.utterance_examples(dialogues["train"])
    vocab = td.build_vocab(td.dialogue_texts(dialogues["train"]))
    arr = td.encode_examples(ex, got_maps, vocab, 4, 20, 40)
    assert arr["landmarks"].shape == (len(ex), 4, 4, 3)
    assert (arr["obs"][:, 0] > 0).any(axis=-1).all()       # the first corner is always observed
