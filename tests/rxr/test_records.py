"""Reading and validating R2R / RxR instruction records (`ttw_jax.rxr.records`)."""
import gzip
import json
import math
import os

import numpy as np
import pytest

from tests.conftest import shared_path
from ttw_jax.rxr import records as rr, views
from ttw_jax.rxr.graph import load_matterport_graph

# ----------------------------------------------------------------------------- fixture writers

HINDI = "सीधे चलिए और सोफ़े के पास रुकिए।"


def timed(words_and_times):
    """`timed_instruction` items; a time of None leaves the key out (as parts of the release)."""
    out = []
    for word, start, end in words_and_times:
        item = {"word": word}
        if start is not None:
            item["start_time"] = start
        if end is not None:
            item["end_time"] = end
        out.append(item)
    return out


def rxr_line(instruction_id, language="en-US", **changes):
    """One guide line in the release's schema (a small valid default)."""
    line = {
        "split": "train", "instruction_id": instruction_id, "annotator_id": 3,
        "language": language, "path_id": 100 + instruction_id, "scan": "scanA",
        "path": ["vp_a", "vp_b", "vp_c"], "heading": 1.25,
        "instruction": "Walk past the sofa and stop.",
        "timed_instruction": timed([("Walk", 0.2, 0.6), ("past", 1.5, 2.5)]),
        "edit_distance": 0.125,
    }
    line.update(changes)
    return {k: v for k, v in line.items() if v is not None}


def write_jsonl(path, rows, compress=None):
    """JSON lines (gzip-compressed if the name ends in .gz, unless `compress` says otherwise)."""
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    compress = str(path).endswith(".gz") if compress is None else compress
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def camera_matrix(heading_deg, elevation_deg, up="y", position=(1.0, 2.0, 1.5)):
    """Camera-to-world [4, 4] of a camera (looking along its -z, +y up, no roll) facing
    (heading, elevation) in Matterport terms; world frame three.js y-up ("y") or Matterport
    z-up ("z")."""
    h, e = math.radians(heading_deg), math.radians(elevation_deg)
    forward = np.array([math.sin(h) * math.cos(e), math.cos(h) * math.cos(e), math.sin(e)])
    right = np.array([math.cos(h), -math.sin(h), 0.0])
    z = -forward
    y = np.cross(z, right)
    m = np.eye(4)
    m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = right, y, z, position
    if up == "y":   # Matterport (x, y, z) -> three.js (x, z, -y)
        to_three = np.array([[1, 0, 0], [0, 0, 1], [0, -1, 0]], float)
        m[:3] = to_three @ m[:3]
    return m


def write_pose_trace(path, panos, times, angles, up="y", audio_time=None, layout="release",
                     **extra):
    """An `.npz` pose trace; layout "release" ([T, 1] pano/time, [T, 16] extrinsics) or
    "square" ([T] and [T, 4, 4]); `extra` adds keys (intrinsic_matrix, feature_weights,
    text_masks, ...), None drops one."""
    ext = np.stack([camera_matrix(h, e, up) for h, e in angles]).astype(np.float32)
    arrays = {"pano": np.asarray(panos), "time": np.asarray(times, np.float32),
              "extrinsic_matrix": ext}
    if audio_time is not None:
        arrays["audio_time"] = np.asarray(audio_time, np.float32)
    if layout == "release":
        arrays["pano"] = arrays["pano"][:, None]
        arrays["time"] = arrays["time"][:, None]
        arrays["extrinsic_matrix"] = ext.reshape(len(panos), 16)
        if audio_time is not None:
            arrays["audio_time"] = arrays["audio_time"][:, None]
    arrays.update(extra)
    arrays = {k: v for k, v in arrays.items() if v is not None}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.savez(path, **arrays)
    return str(path)


# The hand-computed case: path a -> b -> c, two snapshots per step, six words.
CASE_PATH = ["vp_a", "vp_b", "vp_c"]
CASE_PANOS = ["vp_a", "vp_a", "vp_b", "vp_b", "vp_c", "vp_c"]
CASE_TIMES = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
# (heading, elevation) degrees -> nearest view: 12, 15 | 6, 31 | 0, 12
CASE_ANGLES = [(0, 0), (90, 0), (180, -30), (200, 35), (350, -50), (10, 10)]
CASE_WORDS = timed([("Walk", 0.2, 0.6), ("past", 1.5, 2.5), ("the", 3.0, 3.0),
                    ("sofa", None, None), ("and", 4.0, None), ("stop.", 4.5, 6.0)])
# step a covers (-inf, 2), b [2, 4), c [4, inf); "sofa" inherits [3, 4], "and" [4, 4.5]
CASE_STEP_WORDS = np.array([[1, 1, 0, 0, 0, 0],
                            [0, 1, 1, 1, 0, 0],
                            [0, 0, 0, 0, 1, 1]], bool)
CASE_STEP_VIEWS = np.zeros((3, 36), bool)
CASE_STEP_VIEWS[0, [12, 15]] = CASE_STEP_VIEWS[1, [6, 31]] = CASE_STEP_VIEWS[2, [0, 12]] = True


def write_case_trace(manual, instruction_id=7, split="train", annotator="guide", **kwargs):
    folder = os.path.join(str(manual), "pose_traces", f"rxr_{split}")
    return write_pose_trace(
        os.path.join(folder, f"{instruction_id:06d}_{annotator}_pose_trace.npz"),
        CASE_PANOS, CASE_TIMES, CASE_ANGLES, **kwargs)


# ----------------------------------------------------------------------------- R2R

@pytest.mark.slow
def test_r2r_real_files_counts_ids_and_graph():
    conn = shared_path("matterport", "connectivity")
    counts = {}
    all_records = []
    for split in ("train", "val_seen", "test"):
        path = shared_path("r2r", f"R2R_{split}.json")
        records = rr.read_r2r(path)
        with open(path) as f:
            raw = json.load(f)
        counts[split] = (len(raw), len(records))
        expected = [(e["path_id"] * 10 + k, e["path_id"], e["scan"], e["path"], e["heading"],
                     text, e.get("distance", math.nan))
                    for e in raw for k, text in enumerate(e["instructions"])]
        got = [(r["instruction_id"], r["path_id"], r["scan"], r["path"], r["heading"],
                r["instruction"], r["distance"]) for r in records]
        assert [g[:6] for g in got] == [e[:6] for e in expected]
        assert all(g[6] == e[6] or (math.isnan(g[6]) and math.isnan(e[6]))
                   for g, e in zip(got, expected))
        assert len({r["instruction_id"] for r in records}) == len(records)
        for r in records:
            assert set(r) == set(rr.RECORD_KEYS)
            assert (r["language"], r["annotator"], r["timed_words"]) == ("en", "r2r", [])
            assert r["step_words"] is r["step_views"] is r["text_features"] is None
            assert math.isnan(r["edit_distance"])
        all_records += records
        test_records = records   # the last split
    assert counts == {"train": (4675, 14039), "val_seen": (340, 1021), "test": (1391, 4173)}
    # every path viewpoint and every step is in the Matterport graphs
    graph, nodes, _ = load_matterport_graph(conn)
    neighbors = np.asarray(graph.neighbors)
    paths = {(r["scan"], tuple(r["path"])) for r in all_records}
    assert len(paths) > 5000   # distinct paths (1-viewpoint test paths repeat)
    steps = 0
    for scan, path in paths:
        ids = nodes.lookup([f"{scan}/{v}" for v in path], "viewpoint")
        for a, b in zip(ids[:-1], ids[1:]):
            assert b in neighbors[a], (scan, path)
            steps += 1
    assert steps == sum(len(p) - 1 for _, p in paths) > 20_000
    # the test split gives the start only
    assert {len(r["path"]) for r in test_records} == {1}


def write_r2r(tmp_path, entries, name="R2R_val_seen.json"):
    path = tmp_path / name
    path.write_text(json.dumps(entries))
    return str(path)


def r2r_entry(path_id=6, **changes):
    entry = {"distance": 9.5, "scan": "scanA", "path_id": path_id, "path": ["vp_a", "vp_b"],
             "heading": 3.0, "instructions": ["Go.", "Walk on.", "Stop there."]}
    entry.update(changes)
    return {k: v for k, v in entry.items() if v is not None}


def test_r2r_small_file_and_text_features(tmp_path):
    (tmp_path / "text_features").mkdir()
    feats = np.arange(6, dtype=np.float64).reshape(2, 3)
    np.save(tmp_path / "text_features" / "000051.npy", feats)
    path = write_r2r(tmp_path, [r2r_entry(5), r2r_entry(7, distance=None,
                                                        instructions=["a", "b", "c", "d"])])
    records = rr.read_r2r(path)
    assert [r["instruction_id"] for r in records] == [50, 51, 52, 70, 71, 72, 73]
    assert records[1]["instruction"] == "Walk on." and records[6]["instruction"] == "d"
    assert records[0]["distance"] == 9.5 and math.isnan(records[3]["distance"])
    np.testing.assert_array_equal(records[1]["text_features"], feats)
    assert records[1]["text_features"].dtype == np.float32
    assert all(r["text_features"] is None for i, r in enumerate(records) if i != 1)


@pytest.mark.parametrize("entry, message", [
    (r2r_entry(scan=None), "entry 1: missing field 'scan'"),
    (r2r_entry(scan="../../x"), "entry 1: field 'scan' is not an id without path separators"),
    (r2r_entry(scan="/abs/scan"), "entry 1: field 'scan' is not an id without path separators"),
    (r2r_entry(scan=".."), "entry 1: field 'scan' is not an id without path separators"),
    (r2r_entry(heading="3.0"), "entry 1: field 'heading': is not an angle in radians"),
        (r2r_entry(heading=1e300), "entry 1: field 'heading': is not an angle in radians"),
        (r2r_entry(distance=math.nan), "entry 1: field 'distance': is not a distance >= 0"),
        (r2r_entry(distance=-1.0), "entry 1: field 'distance': is not a distance >= 0"),
        (r2r_entry(instructions=["Go.", ""]), "entry 1: field 'instructions' is not a list of 1 "
                                              "to 10 non-empty strings"),
    (r2r_entry(path=[]), "entry 1: field 'path' is not a non-empty list"),
    (r2r_entry(path_id=-2), "entry 1: field 'path_id' is not an integer >= 0"),
    (r2r_entry(instructions=["x"] * 11), "entry 1: field 'instructions' is not a list of 1 to 10"),
    (r2r_entry(distance="far"), "entry 1: field 'distance': is not a distance"),
    (r2r_entry(5), "entry 1: field 'path_id' 5 repeats entry 0"),
    ("not an object", "entry 1: expected a JSON object"),
])
def test_r2r_malformed_entries_name_file_entry_and_field(tmp_path, entry, message):
    path = write_r2r(tmp_path, [r2r_entry(5), entry])
    with pytest.raises(rr.RecordFormatError, match=f"^{path}: {message}"):
        rr.read_r2r(path)


def test_r2r_unreadable_files(tmp_path):
    path = tmp_path / "R2R_train.json"
    path.write_text('[{"scan": ')
    with pytest.raises(rr.RecordFormatError, match=f"{path}: invalid JSON at line 1"):
        rr.read_r2r(str(path))
    path.write_text('{"scan": "x"}')
    with pytest.raises(rr.RecordFormatError, match="expected a JSON list of paths"):
        rr.read_r2r(str(path))
    with pytest.raises(FileNotFoundError, match="R2R_test.json.*Matterport3DSimulator"):
        rr.read_r2r(str(tmp_path / "R2R_test.json"))


# ----------------------------------------------------------------------------- views and poses

def test_view_constants_and_nearest_view():
    assert views.NUM_VIEWS == 36
    assert views.VIEW_HEADINGS.shape == views.VIEW_ELEVATIONS.shape == (36,)
    for v in (0, 13, 35):
        assert views.nearest_view(views.VIEW_HEADINGS[v], views.VIEW_ELEVATIONS[v]) == v
    np.testing.assert_allclose(np.degrees(views.VIEW_HEADINGS[[0, 1, 11, 12, 25]]),
                               [0, 30, 330, 0, 30])
    np.testing.assert_allclose(np.degrees(views.VIEW_ELEVATIONS[[0, 11, 12, 23, 24, 35]]),
                               [-30, -30, 0, 0, 30, 30])
    assert views.nearest_view(math.radians(359), 0.0) == 12       # wraps to heading 0
    assert views.nearest_view(math.radians(-20), math.radians(80)) == 24 + 11
    assert views.nearest_view(math.radians(44), math.radians(-89)) == 1
    got = views.nearest_view(np.radians([[0, 95], [181, 301]]), np.radians([[-16, -14], [14, 16]]))
    np.testing.assert_array_equal(got, [[0, 12 + 3], [12 + 6, 24 + 10]])


@pytest.mark.parametrize("up", ["y", "z"])
def test_camera_view_angles_in_both_world_frames(up):
    angles = [(0, 0), (90, 20), (200, -35), (315, 60)]
    ext = np.stack([camera_matrix(h, e, up) for h, e in angles])
    for frame in (up, "auto"):
        for m in (ext, ext.reshape(len(angles), 16)):
            heading, elevation = rr.camera_view_angles(m, frame)
            np.testing.assert_allclose(np.degrees(heading), [a[0] for a in angles], atol=1e-9)
            np.testing.assert_allclose(np.degrees(elevation), [a[1] for a in angles], atol=1e-9)
    with pytest.raises(ValueError, match="world_up"):
        rr.camera_view_angles(ext, "x")


def test_fill_word_times():
    nan = math.nan
    s, e = rr.fill_word_times([0, nan, nan, 3, nan], [1, nan, nan, nan, nan])
    np.testing.assert_array_equal(s, [0, 1, 1, 3, 3])    # a missing start: the previous time
    np.testing.assert_array_equal(e, [1, 3, 3, 3, 3])    # a missing end: the next time
    s, e = rr.fill_word_times([nan, 2, 5], [nan, 4, 4])   # leading word: the next time
    np.testing.assert_array_equal(s, [2, 2, 5])
    np.testing.assert_array_equal(e, [2, 4, 5])           # an end before its start is raised
    assert [len(x) for x in rr.fill_word_times([], [])] == [0, 0]
    with pytest.raises(ValueError, match="no word has"):
        rr.fill_word_times([nan, nan], [nan, nan])


def test_step_masks_hand_computed_case():
    words, starts, ends = rr._timed_words({"timed_instruction": CASE_WORDS}, "x")
    assert words == ["Walk", "past", "the", "sofa", "and", "stop."]
    np.testing.assert_array_equal(starts, [0.2, 1.5, 3.0, 3.0, 4.0, 4.5])
    np.testing.assert_array_equal(ends, [0.6, 2.5, 3.0, 4.0, 4.5, 6.0])
    ext = np.stack([camera_matrix(h, e) for h, e in CASE_ANGLES])
    sw, sv = rr.step_masks(CASE_PATH, CASE_PANOS, CASE_TIMES, ext, starts, ends)
    np.testing.assert_array_equal(sw, CASE_STEP_WORDS)
    np.testing.assert_array_equal(sv, CASE_STEP_VIEWS)


def test_step_assignment_follows_the_path_in_order():
    # a path that revisits vp_a; a step with no snapshot (vp_c) gets nothing
    path = ["vp_a", "vp_b", "vp_a", "vp_c", "vp_d"]
    assert list(rr.assign_steps(path, ["vp_a", "vp_b", "vp_b", "vp_a", "vp_d"], "t")) == [
        0, 1, 1, 2, 4]
    ext = np.stack([camera_matrix(0, 0)] * 5)
    sw, sv = rr.step_masks(path, ["vp_a", "vp_b", "vp_b", "vp_a", "vp_d"], [0, 1, 2, 3, 4], ext,
                           [0.5, 3.5, 9.0], [0.6, 3.6, 9.5])
    np.testing.assert_array_equal(sw, [[1, 0, 0], [0, 0, 0], [0, 1, 0], [0, 0, 0], [0, 0, 1]])
    assert sv.sum(1).tolist() == [1, 1, 1, 0, 1]
    with pytest.raises(rr.PoseTraceError, match="trace.npz: key 'pano': snapshot 2 is at "
                                                "viewpoint 'vp_a', which is not on the path at "
                                                "or after step 1"):
        rr.assign_steps(["vp_a", "vp_b"], ["vp_a", "vp_b", "vp_a"], "trace.npz")


# ----------------------------------------------------------------------------- RxR

def test_read_rxr_gz_and_plain_jsonl(tmp_path):
    rows = [rxr_line(7),
            rxr_line(9, "hi-IN", instruction=HINDI, edit_distance=None,
                     timed_instruction=timed([("सीधे", 0.0, 0.5), ("चलिए", None, 1.2)])),
            rxr_line(8, "te", instruction="నేరుగా నడవండి", timed_instruction=None)]
    gz = write_jsonl(tmp_path / "rxr_train_guide.jsonl.gz", rows)
    (tmp_path / "plain").mkdir()
    plain = write_jsonl(tmp_path / "plain" / "rxr_train_guide.jsonl", rows)
    records = rr.read_rxr(gz)
    assert rr.read_rxr(plain) == records
    assert [r["instruction_id"] for r in records] == [7, 9, 8]
    assert [r["language"] for r in records] == ["en-US", "hi-IN", "te-IN"]
    first = records[0]
    assert first == {
        "instruction_id": 7, "path_id": 107, "scan": "scanA", "path": ["vp_a", "vp_b", "vp_c"],
        "heading": 1.25, "instruction": "Walk past the sofa and stop.", "language": "en-US",
        "annotator": "guide", "edit_distance": 0.125, "distance": first["distance"],
        "timed_words": ["Walk", "past"], "step_words": None, "step_views": None, "step_subwords": None,
        "text_features": None, "translated_from": ""}
    assert math.isnan(first["distance"])
    assert records[1]["instruction"] == HINDI and records[1]["timed_words"] == ["सीधे", "चलिए"]
    assert math.isnan(records[1]["edit_distance"])
    assert records[2]["timed_words"] == []
    assert rr.parse_rxr_file_name(gz) == ("train", "guide")
    assert rr.parse_rxr_file_name("rxr_test_standard_public_guide.jsonl.gz") == (
        "test_standard", "guide")
    assert rr.parse_rxr_file_name("rxr_val_unseen_follower.jsonl") == ("val_unseen", "follower")
    assert rr.parse_rxr_file_name("R2R_train.json") is None


@pytest.mark.parametrize("line, message", [
    (rxr_line(2, path=None), "missing field 'path'"),
    (rxr_line(2, scan=""), "field 'scan' is not an id without path separators"),
    (rxr_line(2, scan="a/../../b"), "field 'scan' is not an id without path separators"),
    (rxr_line(2, language="fr-FR"), "field 'language' is not one of"),
    (rxr_line(2, heading="north"), "field 'heading': is not an angle in radians"),
    (dict(rxr_line(2), instruction_id="2"), "field 'instruction_id' is not an integer"),
    (rxr_line(2, timed_instruction=[{"word": 5}]), r"field 'timed_instruction\[0\].word'"),
    (rxr_line(2, timed_instruction=timed([("a", "0.1", 1.0)])),
     r"field 'timed_instruction\[0\].start_time': is not a time >= 0"),
    (rxr_line(2, timed_instruction=timed([("a", None, None)])),
     "field 'timed_instruction': no word has a start_time or end_time"),
    (rxr_line(2, edit_distance="low"), "field 'edit_distance' is not a number"),
    (rxr_line(1), "field 'instruction_id' 1 repeats line 1"),
])
def test_malformed_rxr_lines_name_file_line_and_field(tmp_path, line, message):
    path = write_jsonl(tmp_path / "rxr_val_seen_guide.jsonl.gz", [rxr_line(1), line])
    with pytest.raises(rr.RecordFormatError, match=f"^{path}:2: {message}"):
        rr.read_rxr(path)


def test_optional_numbers_absent_or_nan_infinity_and_negatives_are_rejected(tmp_path):
    """`edit_distance`: absent, null or NaN mean "absent" (NaN); word times: absent or null (as
    in parts of the release); an infinite value, a negative one, a NaN word time are rejected
    (the shared rule, `core.QUANTITIES`); numpy numbers pass."""
    path = write_jsonl(tmp_path / "rxr_train_guide.jsonl", [
        rxr_line(1, edit_distance=math.nan, timed_instruction=timed([("a", None, 1.0)]))])
    (rec,) = rr.read_rxr(path)
    assert math.isnan(rec["edit_distance"]) and rec["timed_words"] == ["a"]
    for line, message in [
            (rxr_line(1, edit_distance=math.inf),
             r"field 'edit_distance' is not a number \(or absent\): inf"),
            (rxr_line(1, edit_distance=-0.5), r"field 'edit_distance': is not a distance >= 0"),
            (rxr_line(1, timed_instruction=timed([("a", 0.0, math.inf)])),
             r"field 'timed_instruction\[0\].end_time': is not a time >= 0 .*: inf"),
            (rxr_line(1, timed_instruction=timed([("a", math.nan, 1.0)])),
             r"field 'timed_instruction\[0\].start_time': is not a time >= 0 .*: nan"),
            (rxr_line(1, timed_instruction=timed([("a", -2.0, 1.0)])),
             r"field 'timed_instruction\[0\].start_time': is not a time >= 0 .*: -2.0")]:
        path = write_jsonl(tmp_path / "rxr_train_guide.jsonl", [line])
        with pytest.raises(rr.RecordFormatError, match=f"^{path}:1: {message}"):
            rr.read_rxr(path)
    rec = rr.new_record(instruction_id=np.int64(3), path_id=1, scan="s", path=["a"],
                        heading=np.float32(0.5), instruction="Go.", language="en-US",
                        annotator="synthetic", edit_distance=np.float32(0.25))
    out = rr.check_record(rec, "gen")
    assert type(out["instruction_id"]) is int and out["edit_distance"] == 0.25
    with pytest.raises(rr.RecordFormatError, match="gen: field 'distance' is not a number"):
        rr.check_record(dict(rec, distance=-math.inf), "gen")


def test_unreadable_rxr_files(tmp_path):
    path = tmp_path / "rxr_train_guide.jsonl.gz"
    path.write_text('{"instruction_id": 1}\n')   # not gzip
    with pytest.raises(rr.RecordFormatError, match=f"{path}: unreadable"):
        rr.read_rxr(str(path))
    path = write_jsonl(tmp_path / "rxr_train_guide.jsonl", [rxr_line(1)])
    with open(path, "a") as f:
        f.write("\n{oops\n")
    with pytest.raises(rr.RecordFormatError, match=f"{path}:3: invalid JSON"):
        rr.read_rxr(path)
    with pytest.raises(FileNotFoundError, match="google-research-datasets/RxR"):
        rr.read_rxr(str(tmp_path / "rxr_val_seen_guide.jsonl.gz"))


@pytest.mark.parametrize("up, layout", [("y", "release"), ("z", "square")])
def test_guide_pose_trace_gives_the_masks(tmp_path, up, layout):
    path = write_jsonl(tmp_path / "rxr_train_guide.jsonl.gz",
                       [rxr_line(7, timed_instruction=CASE_WORDS), rxr_line(8)])
    write_case_trace(tmp_path, 7, up=up, layout=layout)
    first, second = rr.read_rxr(path)
    np.testing.assert_array_equal(first["step_words"], CASE_STEP_WORDS)
    np.testing.assert_array_equal(first["step_views"], CASE_STEP_VIEWS)
    assert second["step_words"] is None and second["step_views"] is None   # no trace file


def test_pose_trace_beside_the_split_folders_is_found(tmp_path):
    path = write_jsonl(tmp_path / "rxr_val_seen_guide.jsonl.gz",
                       [rxr_line(7, timed_instruction=CASE_WORDS)])
    write_pose_trace(os.path.join(tmp_path, "pose_traces", "000007_guide_pose_trace.npz"),
                     CASE_PANOS, CASE_TIMES, CASE_ANGLES)
    (rec,) = rr.read_rxr(path)
    np.testing.assert_array_equal(rec["step_words"], CASE_STEP_WORDS)


def test_follower_takes_guide_fields_and_its_own_trace(tmp_path):
    guide = write_jsonl(tmp_path / "rxr_train_guide.jsonl.gz",
                        [rxr_line(7, "hi", instruction=HINDI, timed_instruction=CASE_WORDS)])
    follower_path = ["vp_a", "vp_b", "vp_c"]
    follower = write_jsonl(tmp_path / "rxr_train_follower.jsonl.gz", [
        {"demonstration_id": 21, "instruction_id": 7, "annotator_id": 9, "path": follower_path,
         "metrics": {"ne": 0.0, "sr": 1.0}}])
    # the follower's own clock runs 100 s late; its audio_time is the guide's recording time
    write_case_trace(tmp_path, 21, annotator="follower", audio_time=CASE_TIMES)
    trace = os.path.join(tmp_path, "pose_traces", "rxr_train", "000021_follower_pose_trace.npz")
    with np.load(trace) as data:
        arrays = dict(data)
    arrays["time"] = arrays["time"] + 100
    np.savez(trace, **arrays)
    with pytest.raises(rr.RecordFormatError, match=f"{follower}:1: missing field 'path_id'.*"
                                                    "no guide annotations were given"):
        rr.read_rxr(follower)
    fields = {}
    (g,) = rr.read_rxr(guide, guide_fields=fields)
    (f,) = rr.read_rxr(follower, guides=fields)
    assert f["annotator"] == "follower" and f["path"] == follower_path
    for key in ("instruction_id", "path_id", "scan", "heading", "instruction", "language",
                "edit_distance", "timed_words"):
        assert f[key] == g[key], key
    assert f["language"] == "hi-IN" and g["step_words"] is None
    np.testing.assert_array_equal(f["step_words"], CASE_STEP_WORDS)
    np.testing.assert_array_equal(f["step_views"], CASE_STEP_VIEWS)
    with pytest.raises(rr.RecordFormatError, match="instruction_id 7 is not among the 0 guide"):
        rr.read_rxr(follower, guides={})
    # both at once, from the directory
    both = rr.read_rxr_split(str(tmp_path), "train", ("guide", "follower"))
    assert [(r["instruction_id"], r["annotator"]) for r in both] == [(7, "guide"),
                                                                     (7, "follower")]
    assert rr.read_rxr_split(str(tmp_path), "train", ("follower",))[0]["instruction"] == HINDI
    with pytest.raises(FileNotFoundError, match="rxr_val_seen_guide.jsonl.gz or "
                                                "rxr_val_seen_guide.jsonl"):
        rr.read_rxr_split(str(tmp_path), "val_seen")


@pytest.mark.parametrize("change, message", [
    ({"extrinsic_matrix": None}, "missing key 'extrinsic_matrix'"),
    ({"extrinsic_matrix": np.zeros((6, 12), np.float32)},
     r"key 'extrinsic_matrix' has shape \(6, 12\)"),
    ({"time": np.zeros(5, np.float32)}, r"key 'time' has shape \(5,\)"),
    ({"time": np.full(6, np.nan, np.float32)}, "key 'time': non-finite value nan"),
    ({"feature_weights": np.full((3, 36), np.nan, np.float32)},
     "key 'feature_weights': non-finite value nan"),
    ({"feature_weights": np.full((3, 36), 1e300)},
     "key 'feature_weights': value 1e\\+300 at index .* is not finite as float32"),
    ({"image_mask": np.zeros((3, 128), bool)}, r"key 'image_mask' has shape \(3, 128\)"),
    ({"image_mask": np.zeros((2, 128, 256), bool), "feature_weights": np.ones((3, 36))},
     r"key 'image_mask' has 2 rows, key 'feature_weights' 3"),
    ({"pano": np.asarray(["vp_a", "vp_c", "vp_b", "vp_b", "vp_c", "vp_c"])},
     "key 'pano': snapshot 2 is at viewpoint 'vp_b'"),
    ({"pano": np.asarray([1, 2, 3, 4, 5, 6])}, "key 'pano' has dtype int"),
    ({"pano": np.asarray(["vp_a"] * 6, dtype=object)}, "key 'pano' is not a plain array"),
    ({"extrinsic_matrix": np.tile(np.diag([0.0, 0.0, 0.0, 1.0]).astype(np.float32),
                                  (6, 1, 1))},
     "key 'extrinsic_matrix' has a degenerate rotation"),
    ({"extrinsic_matrix": np.tile(np.asarray([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0],
                                              [1, 2, 1.5, 1]], np.float32), (6, 1, 1))},
     "key 'extrinsic_matrix' has bottom row .*it looks column-major"),
])
def test_malformed_pose_traces_name_file_and_key(tmp_path, change, message):
    path = write_jsonl(tmp_path / "rxr_train_guide.jsonl.gz", [rxr_line(7)])
    trace = write_case_trace(tmp_path, 7, **change)
    with pytest.raises(rr.PoseTraceError, match=f"^{trace}: {message}"):
        rr.read_rxr(path)


def test_unreadable_pose_trace_and_text_features(tmp_path):
    path = write_jsonl(tmp_path / "rxr_train_guide.jsonl.gz", [rxr_line(7)])
    trace = tmp_path / "pose_traces" / "000007_guide_pose_trace.npz"
    trace.parent.mkdir()
    trace.write_bytes(b"garbage")
    with pytest.raises(rr.PoseTraceError, match=f"{trace}: not readable"):
        rr.read_rxr(path)
    write_pose_trace(str(trace), CASE_PANOS, CASE_TIMES, CASE_ANGLES)   # whole, then cut
    trace.write_bytes(trace.read_bytes()[:-100])
    with pytest.raises(rr.PoseTraceError, match=f"^{trace}(: key '\\w+')?: not readable"):
        rr.read_rxr(path)
    trace.write_bytes(trace.read_bytes()[:len(trace.read_bytes()) // 2])
    with pytest.raises(rr.PoseTraceError, match=f"^{trace}(: key '\\w+')?: not readable"):
        rr.read_rxr(path)
    trace.unlink()
    (tmp_path / "text_features").mkdir()
    feats = tmp_path / "text_features" / "000007.npy"
    np.save(feats, np.ones((4, 3, 2)))
    with pytest.raises(rr.PoseTraceError, match=f"{feats}: text features must be a numeric "
                                                r"\[L, D\] array"):
        rr.read_rxr(path)
    np.save(feats, np.ones((4, 3), np.float16))
    (rec,) = rr.read_rxr(path)
    assert rec["text_features"].dtype == np.float32 and rec["text_features"].shape == (4, 3)


def test_check_record():
    rec = rr.new_record(instruction_id=3, path_id=np.int64(1), scan="s", path=["a", "b"],
                        heading=np.float32(0.5), instruction="Go.", language="en-US",
                        annotator="synthetic", timed_words=["Go."])
    rec.pop("text_features")   # generators may leave it out
    out = rr.check_record(rec, "gen")
    assert out["text_features"] is None and type(out["path_id"]) is int
    assert type(out["heading"]) is float and math.isnan(out["distance"])
    masks = dict(rec, step_words=np.ones((2, 1), bool), step_views=np.zeros((2, 36), bool))
    assert rr.check_record(masks, "gen")["step_words"].shape == (2, 1)
    for bad, message in [
            (dict(masks, step_words=np.ones((2, 2), bool)), "gen: field 'step_words' is not None "
                                                           r"or a bool array of shape \(2, 1\)"),
            (dict(masks, step_views=None), "fields 'step_words' and 'step_views' must both"),
            (dict(rec, annotator="robot"), "field 'annotator' is not one of"),
            (dict(rec, heading=math.nan), "field 'heading' is not a finite number"),
            (dict(rec, timed_words="Go."), "field 'timed_words' is not a list of strings"),
            ({k: v for k, v in rec.items() if k != "scan"}, "gen: missing field 'scan'")]:
        with pytest.raises(rr.RecordFormatError, match=message):
            rr.check_record(bad, "gen")


# ----------------------------------------------------------------------------- release keys

def gl_perspective(fovy_deg=60.0, aspect=4 / 3, near=0.1, far=100.0):
    """An OpenGL projection matrix (row-major), as the release's `intrinsic_matrix`."""
    t = 1 / math.tan(math.radians(fovy_deg) / 2)
    return np.array([[t / aspect, 0, 0, 0], [0, t, 0, 0],
                     [0, 0, (far + near) / (near - far), 2 * far * near / (near - far)],
                     [0, 0, -1, 0]])


@pytest.mark.parametrize("up", ["y", "z"])
def test_a_snapshot_covers_every_view_its_camera_sees(up, tmp_path):
    # One level snapshot facing east (heading 90) through a 60-degree-tall 4:3 camera: it sees
    # headings 90 +- 37.6 and elevations +-30 at its centre, so the 60-degree views at headings
    # 30..150 (indices 1-5) overlap it at all three elevations; the nearest view alone is 15.
    trace = write_pose_trace(tmp_path / "t.npz", ["vp_a"], [0.0], [(90, 0)], up=up,
                             intrinsic_matrix=gl_perspective().reshape(1, 16))
    words, views, sub = rr.pose_trace_masks(trace, ["vp_a"], [0.0], [1.0], "auto")
    assert sorted(np.nonzero(views[0])[0]) == [e * 12 + h for e in range(3) for h in range(1, 6)]
    assert sub is None and words.tolist() == [[True]]
    # without intrinsics: the view nearest the snapshot's centre (older traces)
    trace = write_pose_trace(tmp_path / "u.npz", ["vp_a"], [0.0], [(90, 0)], up=up)
    assert np.nonzero(rr.pose_trace_masks(trace, ["vp_a"], [0.0], [1.0])[1][0])[0].tolist() \
        == [15]


def test_feature_weights_and_text_masks_of_the_release(tmp_path):
    weights = np.zeros((3, 36), np.float32)
    weights[0, [3, 4]] = [0.5, 0.01]
    weights[2, 35] = 1.0
    text = np.zeros((3, 4, 1), bool)
    text[1, 2] = text[2, 3] = True
    trace = write_case_trace(tmp_path, feature_weights=weights, text_masks=text,
                             intrinsic_matrix=np.tile(gl_perspective().ravel(), (6, 1)))
    words, views, sub = rr.pose_trace_masks(trace, CASE_PATH, *rr.fill_word_times(
        [w.get("start_time", math.nan) for w in CASE_WORDS],
        [w.get("end_time", math.nan) for w in CASE_WORDS]))
    np.testing.assert_array_equal(views, weights > 0)      # they win over the intrinsics
    np.testing.assert_array_equal(sub, text[..., 0])
    np.testing.assert_array_equal(words, CASE_STEP_WORDS)
    bad = write_case_trace(tmp_path, 8, feature_weights=weights[:2])
    with pytest.raises(rr.PoseTraceError, match="'feature_weights' has 2 rows, expected one per "
                                                "path viewpoint \\(3\\)"):
        rr.pose_trace_masks(bad, CASE_PATH, [0.0], [1.0])


def test_text_features_in_the_release_layout(tmp_path):
    folder = tmp_path / "text_features" / "rxr_train"
    folder.mkdir(parents=True)
    feats = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.savez(folder / "000007_en_text_features.npz", tokens=np.asarray([["[CLS]"], ["walk"],
                                                                         ["[SEP]"]]),
             features=feats)
    np.savez(folder / "000009_hi_text_features.npz", features=feats[:2])
    write_jsonl(tmp_path / "rxr_train_guide.jsonl.gz",
                [rxr_line(7), rxr_line(9, "hi-IN", instruction=HINDI), rxr_line(8, "te")])
    recs = {r["instruction_id"]: r for r in rr.read_rxr(str(tmp_path / "rxr_train_guide.jsonl.gz"))}
    np.testing.assert_array_equal(recs[7]["text_features"], feats)
    np.testing.assert_array_equal(recs[9]["text_features"], feats[:2])   # "hi" for hi-IN
    assert recs[8]["text_features"] is None
    np.savez(folder / "000008_te_text_features.npz", tokens=np.asarray(["a"]), features=feats)
    with pytest.raises(rr.PoseTraceError, match="key 'tokens' has 1 rows, 'features' 3"):
        rr.read_rxr(str(tmp_path / "rxr_train_guide.jsonl.gz"))
    assert rr.text_features_candidates("/m", 7, "en-US", "val_seen")[:3] == [
        "/m/text_features/rxr_val_seen/000007_en_text_features.npz",
        "/m/text_features/000007_en_text_features.npz",
        "/m/pose_traces/rxr_val_seen/000007_en_text_features.npz"]


def test_record_location_names_the_file_and_entry_or_line(tmp_path):
    from ttw_jax.rxr.dataset import record_location
    write_r2r(tmp_path, [r2r_entry(5), r2r_entry(7)])
    r2r = rr.read_r2r(str(tmp_path / "R2R_val_seen.json"))
    assert record_location("r2r", "val_seen", r2r[4], str(tmp_path)) == \
        f"{tmp_path / 'R2R_val_seen.json'}: entry 1"
    rxr_path = write_jsonl(tmp_path / "rxr_val_seen_guide.jsonl", [rxr_line(3), rxr_line(8)])
    rec = next(r for r in rr.read_rxr(rxr_path) if r["instruction_id"] == 8)
    assert record_location("rxr_en", "val_seen", rec, str(tmp_path)) == f"{rxr_path}:2"
    # no manual files at hand (a prepared dataset, synthetic data): the dataset and split
    assert record_location("synthetic", "train", rec, None) == "rxr/synthetic:train"
