"""`ttw_jax.rxr.validate`: an R2R / RxR release in the official layout (`rxr.release`) with
planted damage has every planted file named, each once in one line, and a sound release none;
the real R2R val_seen file reads clean against the real Matterport graphs."""
import gzip
import json
import os

import numpy as np
import pytest

from tests import fuzz
from tests.conftest import SHARED_DATA
from tests.rxr import fuzz_cases
from ttw_jax.rxr import view_features as vf
from ttw_jax.rxr.graph import list_scans, load_matterport_graph
from ttw_jax.rxr.release import write_release
from ttw_jax.rxr.validate import validate_release

SCANS = {"scanA": 5, "scanB": 4}   # scan -> viewpoints on a line, 2 m apart
DIM = 8                            # text-feature width
SPLITS = {"val_seen": 4, "test_standard": 2}   # guide records; no followers in test splits


def write_scan(conn, scan, n):
    data = [{"image_id": f"{scan}_{i}", "included": True,
             "pose": [1, 0, 0, 2.0 * i, 0, 1, 0, 0, 0, 0, 1, 1.5, 0, 0, 0, 1],
             "unobstructed": [abs(i - j) == 1 for j in range(n)]} for i in range(n)]
    (conn / f"{scan}_connectivity.json").write_text(json.dumps(data))
    return data


def release(tmp_path):
    """(manual dir, connectivity dir, view-feature TSV) of a small sound release: an R2R file,
    RxR guides and followers with their pose traces and text features."""
    conn, manual = tmp_path / "conn", tmp_path / "data"
    conn.mkdir()
    for scan, n in SCANS.items():
        write_scan(conn, scan, n)
    graph, nodes, _ = load_matterport_graph(str(conn))
    recs, iid = {}, 0
    for split, count in SPLITS.items():
        recs[split] = []
        for k in range(count):
            scan = list(SCANS)[k % 2]
            recs[split].append({
                "instruction_id": iid, "path_id": iid, "scan": scan,
                "path": [f"{scan}_{i}" for i in range(k % 2, k % 2 + 3)], "heading": 0.5,
                "instruction": "walk past the lamp and stop at the door",
                "language": ("en-US", "hi-IN")[k % 2]})
            iid += 1
    write_release(str(manual), graph, nodes, recs, dim=DIM)
    (manual / "R2R_val_seen.json").write_text(json.dumps([
        {"distance": 4.0, "scan": scan, "path_id": p, "path": [f"{scan}_0", f"{scan}_1"],
         "heading": 1.0, "instructions": ["go ahead", "walk forward"]}
        for p, scan in enumerate(SCANS)]))
    tsv = str(tmp_path / "views.tsv")
    vf.write_tsv(tsv, nodes.ids, np.ones((len(nodes.ids), 36, 4), np.float32))
    return manual, conn, tsv


def files_of(manual, split):
    """(guide pose traces, text features) of a split, sorted by instruction_id."""
    traces = sorted((manual / "pose_traces" / f"rxr_{split}").glob("*_guide_pose_trace.npz"))
    feats = sorted((manual / "text_features" / f"rxr_{split}").glob("*.npz"))
    return traces, feats


def test_a_sound_release_has_no_problem(tmp_path):
    manual, conn, tsv = release(tmp_path)
    problems, checked = validate_release(str(manual), str(conn), view_features=tsv)
    assert problems == []
    guides = sum(SPLITS.values())
    followers = SPLITS["val_seen"]
    annotation_files = 1 + 2 + 1          # R2R, val_seen guide + follower, test guide
    assert checked == len(SCANS) + annotation_files + (guides + followers) + guides + 1
    # without graphs, bodies or view features
    assert validate_release(str(manual), bodies=False) == ([], checked - len(SCANS) - 1)


def test_every_planted_damage_is_named_once(tmp_path):
    manual, conn, tsv = release(tmp_path)
    traces, feats = files_of(manual, "val_seen")
    truncated, wide, nan = traces[0], feats[1], feats[2]
    truncated.write_bytes(truncated.read_bytes()[:-40])
    with np.load(wide) as z:
        np.savez(wide, tokens=z["tokens"], features=np.ones((len(z["tokens"]), DIM - 1)))
    with np.load(nan) as z:
        x = z["features"].copy()
    x[1, 2] = np.nan
    np.savez(nan, tokens=np.asarray(["[CLS]"] * len(x))[:, None], features=x)
    gone = manual / "pose_traces" / "rxr_val_seen" / "100003_follower_pose_trace.npz"
    gone.unlink()
    test_guide = manual / "rxr_test_standard_public_guide.jsonl.gz"
    with gzip.open(test_guide, "rt") as f:
        lines = f.read().splitlines()
    lines[1] = lines[1][:-5]
    with gzip.open(test_guide, "wt") as f:
        f.write("\n".join(lines) + "\n")
    r2r = manual / "R2R_val_seen.json"
    r2r.write_text(r2r.read_text().replace('"scanB"', '"ghost"'))
    scan_b = conn / "scanB_connectivity.json"
    scan_b.write_text(scan_b.read_text().replace("2.0, 0, 1, 0, 0", "NaN, 0, 1, 0, 0"))
    tsv_lines = open(tsv, encoding="utf-8", newline="").read().split("\r\n")
    tsv_lines[2] = tsv_lines[2][:-9]
    with open(tsv, "w", encoding="utf-8", newline="") as f:
        f.write("\r\n".join(tsv_lines))

    problems, _ = validate_release(str(manual), str(conn), view_features=tsv)
    assert all("\n" not in p for p in problems)
    expected = {
        str(truncated): f"{truncated}: not readable: damaged, truncated",
        str(wide): f"{wide}: text features of width {DIM - 1}, expected {DIM}",
        str(nan): f"{nan}: text features have non-finite values",
        gone.name: (f"{manual / 'pose_traces'}: 1 pose traces missing", gone.name),
        str(test_guide): f"{test_guide}:2: invalid JSON",
        str(r2r): f"{r2r}: entry 1: field 'scan': no connectivity file ghost_connectivity.json",
        str(scan_b): f"{scan_b}: viewpoint 1: field 'pose'",
        tsv: f"{tsv}:3: field 'features'",
    }
    for name, needles in expected.items():
        named = [p for p in problems if name in p]
        assert len(named) == 1, (name, problems)
        for needle in (needles if isinstance(needles, tuple) else (needles,)):
            assert needle in named[0], (needle, named[0])
    assert len(problems) == len(expected), problems
    # archives' directories only: the NaN and the odd width go unseen, the rest is still found
    problems, _ = validate_release(str(manual), str(conn), bodies=False, view_features=tsv)
    assert len(problems) == len(expected) - 2, problems
    assert not any(str(wide) in p or str(nan) in p for p in problems)


def test_records_are_checked_against_the_graphs(tmp_path):
    manual, conn, _ = release(tmp_path)
    # a viewpoint of no graph in the R2R file, an unlinked step on line 3 of the guide file
    r2r = manual / "R2R_val_seen.json"
    r2r.write_text(r2r.read_text().replace('"scanA_1"', '"scanA_9"'))
    guide = manual / "rxr_val_seen_guide.jsonl.gz"
    with gzip.open(guide, "rt") as f:
        lines = [json.loads(line) for line in f]
    lines[2]["path"] = ["scanA_0", "scanA_2"]
    with gzip.open(guide, "wt") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))
    problems, _ = validate_release(str(manual), str(conn), bodies=False)
    assert problems == [
        f"{r2r}: entry 0: field 'path': viewpoint 'scanA_9' is not an included viewpoint of "
        "scan scanA (2 such records in all)",   # the entry's two instructions
        f"{guide}:3: field 'path': consecutive viewpoints scanA_0 -> scanA_2 are not linked in "
        "scan scanA's graph"]
    # a guide file that does not read: its followers (which take its fields) are not read
    with gzip.open(guide, "wt") as f:
        f.write("{\n")
    problems, _ = validate_release(str(manual))
    assert len(problems) == 1 and problems[0].startswith(f"{guide}:1: invalid JSON")


@pytest.mark.parametrize("fmt, damage, needle", [
    ("tsv", "twice", ":2: viewpoint scanA/scanA_0 is listed twice (first at {path}:1)"),
    ("hdf5", "stranger", ": dataset 'scanA_zz': field 'viewpointId': zz is not a viewpoint of "
                         "scan scanA's connectivity graph (included viewpoints)"),
    ("npz", "nan", ": array 'features': non-finite values in row 2 (viewpoint scanA/scanA_2)"),
    ("npz", "short", ": 1 viewpoints of the records' scans have no features, e.g. "
                     "['scanB/scanB_3']"),
], ids=["tsv-twice", "hdf5-stranger", "npz-nan", "npz-short"])
def test_bad_view_feature_rows_are_named(tmp_path, fmt, damage, needle):
    conn, manual = tmp_path / "conn", tmp_path / "data"
    conn.mkdir()
    manual.mkdir()
    ids = [f"{scan}/{scan}_{i}" for scan, n in SCANS.items() for i in range(n)]
    for scan, n in SCANS.items():
        write_scan(conn, scan, n)
    (manual / "R2R_val_seen.json").write_text(json.dumps([
        {"scan": scan, "path_id": p, "path": [f"{scan}_0"], "heading": 0.0,
         "instructions": ["stay"]} for p, scan in enumerate(SCANS)]))
    feats = np.ones((len(ids), 36, 4), np.float32)
    if damage == "twice":
        ids[1] = ids[0]
    elif damage == "stranger":
        ids.append("scanA/zz")
        feats = np.concatenate([feats, feats[:1]])
    elif damage == "nan":
        feats[2, 5, 1] = np.nan
    elif damage == "short":
        ids, feats = ids[:-1], feats[:-1]
    path = str(tmp_path / f"views.{fmt}")
    if fmt == "tsv":
        vf.write_tsv(path, ids, feats)
    elif fmt == "hdf5":
        vf.write_hdf5(path, ids, feats)
    else:
        np.savez(path, ids=np.asarray(ids), features=feats)
    problems, checked = validate_release(str(manual), str(conn), view_features=path)
    assert problems == [path + needle.format(path=path)] and checked == len(SCANS) + 2


def test_the_real_r2r_val_seen_file_is_sound(tmp_path):
    conn = os.path.join(SHARED_DATA, "matterport", "connectivity")
    (tmp_path / "R2R_val_seen.json").symlink_to(os.path.join(SHARED_DATA, "r2r",
                                                             "R2R_val_seen.json"))
    problems, checked = validate_release(str(tmp_path), conn)
    assert problems == [] and checked == len(list_scans(conn)) + 1 == 91


def test_five_planted_faults_one_a_damaged_guide_file_are_all_named(tmp_path):
    """The fuzz corpus's release (real R2R entries and graphs, RxR files written in the
    release's layout) with 5 faults in 5 files: the guide file's gzip body damaged (zlib.error),
    NaN `feature_weights` in a pose trace and integer text features both named by that guide
    file, an R2R heading of 1e300 and a NaN connectivity height. One pass names all 5."""
    fuzz_cases.build(tmp_path)
    planted = {
        fuzz_cases.GUIDE: (fuzz.flip_bytes(), "unreadable"),
        fuzz_cases.TRACE: (fuzz.edit_npz("feature_weights", fuzz_cases.middle(np.nan)),
                           "key 'feature_weights': non-finite value nan"),
        fuzz_cases.TEXT: (fuzz.edit_npz("features", lambda a: np.round(a).astype(np.int32)),
                          "text features are int32"),
        fuzz_cases.R2R_VAL: (fuzz.set_field(0, "heading", 1e300),
                             "entry 0: field 'heading': is not an angle in radians"),
        fuzz_cases.CONN: (fuzz.set_field(3, "height", float("nan")),
                          "viewpoint 3: field 'height'"),
    }
    for file, (mutate, _) in planted.items():
        mutate(tmp_path / file)
    problems, _ = validate_release(str(tmp_path / "data"), str(tmp_path / "conn"),
                                   view_features=str(tmp_path / fuzz_cases.VIEWS))
    named = {file for file, (_, needle) in planted.items()
             if any(p.startswith(f"{tmp_path / file}") and needle in p for p in problems)}
    assert named == set(planted), problems
    assert len(problems) == len(planted), problems
