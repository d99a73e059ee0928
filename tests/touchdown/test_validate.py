"""`python -m experiments.validate`: a Touchdown release with planted damage has every planted
file named, each in one line, and a sound release none."""
import json
import os
import subprocess
import sys

import numpy as np

from tests.conftest import ROOT
from tests.fuzz import append, edit_npy, edit_text, empty, flip_bytes, planted
from tests.touchdown import fuzz_cases
from ttw_jax.touchdown import validate
from ttw_jax.touchdown.graph import synthetic_street_grid, write_graph_files
from ttw_jax.touchdown.sdr.stream import write_synthetic_release

SHAPE = (10, 56, 2)


def release(tmp_path):
    manual = tmp_path / "data"
    write_synthetic_release(str(manual), 12, seed=0, shape=SHAPE)
    return manual


def test_a_sound_release_has_no_problem(tmp_path):
    manual = release(tmp_path)
    problems, checked = validate.validate_release(str(manual))
    assert problems == [] and checked == 3 + 12


def test_every_planted_damage_is_named(tmp_path):
    manual = release(tmp_path)
    feats = sorted((manual / "features").iterdir())
    truncated, nan, wrong, gone = feats[0], feats[1], feats[2], feats[3]
    truncated.write_bytes(truncated.read_bytes()[:-7])
    x = np.ones(SHAPE, np.float16)
    x[0, 0, 0] = np.nan
    np.save(nan, x)
    np.save(wrong, np.ones((10, 56, 3), np.float16))
    gone.unlink()
    dev = manual / "dev.json"
    lines = dev.read_text().splitlines()
    lines[0] = lines[0].replace('"route_id": ', '"route_id": "x', 1).replace(
        ', "navigation_text"', '", "navigation_text"', 1)
    dev.write_text("\n".join(lines) + "\n")
    problems, _ = validate.validate_release(str(manual))
    text = "\n".join(problems)
    assert all("\n" not in p for p in problems)
    assert f"{truncated}: truncated" in text
    assert f"{nan}: non-finite value nan at index (0, 0, 0)" in text
    assert f"{wrong}: shape (10, 56, 3), expected (10, 56, 2)" in text
    assert f"{dev}:1: field 'route_id'" in text
    assert f"{gone}: no such file: the feature map of a view of {manual}" in text
    assert len(problems) == 5
    # headers only: the NaN goes unseen, the rest is still found
    problems, _ = validate.validate_release(str(manual), bodies=False)
    assert len(problems) == 4 and not any("non-finite" in p for p in problems)
    # the command prints the same lines and exits 1
    out = subprocess.run([sys.executable, "-m", "experiments.validate", f"--data_dir={manual}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "5 with problems" in out.stdout and str(truncated) in out.stdout


def test_routes_are_checked_against_the_graph(tmp_path):
    nodes, links = synthetic_street_grid(num_avenues=2, num_streets=2, panos_per_block=2)
    graph = tmp_path / "graph"
    write_graph_files(str(graph), nodes, links)
    manual = tmp_path / "data"
    manual.mkdir()
    a, b = links[0][0], links[0][2]
    far = next(n[0] for n in nodes if n[0] not in (a, b) and
               not any(l[0] == a and l[2] == n[0] for l in links))
    rec = lambda rid, route: json.dumps({"route_id": rid, "navigation_text": "go",
                                         "route_panoids": route, "start_heading": 0.0,
                                         "end_heading": 0.0})
    (manual / "train.json").write_text(rec(1, [a, b]) + "\n")
    (manual / "dev.json").write_text(rec(2, [a, far]) + "\n")
    (manual / "test.json").write_text(rec(3, [a, "ghost"]) + "\n")
    problems, checked = validate.validate_release(str(manual), str(graph), sdr=False)
    assert checked == 5 and len(problems) == 2
    assert f"{manual / 'dev.json'}: route_id 2: field 'route_panoids': consecutive panoramas" \
        in problems[0]
    assert "route_id 3: field 'route_panoids': panoid 'ghost' not in the graph" in problems[1]
    (graph / "links.txt").write_text("")
    problems, _ = validate.validate_release(str(manual), str(graph), sdr=False)
    assert problems[0].startswith(f"{graph / 'links.txt'}: no rows")
    for name in ("train.json", "dev.json", "test.json"):
        os.remove(manual / name)
    problems, _ = validate.validate_release(str(manual))
    assert "no record file (expected any of train.json" in problems[0]


def test_the_command_checks_each_dataset(tmp_path):
    """`experiments.validate.report` runs each system's checker: an empty folder is a problem
    for every release, named with what was expected."""
    from experiments.validate import DATASETS, report
    expected = {"touchdown": "no record file", "rxr": "no annotation file",
                "arramon": "no instance file", "talk_the_walk": "Talk The Walk dialogues"}
    for dataset in DATASETS:
        text, bad = report(dataset, str(tmp_path))
        assert bad >= 1 and text.startswith(f"{dataset}: ") and str(tmp_path) in text, text
        assert expected[dataset] in text


def test_five_planted_faults_one_a_damaged_record_file_are_all_named(tmp_path):
    """One pass names each of 5 faults in 5 files of a small real release: flipped bytes in a
    record file, a float64 1e300 (infinite as float16) and bytes appended in the feature maps
    of its first record's views, a self-link in `links.txt` and an empty record file."""
    fuzz_cases.build(tmp_path)
    first = json.loads((tmp_path / fuzz_cases.DEV).read_text().splitlines()[0])
    huge, longer = tmp_path / fuzz_cases.FEATURE, tmp_path / "features" / f"{first['pre_pano']}.npy"
    dev, links, train = (tmp_path / f for f in (fuzz_cases.DEV, fuzz_cases.LINKS,
                                                 fuzz_cases.TRAIN))
    flip_bytes(at=0.6)(dev)
    edit_npy(lambda x: planted(x, 1e300, np.float64))(huge)
    append(b"\x00" * 5)(longer)
    edit_text(fuzz_cases.self_link)(links)
    empty(train)
    problems, _ = validate.validate_release(str(tmp_path), str(tmp_path / "graph"))
    expected = [f"{links}:2: field 'end_panoid': a self-link", f"{dev}: unreadable",
                f"{train}: no records", f"{huge}: value 1e+300 at index (2, 0, 0) is not finite "
                "as float16", f"{longer}: 5 bytes after the array"]
    assert [sum(p.startswith(e) for p in problems) for e in expected] == [1] * 5, problems
    assert len(problems) == 5
