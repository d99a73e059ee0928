"""Bad values the official formats can carry, through each system's reader: every one is an
error of the format family naming its file and the line, entry or field, in one line (never a
traceback from deep inside numpy, json or an encoder)."""
import json

import pytest

from ttw_jax.arramon import records as ar
from ttw_jax.core.records import RecordFormatError
from ttw_jax.rxr import records as rr
from ttw_jax.talk_the_walk.language import dialogues as td
from ttw_jax.touchdown import records as tr

LONE = "\ud800"   # a lone surrogate: JSON's "\\ud800" escape decodes to it


def touchdown(**changes):
    rec = {"route_id": 7, "navigation_text": "Go straight.", "td_location_text": "On the box.",
           "route_panoids": ["a", "b"], "start_heading": 0.0, "end_heading": 0.0,
           "main_pano": "b", "main_heading": "0", "main_static_center": '{"x":0.5,"y":0.5}',
           "pre_pano": "", "pre_heading": "", "pre_static_center": '{"x":-1,"y":-1}',
           "post_pano": "", "post_heading": "", "post_static_center": '{"x":-1,"y":-1}'}
    rec.update(changes)
    return rec


def r2r(**changes):
    entry = {"distance": 9.5, "scan": "scanA", "path_id": 6, "path": ["a", "b"], "heading": 3.0,
             "instructions": ["Go.", "Walk on.", "Stop there."]}
    entry.update(changes)
    return entry


def dialogue(text):
    return {"neighborhood": "fidi", "boundaries": [0, 0, 3, 3], "start_location": [0, 0, 0],
            "target_location": [1, 1, 0],
            "dialog": [{"id": "Tourist", "text": text, "episode_done": False, "time": 1.0}]}


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    return str(path)


CASES = {
    # id beyond int32 (and int64): named where it is read, not overflowed later
    "touchdown route_id 2**70": ("train.json", json.dumps(touchdown(route_id=2**70)) + "\n",
                                 tr.read_records, r"train.json:1: field 'route_id': "
                                 r"1180591620717411303424 is out of range"),
    "r2r path_id 2**40": ("R2R_train.json", json.dumps([r2r(path_id=2**40)]), rr.read_r2r,
                          r"R2R_train.json: entry 0: field 'path_id': \d+ is out of range"),
    # a lone surrogate in text (valid JSON, not UTF-8)
    "touchdown text surrogate": ("dev.json", json.dumps(touchdown(navigation_text=LONE)) + "\n",
                                 tr.read_records, r"dev.json:1: field 'navigation_text'"),
    "r2r instruction surrogate": ("R2R_val.json", json.dumps([r2r(instructions=[LONE])]),
                                  rr.read_r2r, r"R2R_val.json: entry 0: field 'instructions'"),
    "ttw dialogue surrogate": ("talkthewalk.train.json", json.dumps([dialogue(LONE)]),
                               td.read_dialogues, r"talkthewalk.train.json: episode 0.*text"),
    # a path out of the data folder
    "r2r scan ../": ("R2R_test.json", json.dumps([r2r(scan="../../etc")]), rr.read_r2r,
                     r"R2R_test.json: entry 0: field 'scan' is not an id without path"),
    # nesting deep enough to overflow the JSON decoder's recursion
    "deep json list": ("R2R_deep.json", "[" * 100_000 + "]" * 100_000, rr.read_r2r,
                       r"R2R_deep.json: JSON nested too deeply"),
    "deep jsonl line": ("deep.json", "[" * 100_000 + "]" * 100_000 + "\n", tr.read_records,
                        r"deep.json:1: JSON nested too deeply"),
    "arramon deep": ("val_seen.json", "{\"a\": " * 100_000 + "1" + "}" * 100_000,
                     ar.read_arramon, r"val_seen.json: JSON nested too deeply"),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_named_in_one_line(tmp_path, case):
    name, content, reader, message = CASES[case]
    path = write(tmp_path, name, content)
    with pytest.raises(RecordFormatError, match=message) as e:
        reader(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def _npz(path, **arrays):
    import numpy as np
    np.savez(path, **arrays)
    return str(path)


def _truncated(path, **arrays):
    _npz(path, **arrays)
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])
    return str(path)


def _binary_cases():
    """(file name, writer(path), reader(path)): the user's feature files, object or truncated."""
    import numpy as np
    from ttw_jax.arramon import features as af
    from ttw_jax.core.pano_graph import NodeTable
    from ttw_jax.rxr import view_features as vf
    from ttw_jax.touchdown import features as tf
    nodes = NodeTable.from_ids(["a", "b"])
    objects = dict(ids=np.asarray(["a", "b"], object), features=np.zeros((2, 36, 4)))
    good = dict(panoids=np.asarray(["a", "b"]), features=np.zeros((2, 3, 4), np.float32))
    return {
        "touchdown features truncated": ("feats.npz", lambda p: _truncated(p, **good),
                                         lambda p: tf.load_pano_features(p, nodes)),
        "touchdown features object": ("feats.npz", lambda p: _npz(
            p, panoids=np.asarray(["a", "b"], object), features=good["features"]),
            lambda p: tf.load_pano_features(p, nodes)),
        "rxr view features object": ("views.npz", lambda p: _npz(p, **objects),
                                     lambda p: vf.feature_table(p, nodes, p + ".cache")),
        "rxr view features truncated": ("views.npz", lambda p: _truncated(
            p, ids=np.asarray(["a", "b"]), features=np.zeros((2, 36, 4))),
            lambda p: vf.feature_table(p, nodes, p + ".cache")),
        "rxr text features truncated": ("000001_en_text_features.npz", lambda p: _truncated(
            p, features=np.zeros((5, 768), np.float32)), rr.load_text_features),
        "arramon feature object": ("vfeat_1_navi_0_0.npy", lambda p: np.save(
            p, np.asarray([None] * 3, object), allow_pickle=True), af.read_feature),
    }


@pytest.mark.parametrize("case", list(_binary_cases()))
def test_bad_feature_files_are_named_in_one_line(tmp_path, case):
    name, writer, reader = _binary_cases()[case]
    path = str(tmp_path / name)
    writer(path)
    with pytest.raises(ValueError) as e:      # RecordFormatError is a ValueError
        reader(path)
    assert str(e.value).startswith(path) and "\n" not in str(e.value), str(e.value)


def test_text_features_of_another_width_are_named_by_instruction():
    import numpy as np
    from ttw_jax.rxr.episodes import _text_features
    recs = [{"instruction_id": 3, "text_features": np.zeros((4, 768), np.float32)},
            {"instruction_id": 9, "text_features": np.zeros((4, 512), np.float32)}]
    with pytest.raises(ValueError, match=r"instruction 9: text features of shape \(4, 512\), "
                                         r"expected \[subwords, 768\]"):
        _text_features(recs, 8)
