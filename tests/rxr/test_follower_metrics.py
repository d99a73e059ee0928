"""`ttw_jax.rxr.follower_metrics` (`python -m experiments.validate --dataset=rxr`): the follower
files' stored metrics recomputed. A release on two real Matterport scans whose stored metrics
come from this file's own geodesics (Dijkstra over the raw connectivity JSON, or over `.house`
panorama centres): every sound value agrees, the planted ones (an nDTW off by 0.1, an NE off by
2 m) are the worst cases in that order, and records without metrics, without a path, without a
guide or not JSON are counted with their file and line; the synthetic writer's stored metrics are
hand-checked and agree."""
import gzip
import json
import math
import os
import shutil

import numpy as np
import pytest
from scipy.sparse import csgraph, csr_matrix

from experiments.validate import report
from tests.conftest import shared_path
from tests.rxr.test_validate import release as line_release
from ttw_jax.rxr.follower_metrics import STORED, check_follower_metrics
from ttw_jax.rxr.metrics import path_metrics_np
from ttw_jax.rxr.validate import validate_release

SCANS = ("17DRP5sb8fy", "1LXtFkjw3qL")
NDTW_OFF, NE_OFF = 0.1, 2.0


def scan_geodesics(data, centres=None):
    """(viewpoint ids, [n, n] edge lengths (0: no edge), [n, n] distances, predecessors) of one
    scan's included viewpoints, edges measured between the poses (or `centres` [n, 3])."""
    inc = [i for i, e in enumerate(data) if e["included"]]
    pos = (np.asarray([[data[i]["pose"][k] for k in (3, 7, 11)] for i in inc])
           if centres is None else centres)
    w = np.zeros((len(inc), len(inc)))
    for a, i in enumerate(inc):
        for b, j in enumerate(inc):
            if data[i]["unobstructed"][j] and a != b:
                w[a, b] = np.linalg.norm(pos[a] - pos[b])
    dist, pred = csgraph.dijkstra(csr_matrix(w), return_predecessors=True)
    return [data[i]["image_id"] for i in inc], w, dist, pred


def walk(pred, a, b):
    out = [b]
    while out[-1] != a:
        out.append(pred[a, out[-1]])
    return out[::-1]


def write_jsonl(path, rows):
    with gzip.open(path, "wt") as f:
        f.write("".join(r if isinstance(r, str) else json.dumps(r) + "\n" for r in rows))


def write_fixture(tmp_path, house):
    """(manual dir, connectivity dir, house dir, planted {metric: (instruction_id, line)},
    sound stored metrics {instruction_id: metrics}). Per scan, four guide paths of 3 or more
    steps; their followers walk them whole, one step short, with a detour, or stop after the
    first step. `house`: the stored metrics measure edges between panorama centres (the poses
    moved by up to 0.4 m), written to `<house dir>/<scan>.house`."""
    conn, manual, houses = tmp_path / "conn", tmp_path / "data", tmp_path / "house"
    for d in (conn, manual, houses):
        d.mkdir()
    rng = np.random.default_rng(0)
    guides, followers, stored = [], [], {}
    for scan in SCANS:
        src = shared_path("matterport", "connectivity", f"{scan}_connectivity.json")
        shutil.copy(src, conn)
        data = json.load(open(src))
        ids = scan_geodesics(data)[0]
        poses = np.asarray([[e["pose"][k] for k in (3, 7, 11)] for e in data if e["included"]])
        centres = poses + rng.uniform(-0.4, 0.4, poses.shape) * [1, 1, 0]
        (houses / f"{scan}.house").write_text("ASCII 1.1\n" + "".join(
            f"P {v} {i} -1 0 {' '.join(repr(float(x)) for x in c)} 0 0 0 0 0\n"
            for i, (v, c) in enumerate(zip(ids, centres))))
        _, w, dist, pred = scan_geodesics(data, centres if house else None)
        hops = csgraph.shortest_path(csr_matrix(w > 0), unweighted=True)
        pairs = []     # (guide path, a viewpoint off it linked both ways to its goal)
        for a in range(0, len(ids), 7):
            for b in range(len(ids)):
                ref = walk(pred, a, b) if 3 <= hops[a, b] <= 6 and dist[a, b] > 4 else [b]
                off = [n for n in np.nonzero((w[b] > 0) & (w[:, b] > 0))[0] if n not in ref]
                if len(ref) > 1 and off and len(pairs) < 4:
                    pairs.append((ref, off[0]))
        for k, (ref, detour) in enumerate(pairs):
            iid = len(guides)
            path = [ref, ref[:-1], ref + [detour, ref[-1]], ref[:2]][k]
            guides.append({"instruction_id": iid, "path_id": iid, "scan": scan, "heading": 0.0,
                           "path": [ids[n] for n in ref], "language": "en-US",
                           "instruction": "walk on"})
            m = path_metrics_np(path, ref, dist)
            stored[iid] = {key: m[key] for key in STORED}
            followers.append({"demonstration_id": 1000 + iid, "instruction_id": iid,
                              "annotator_id": 1, "path": [ids[n] for n in path],
                              "metrics": dict(stored[iid])})
    assert len(guides) == 8 and {f["metrics"]["sr"] for f in followers} == {0.0, 1.0}
    followers[1]["metrics"]["ndtw"] -= NDTW_OFF
    followers[2]["metrics"]["ne"] += NE_OFF
    planted = {"ndtw": (1, 2), "ne": (2, 3)}
    # a guide line without its scan; followers: no metrics, no path, no guide, not JSON, no dtw
    guides.append(dict(guides[0], instruction_id=50, scan=None))
    followers += [
        {k: v for k, v in followers[0].items() if k != "metrics"},
        {k: v for k, v in followers[3].items() if k != "path"},
        dict(followers[0], instruction_id=50),
        '{"instruction_id": 7, "path": [\n',
        dict(followers[4], metrics={k: v for k, v in followers[4]["metrics"].items()
                                    if k != "dtw"})]
    write_jsonl(manual / "rxr_val_seen_guide.jsonl.gz", guides)
    write_jsonl(manual / "rxr_val_seen_follower.jsonl.gz", followers)
    # a split whose follower lines carry no metrics
    write_jsonl(manual / "rxr_val_unseen_guide.jsonl.gz", guides[:2])
    write_jsonl(manual / "rxr_val_unseen_follower.jsonl.gz",
                [{k: v for k, v in f.items() if k != "metrics"} for f in followers[:2]])
    return str(manual), str(conn), str(houses), planted, stored


@pytest.mark.parametrize("house", [False, True], ids=["connectivity", "house"])
def test_sound_values_agree_and_planted_ones_are_the_worst(tmp_path, house):
    manual, conn, houses, planted, _ = write_fixture(tmp_path, house)
    got = check_follower_metrics(manual, conn, houses if house else None)
    assert got.distances == ("house panorama centres" if house else "connectivity poses")
    assert got.notes == [] and [s.split for s in got.splits] == ["val_seen", "val_unseen"]
    seen, unseen = got.splits
    follower = os.path.join(manual, "rxr_val_seen_follower.jsonl.gz")
    assert (seen.records, seen.compared) == (13, 9) and seen.unreadable is None
    # 8 sound records and one without a dtw; the planted ne and ndtw disagree
    assert dict(seen.checked) == {k: 8 if k == "dtw" else 9 for k in STORED}
    assert dict(seen.agree) == {k: {"dtw": 8, "ne": 8, "ndtw": 8}.get(k, 9) for k in STORED}
    worst = sorted(seen.worst, reverse=True)
    assert [(c.metric, c.instruction_id, c.where) for c in worst] == [
        (k, iid, f"{follower}:{line}") for k, (iid, line) in
        sorted(planted.items(), key=lambda kv: kv[0] != "ne")]
    assert worst[0].stored - worst[0].recomputed == pytest.approx(NE_OFF, abs=1e-4)
    assert worst[1].recomputed - worst[1].stored == pytest.approx(NDTW_OFF, abs=1e-4)
    assert dict(seen.without.count) == {"no field 'metrics'": 1}
    assert seen.without.places["no field 'metrics'"] == [f"{follower}:9"]
    assert dict(seen.skipped.count) == {
        "missing field 'path'": 1, "no readable guide line with its instruction_id": 1,
        "invalid JSON": 1}
    assert seen.skipped.places["invalid JSON"] == [f"{follower}:12"]
    assert dict(seen.unusable.count) == {"'dtw' missing or not a finite number": 1}
    assert dict(seen.guide_lines.count) == {"field 'scan' not a scan id": 1}
    assert (unseen.records, unseen.compared, unseen.without.total()) == (2, 0, 2)

    text = "\n".join(got.lines())
    assert f"val_seen ({follower}): 13 records, 9 compared; within tolerance: ne 8/9, sr 9/9, " \
           f"spl 9/9, dtw 8/8, ndtw 8/9, sdtw 9/9" in text
    assert f"  worst: instruction_id 2 ({follower}:3): ne stored " in text
    assert "val_unseen" in text and "no stored metrics: none of its 2 records" in text
    assert text.index("ne stored") < text.index("ndtw stored")


def test_the_distances_must_be_the_stored_ones(tmp_path):
    """Metrics stored over the `.house` centres, recomputed over the connectivity poses: the
    distances disagree (and the check says which it used)."""
    manual, conn, _, _, _ = write_fixture(tmp_path, house=True)
    seen = check_follower_metrics(manual, conn).splits[0]
    # only the followers ending on the goal agree on NE (0), those walking it whole on DTW (0)
    assert (seen.agree["ne"], seen.agree["dtw"]) == (4, 2)
    # a house folder that lacks a scan: its records are not compared, and the scan is named
    os.remove(tmp_path / "house" / f"{SCANS[1]}.house")
    got = check_follower_metrics(manual, conn, str(tmp_path / "house"))
    assert len(got.notes) == 1 and SCANS[1] in got.notes[0]
    assert got.splits[0].skipped.count["its scan's .house file unusable"] == 4 + 1


def test_the_command_prints_the_report(tmp_path):
    manual, conn, houses, _, _ = write_fixture(tmp_path, house=True)
    text, bad = report("rxr", manual, conn, house_dir=houses)
    assert bad == len(validate_release(manual, conn)[0]) >= 1, text   # the guide line's scan
    assert "follower metrics (information, not counted as problems)" in text
    assert "distances: house panorama centres" in text and "worst: instruction_id 2" in text
    assert "follower metrics" not in report("rxr", manual, conn, follower_metrics=False)[0]
    assert "not recomputed (they need the connectivity graphs" in report("rxr", manual)[0]


def test_the_writers_stored_metrics_are_hand_checked_and_agree(tmp_path):
    """`release.write_release` on line graphs (viewpoints 2 m apart): a follower on the guide's
    3-viewpoint path scores perfectly; one step short, NE 2 m, SPL 1 (d0 4 m, PL 2 m), DTW 2 m
    (aligning both of its viewpoints with the first two and its last with the goal)."""
    manual, conn, _ = line_release(tmp_path)
    with gzip.open(manual / "rxr_val_seen_follower.jsonl.gz", "rt") as f:
        stored = [json.loads(line) for line in f]
    short = {"ne": 2.0, "sr": 1.0, "spl": 1.0, "dtw": 2.0, "ndtw": math.exp(-2 / 9),
             "sdtw": math.exp(-2 / 9)}
    whole = {"ne": 0.0, "sr": 1.0, "spl": 1.0, "dtw": 0.0, "ndtw": 1.0, "sdtw": 1.0}
    for f in stored:
        want = short if len(f["path"]) == 2 else whole
        assert f["metrics"] == pytest.approx(want, abs=1e-5), f
    assert {len(f["path"]) for f in stored} == {2, 3}
    seen, = check_follower_metrics(str(manual), str(conn)).splits
    assert seen.compared == 4 and all(seen.agree[k] == 4 for k in STORED) and not seen.worst


def test_a_missing_guide_file_and_a_damaged_follower_file_are_said(tmp_path):
    manual, conn, _, _, _ = write_fixture(tmp_path, house=False)
    os.remove(os.path.join(manual, "rxr_val_unseen_guide.jsonl.gz"))
    follower = os.path.join(manual, "rxr_val_seen_follower.jsonl.gz")
    data = open(follower, "rb").read()
    open(follower, "wb").write(data[:len(data) // 2])
    seen, unseen = check_follower_metrics(manual, conn).splits
    assert 0 < seen.records < 13 and seen.unreadable.startswith(f"{follower}: ")
    text = "\n".join(seen.lines() + unseen.lines())
    assert "read up to the error: " in text
    assert "no guide file (rxr_val_unseen_guide.jsonl.gz or rxr_val_unseen_guide.jsonl)" in text
