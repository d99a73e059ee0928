"""TF-free tests of the `arramon` TFDS builder (build to ArrayRecord, read with data_source) and
of `ttw_jax.arramon.dataset`."""
import json
import os

import pytest
import tensorflow_datasets as tfds

from tests.conftest import shared_path
from ttw_datasets.arramon import arramon_dataset_builder as ab
from ttw_jax.arramon import dataset as arramon_data, records as ar
from ttw_jax.arramon.synthetic import synthetic_instances

HINDI_NAVI = "सीधे चलिए और लाल गेंद उठाइए।"
HINDI_ASSEM = "गेंद को नीले मग के पीछे रखिए।"
TINY = (("train", 5, 0), ("val_seen", 3, 1), ("val_unseen", 2, 2), ("test_unseen", 2, 3))


def build(data_dir, config, manual_dir=None):
    builder = ab.Builder(config=config, data_dir=str(data_dir), file_format="array_record")
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(manual_dir))
        if manual_dir else None)


@pytest.fixture(scope="module")
def val_seen():
    return ar.read_arramon(shared_path("arramon", "val_seen.json"))


def write_json(path, instances):
    path.write_text(json.dumps(instances, ensure_ascii=False), encoding="utf-8")
    return path


def test_configs():
    assert ab.Builder.DEFAULT_CONFIG_NAME == "synthetic"
    configs = ab.Builder.builder_configs
    assert {n: c.source for n, c in configs.items()} == {
        "synthetic": "synthetic", "english": "english", "hindi": "hindi"}
    splits = configs["synthetic"].synthetic_splits
    assert [(s, n) for s, n, _ in splits] == [("train", 2000), ("val_seen", 200),
                                              ("val_unseen", 200), ("test_unseen", 200)]
    assert len({seed for _, _, seed in splits}) == 4
    assert ab.MANUAL_FILES["hindi"]["val_unseen"] == "val_unseen_hindi.json"
    with pytest.raises(ValueError, match="source must be one of"):
        ab.ArramonConfig(name="x", source="french").validate()


def test_synthetic_round_trip(tmp_path):
    cfg = ab.ArramonConfig(name="synthetic_tiny", synthetic_splits=TINY)
    build(tmp_path, cfg)
    got = ab.load_arramon(str(tmp_path), cfg)
    assert list(got) == [s for s, _, _ in TINY]
    for split, num, seed in TINY:
        assert got[split] == synthetic_instances(num, seed)   # exactly, world included
    # the filter features match the records
    source = tfds.builder("arramon/synthetic_tiny", data_dir=str(tmp_path)).as_data_source()
    rows = source["train"].__getitems__(list(range(5)))
    for row in rows:
        inst = got["train"][int(row["index"])]
        assert row["code"].decode() == inst["code"] and int(row["mapId"]) == inst["mapId"]
    only = arramon_data.load_split_records(cfg, ["val_seen"], tfds_dir=str(tmp_path))
    assert list(only) == ["val_seen"] and only["val_seen"] == got["val_seen"]


@pytest.mark.slow
def test_english_from_the_real_val_seen(tmp_path, val_seen):
    manual = tmp_path / "manual"
    manual.mkdir()
    os.symlink(shared_path("arramon", "val_seen.json"), manual / "val_seen.json")
    # The official val_unseen carries neither `code` nor `filename`: such a file beside val_seen
    # builds, and both splits load.
    unseen = [{k: v for k, v in inst.items() if k not in ("code", "filename")}
              for inst in val_seen[:3]]
    write_json(manual / "val_unseen.json", unseen)
    got = arramon_data.load_split_records("english", ["val_seen", "val_unseen"],
                                          tfds_dir=str(tmp_path / "data"),
                                          manual_dir=str(manual))
    assert got["val_seen"] == val_seen and got["val_unseen"] == unseen
    source = tfds.builder("arramon/english", data_dir=str(tmp_path / "data")).as_data_source()
    rows = source["val_unseen"].__getitems__([0, 1, 2])
    assert sorted(row["code"].decode() for row in rows) == ["", "", ""]
    # prepared: the manual files are not read again
    os.rename(manual, tmp_path / "gone")
    again = arramon_data.load_split_records("english", ["val_unseen"],
                                            tfds_dir=str(tmp_path / "data"))
    assert again["val_unseen"] == unseen
    with pytest.raises(ValueError, match=r"arramon/english has no split\(s\) \['train'\]; it "
                                         r"has \['val_seen', 'val_unseen'\]"):
        arramon_data.load_split_records("english", ["train"], tfds_dir=str(tmp_path / "data"))
    with pytest.raises(ValueError, match="unknown arramon config 'french'; choose from"):
        arramon_data.load_split_records("french", ["train"], tfds_dir=str(tmp_path / "data"))


def test_example_keys_are_unique_and_need_no_code(val_seen):
    keys = ab.example_keys(val_seen)
    assert len(set(keys)) == len(val_seen) == 1065
    codes = [inst["code"] for inst in val_seen]
    assert len(set(codes)) < len(codes)   # the release repeats codes: keys do not use them
    assert keys == [f"{inst['mapId']}_{i}" for i, inst in enumerate(val_seen)]
    bare = [{k: v for k, v in inst.items() if k not in ("code", "filename")}
            for inst in val_seen[:2] * 2]                  # even a repeated mapId
    assert ab.example_keys(bare) == [f"{bare[i]['mapId']}_{i}" for i in range(4)]
    assert len(set(ab.example_keys(bare))) == 4
    assert ab.to_example(bare[0], 0)["code"] == ""


def test_hindi_config(tmp_path, val_seen):
    manual = tmp_path / "manual"
    manual.mkdir()
    hindi = json.loads(json.dumps(val_seen[:2]))
    for inst in hindi:
        inst["instructions"] = {"navi_inst_gt": [HINDI_NAVI, HINDI_NAVI],
                                "assem_inst_gt": [HINDI_ASSEM, HINDI_ASSEM]}
    write_json(manual / "val_unseen_hindi.json", hindi)
    write_json(manual / "val_unseen.json", val_seen[:1])   # English: not read by `hindi`
    build(tmp_path / "data", "hindi", manual)
    got = ab.load_arramon(str(tmp_path / "data"), "hindi")
    assert got == {"val_unseen": hindi}
    assert got["val_unseen"][0]["instructions"]["navi_inst_gt"][0] == HINDI_NAVI


def test_missing_files_name_the_expected_files(tmp_path):
    manual = tmp_path / "manual"
    manual.mkdir()
    # An empty manual directory: TFDS refuses with our instructions, which name the files.
    with pytest.raises(AssertionError) as e:
        build(tmp_path / "data", "english", manual)
    for name in ("train.json", "test_unseen.json", "val_seen_hindi.json",
                 "https://github.com/hyounghk/ArraMon", "e-mail"):
        assert name in str(e.value)
    # Something else there, but no instance file: the builder names every file it looked for.
    (manual / "README.txt").write_text("not an instance file")
    for config, names in (("english", ("train.json", "val_seen.json", "val_unseen.json",
                                       "test_unseen.json")),
                          ("hindi", ("train_hindi.json", "val_seen_hindi.json",
                                     "val_unseen_hindi.json", "test_unseen_hindi.json"))):
        with pytest.raises(FileNotFoundError) as e:
            build(tmp_path / "data", config, manual)
        for name in names + ("github.com/hyounghk/ArraMon", "data/", "e-mail"):
            assert name in str(e.value), name
    with pytest.raises(FileNotFoundError, match="not prepared"):
        ab.load_arramon(str(tmp_path / "data"), "english")


def test_a_malformed_manual_file_names_file_instance_and_field(tmp_path, val_seen):
    manual = tmp_path / "manual"
    manual.mkdir()
    bad = json.loads(json.dumps(val_seen[:2]))
    bad[1]["gt_actions"]["assem_action_gt"][0][0] = "u"
    path = write_json(manual / "train.json", bad)
    with pytest.raises(ar.ArramonFormatError,
                       match=f"{path}: instance 1 \\(code '{bad[1]['code']}'\\): field "
                             r"'gt_actions.assem_action_gt\[0\]\[0\]' is not one of"):
        build(tmp_path / "data", "english", manual)
    write_json(manual / "train.json", [])
    with pytest.raises(ar.ArramonFormatError, match="train.json: no instances"):
        build(tmp_path / "data", "english", manual)
    # nothing was written
    assert not ab.Builder(config="english", data_dir=str(tmp_path / "data")).is_prepared()
    assert not any(files for _, _, files in os.walk(tmp_path / "data" / "arramon" / "english"))
