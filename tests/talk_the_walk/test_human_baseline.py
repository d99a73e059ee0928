"""Human baselines of the Talk The Walk full task (`language/human.py`, the command
`experiments.ttw_language.human`): a hand-built release with hand-checked counts, rates and
steps, the command end to end, bad input, and the synthetic generator's guarantees."""
import json
import os
import subprocess
import sys

import pytest

from experiments.ttw_language import human as command
from tests.conftest import ROOT
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.language import dialogues as td, human, synthetic as sd

L, R, F = td.ACTIONS
E = td.EVALUATE
T, G = "Tourist", "Guide"
BOUNDS = [2, 4, 5, 7]   # fidi (8 x 10 corners): x 2..5, y 4..7


def episode(start, target, acts, **extra):
    dialog = [{"id": who, "text": text, "episode_done": False, "time": 100.0 + i}
              for i, (who, text) in enumerate(acts)]
    return {"neighborhood": "fidi", "boundaries": BOUNDS, "start_location": start,
            "target_location": target, "dialog": dialog, "landmarks": [], "version": 1,
            "tourist_worker_id": "A1", "guide_worker_id": "A2", "total_time": 60.0, **extra}


# Facing N/E/S/W = 0..3; FORWARD moves (0,+1) / (+1,0) / (0,-1) / (-1,0), clamped to BOUNDS.
# A: success at the first evaluation; two acts after the end are not counted.
A = episode([3, 5, 0], [3, 7, 2], [
    (G, "hi, what do you see?"), (T, "i see a bank"),
    (T, F),                     # (3, 6)
    (T, F),                     # (3, 7) = target
    (G, E),                     # success: ends the task at act 4
    (T, "yay"), (T, F)],        # after the end
    status="success")           # evaluations 1, forward 2, moves 2, actions 2
# B: success after one failed evaluation.
B = episode([2, 4, 1], [4, 4, 0], [
    (T, F),                     # (3, 4)
    (G, E),                     # miss 1
    (T, "sorry"), (T, L), (T, R),   # facing N, then E again
    (T, F),                     # (4, 4) = target
    (G, E)],                    # success
    status="success")           # evaluations 2, forward 2, moves 2, actions 4
# C: failed after three failed evaluations; the first FORWARD is blocked at max_y = 7.
C = episode([5, 7, 0], [2, 4, 0], [
    (T, F),                     # blocked: stays at (5, 7)
    (G, E),                     # miss 1
    (T, L),                     # facing W
    (T, F),                     # (4, 7)
    (G, E),                     # miss 2
    (T, F),                     # (3, 7)
    (G, E)],                    # miss 3: failed
    status="failed", location=[3, 7, 3])   # evaluations 3, forward 3, moves 2, actions 4
# D: a disconnect with no evaluation.
D = episode([4, 6, 2], [2, 7, 1], [
    (T, "hello"),
    (T, R),                     # facing W
    (T, F),                     # (3, 6)
    (G, "[DISCONNECT]")],
    status="disconnect")        # unfinished; evaluations 0, forward 1, moves 1, actions 2
# E: no status key; replayed as a success (rated as one). The first FORWARD is blocked at
# min_x = 2.
E_ = episode([2, 7, 3], [2, 5, 0], [
    (T, F),                     # blocked: stays at (2, 7)
    (T, L),                     # facing S
    (T, F),                     # (2, 6)
    (T, F),                     # (2, 5) = target
    (G, E)])                    # success; evaluations 1, forward 3, moves 2, actions 4
# F: status null; one failed evaluation, then nothing: unfinished (not rated).
F_ = episode([3, 4, 0], [5, 5, 0], [
    (T, F),                     # (3, 5)
    (G, E),                     # miss 1
    (T, "bye")],
    status=None)                # evaluations 1, forward 1, moves 1, actions 1
# G: recorded 'failed' after a single miss (the replay says unfinished: a disagreement); its
# recorded final location has the wrong orientation.
G_ = episode([5, 4, 3], [2, 5, 0], [
    (T, R), (T, R),             # facing N, then E
    (T, F),                     # blocked at max_x = 5
    (G, E),                     # miss 1
    (T, "ok")],
    status="failed", location=[5, 4, 0])   # evaluations 1, forward 1, moves 0, actions 3

RELEASE = {"train": [A, B, C], "valid": [D, E_], "test": [F_, G_]}
# Per dialogue: (status, outcome, evaluations, forward, moves, actions, end_act, acts_after_end)
EXPECTED = [("success", "success", 1, 2, 2, 2, 4, 2),
            ("success", "success", 2, 2, 2, 4, 6, 0),
            ("failed", "failed", 3, 3, 2, 4, 6, 0),
            ("disconnect", "unfinished", 0, 1, 1, 2, None, 0),
            ("missing", "success", 1, 3, 2, 4, 4, 0),
            ("missing", "unfinished", 1, 1, 1, 1, None, 0),
            ("failed", "unfinished", 1, 1, 0, 3, None, 0)]


@pytest.fixture
def release(tmp_path):
    for split, eps in RELEASE.items():
        (tmp_path / f"talkthewalk.{split}.json").write_text(json.dumps(eps))
    return str(tmp_path)


def all_rows(data_dir):
    return [r for s in ("train", "valid", "test")
            for r in human.read_outcomes(os.path.join(data_dir, f"talkthewalk.{s}.json"))]


def test_per_dialogue_counts(release):
    rows = all_rows(release)
    got = [(r["status"], r["outcome"], r["evaluations"], r["forward"], r["moves"], r["actions"],
            r["end_act"], r["acts_after_end"]) for r in rows]
    assert got == EXPECTED
    assert [r["failed_evaluations"] for r in rows] == [0, 1, 3, 0, 0, 1, 1]
    # Only C and G record a final location: C's is the replayed (3, 7) facing W, G's is not.
    assert [r["location_agrees"] for r in rows] == [None, None, True, None, None, None, False]


def test_aggregates_over_the_release(release):
    s = human.summarize(all_rows(release))
    assert s["dialogues"] == 7
    assert s["status_counts"] == {"success": 2, "failed": 2, "timeout": 0, "disconnect": 1,
                                  "missing": 2}
    assert s["outcome_counts"] == {"success": 3, "failed": 1, "unfinished": 3}
    # Rated: A, B success; C, G failed (recorded); E success by replay; D, F left out:
    # 3 / (3 + 2) = 60 %. By replay: A, B, E success, C failed: 3 / 4 = 75 %.
    assert (s["rated"], s["success_rate"]) == (5, pytest.approx(60.0))
    assert (s["rated_replay"], s["success_rate_replay"]) == (4, pytest.approx(75.0))
    # Recorded status on A, B, C, D, G; all but G (failed, replay unfinished) agree.
    assert (s["agreement"], s["compared"]) == (4, 5)
    assert s["confusion"]["failed"] == {"success": 0, "failed": 1, "unfinished": 1}
    assert s["confusion"]["missing"] == {"success": 1, "failed": 0, "unfinished": 1}
    # Successful (rated) A, B, E: FORWARD 2, 2, 3 -> 7/3; moves 2, 2, 2; actions 2, 4, 4;
    # evaluations 1, 2, 1.
    assert s["steps_measure"] == "forward" and s["steps"] == pytest.approx(7 / 3)
    assert s["mean_successful"] == pytest.approx(
        {"evaluations": 4 / 3, "forward": 7 / 3, "moves": 2.0, "actions": 10 / 3})
    # All seven: FORWARD 2+2+3+1+3+1+1 = 13, moves 2+2+2+1+2+1+0 = 10,
    # actions 2+4+4+2+4+1+3 = 20, evaluations 1+2+3+0+1+1+1 = 9.
    assert s["mean_all"] == pytest.approx(
        {"evaluations": 9 / 7, "forward": 13 / 7, "moves": 10 / 7, "actions": 20 / 7})
    assert (s["location_compared"], s["location_agrees"]) == (2, 1)
    assert s["acts_after_end"] == 1
    assert human.summarize(all_rows(release), steps="moves")["steps"] == pytest.approx(2.0)
    assert human.summarize(all_rows(release), steps="actions")["steps"] == pytest.approx(10 / 3)
    with pytest.raises(ValueError, match="unknown #steps measure"):
        human.summarize([], steps="turns")
    empty = human.summarize([])
    assert empty["success_rate"] is None and empty["steps"] is None


def test_the_third_miss_ends_the_task():
    ep = episode([2, 4, 0], [2, 4, 0], [
        (T, F),                 # (2, 5)
        (G, E), (G, E), (G, E),  # three misses: failed at act 3
        (T, R), (T, R), (T, F),  # back on the target, facing S
        (G, E)])                # would be a success, but the task has ended
    r = human.replay_outcome(ep)
    assert (r["outcome"], r["end_act"], r["acts_after_end"]) == ("failed", 3, 4)
    assert (r["evaluations"], r["failed_evaluations"], r["actions"]) == (3, 3, 1)
    assert r["final"] == [2, 4, 2]
    # A Tourist act with the evaluation's text is not an evaluation: two misses, then the
    # last evaluation finds the tourist on the target.
    ep["dialog"][1]["id"] = T
    r = human.replay_outcome(ep)
    assert (r["outcome"], r["evaluations"], r["failed_evaluations"], r["end_act"]) == (
        "success", 3, 2, 7)


def test_a_changed_target_changes_the_outcome():
    moved = dict(A, target_location=[2, 7, 2])
    rows = human.dialogue_outcomes([A, moved])
    assert [r["outcome"] for r in rows] == ["success", "unfinished"]
    assert human.summarize(rows)["agreement"] == 1


def test_the_command_end_to_end(release, tmp_path):
    out = tmp_path / "human.json"
    proc = subprocess.run([sys.executable, "-m", "experiments.ttw_language.human",
                           f"--data_dir={release}", f"--json_out={out}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["all"]["success_rate"] == pytest.approx(60.0)
    assert result["all"]["steps"] == pytest.approx(7 / 3)
    # train: A, B success, C failed -> 2/3; valid: E success (D left out); test: G failed.
    assert result["train"]["success_rate"] == pytest.approx(200 / 3)
    assert result["valid"]["success_rate"] == pytest.approx(100.0)
    assert result["test"]["success_rate"] == pytest.approx(0.0)
    assert result["test"]["steps"] is None
    assert result["paper"]["success_rate"] == 76.74 and result["paper"]["steps"] == 15.05
    assert "| success rate, % (status) | 66.67 | 100.00 | 0.00 | 60.00 | 76.74 |" in proc.stdout
    assert "| #steps (FORWARD acts, successful) | 2.00 | 3.00 | - | 2.33 | 15.05 |" in proc.stdout
    # A missing file: the expected files and where to get them, no traceback.
    os.remove(os.path.join(release, "talkthewalk.valid.json"))
    proc = subprocess.run([sys.executable, "-m", "experiments.ttw_language.human",
                           f"--data_dir={release}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode != 0
    assert "talkthewalk.valid.json" in proc.stderr and "talkthewalk.train.json" not in proc.stderr
    assert "facebookresearch/talkthewalk" in proc.stderr and "Traceback" not in proc.stderr


def test_the_report_in_process(release):
    text, result = command.report(["valid", "test"], data_dir=release, steps="actions")
    assert set(result) == {"schema_version", "valid", "test", "all", "paper", "source",
                           "provenance"}
    assert result["all"]["dialogues"] == 4 and result["all"]["steps"] == pytest.approx(4.0)
    assert "#steps (tourist actions, successful)" in text
    with pytest.raises(ValueError, match="--data_dir"):
        command.report(["train"])


def test_missing_files_are_named(tmp_path):
    (tmp_path / "talkthewalk.train.json").write_text("[]")
    with pytest.raises(FileNotFoundError) as e:
        human.dialogue_files(str(tmp_path), maps.SPLITS)
    msg = str(e.value)
    assert "talkthewalk.valid.json" in msg and "talkthewalk.test.json" in msg
    assert "talkthewalk.train.json" not in msg and td.SOURCE_HINT in msg
    with pytest.raises(ValueError, match="unknown split"):
        human.dialogue_files(str(tmp_path), ["dev"])


@pytest.mark.parametrize("records, match", [
    ([A, "not a record"], r"f\.json: episode 1: expected an object"),
    ([A, {k: v for k, v in B.items() if k != "dialog"}],
     r"f\.json: episode 1: field 'dialog': missing required field"),
    ([dict(A, status="won")], r"f\.json: episode 0: field 'status': expected one of"),
    ([dict(A, location=[3, 7])], r"f\.json: episode 0: field 'location': expected a list"),
])
def test_bad_records_name_the_file_and_record(tmp_path, records, match):
    path = tmp_path / "f.json"
    path.write_text(json.dumps(records))
    with pytest.raises(td.DialogueFormatError, match=match):
        human.read_outcomes(str(path))
    with pytest.raises(td.DialogueFormatError, match=match):
        human.dialogue_outcomes(records, str(path))


def test_synthetic_dialogues_replay_as_recorded():
    # The generator ends every dialogue with a Guide EVALUATE_LOCATION on the target corner
    # (status 'success'), after at most one evaluation off the target.
    eps = sd.synthetic_dialogues(maps.synthetic_maps(0), 300, seed=3)
    rows = human.dialogue_outcomes(eps)
    assert all(r["status"] == "success" == r["outcome"] for r in rows)
    assert all(r["end_act"] == len(ep["dialog"]) - 1 for r, ep in zip(rows, eps))
    assert all(r["failed_evaluations"] <= 1 for r in rows)
    assert any(r["failed_evaluations"] == 1 for r in rows)   # the failed path is exercised
    s = human.summarize(rows)
    assert s["success_rate"] == s["success_rate_replay"] == 100.0
    assert s["agreement"] == s["compared"] == 300
    text, result = command.report(["train", "test"], synthetic=40, seed=2)
    assert result["all"]["dialogues"] == 80 and result["all"]["agreement"] == 80
    assert "synthetic maps" in text
