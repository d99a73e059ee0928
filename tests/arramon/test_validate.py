"""`arramon.validate.validate_release`: a sound release (synthetic instances and features in the
release's layout) has no problem, one with planted damage has every planted file named once,
each in one line, and the real val_seen has none; the tag alignment passes a sound recording
(also of real val_seen instances) and flags one recorded a step late or early."""
import json
import os

import numpy as np
import pytest

from tests.arramon import fuzz_cases
from tests.conftest import SHARED_DATA
from tests.fuzz import blank_line, edit_npy, flip_bytes, planted, set_field
from ttw_jax.arramon import features as af, validate
from ttw_jax.arramon.records import read_arramon
from ttw_jax.arramon.synthetic import synthetic_instances
from ttw_jax.arramon.synthetic_features import demonstration_steps, write_features


def release(tmp_path, **train_features):
    """(manual dir, features dir, {split: instances}, feature files written): train.json (3
    instances), val_seen.json (1), na_vocab.txt and the features, every 2nd step unrecorded
    (`train_features`: more `write_features` options for train's)."""
    manual, feats = tmp_path / "data", tmp_path / "features"
    manual.mkdir()
    records, written = {}, 0
    for split, num, seed in (("train", 3, 0), ("val_seen", 1, 1)):
        records[split] = synthetic_instances(num, seed)
        (manual / f"{split}.json").write_text(json.dumps(records[split]))
        written += write_features(records[split], str(feats), seed=seed, skip_every=2,
                                  **(train_features if split == "train" else {}))
    (manual / validate.VOCAB_FILE).write_text("<PAD>\n<UNK>\nthe\nwalk\n")
    return manual, feats, records, written


def test_a_sound_release_has_no_problem(tmp_path):
    manual, feats, _, written = release(tmp_path)
    assert validate.validate_release(str(manual)) == ([], 3)
    notes = []
    problems, checked = validate.validate_release(str(manual), str(feats), notes=notes)
    assert problems == [] and checked == 3 + 4 + written
    assert len(notes) == 2, notes
    for note, split in zip(notes, ("train", "val_seen")):
        assert note.startswith(f"tag alignment {split}: 0 of ") and "worst" not in note
        compared = int(note.split(": 0 of ")[1].split()[0])
        assert compared > 10
        assert note.endswith(f"agent_rot read as a heading for {compared} of {compared} (0 of "
                             "them at the replayed position with another heading)")


@pytest.mark.parametrize("shift", [1, -1])
def test_a_recording_off_by_one_step_is_flagged(tmp_path, shift):
    manual, feats, records, _ = release(tmp_path, shift=shift)
    notes = []
    problems, _ = validate.validate_release(str(manual), str(feats), notes=notes)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{feats / af.POS_DIR}: train: the recording looks shifted "
                                  f"by {shift:+d} step: ")
    shifted = problems[0].split(f"before action t{shift:+d}")[0].rsplit(", ", 1)[1]
    assert shifted.startswith("0 of ")             # shifted back, every entry fits
    train, val = notes
    assert train.startswith("tag alignment train: ") and " worst " in train
    assert not train.startswith("tag alignment train: 0 of ")
    maps = {str(r["mapId"]) for r in records["train"]}
    worst = train.split("; worst ")[1].split("; with")[0].split(", ")
    assert len(worst) == validate.SHOWN
    for w in worst:          # "<distance> at pos_<mapId>.json '<mapId>_<phase>_<turn>_<t>'"
        dist, _, name, key = w.split(" ")
        assert float(dist) > af.POSE_TOL and name[4:-5] in maps and key[1:].startswith(name[4:-5])
    assert val.startswith("tag alignment val_seen: 0 of ")


def test_layout_variants_are_sound_and_the_ignored_keys_are_counted(tmp_path):
    manual, feats, _, written = release(tmp_path, variants=("shuffled", "float_ids",
                                                            "third_turn"))
    notes = []
    problems, checked = validate.validate_release(str(manual), str(feats), notes=notes)
    assert problems == [] and checked == 3 + 4 + written
    turn2 = sum(k.split("_")[2] == "2" for f in (feats / af.POS_DIR).glob("*.json")
                for k in json.loads(f.read_text()))
    assert turn2 > 0 and notes[-1].startswith(f"pose files: {turn2} keys of turns >= 2 ignored "
                                              "(in 3 files;")


def test_real_instances_replay_to_the_recorded_convention():
    """The poses the synthetic writer records (the release's convention as `features` reads
    it: agent_pos the path point before action t, agent_rot the Euler yaw) agree with the
    replayed demonstrations of real val_seen instances, positions and headings."""
    records = read_arramon(os.path.join(SHARED_DATA, "arramon", "val_seen.json"))[:12]
    poses = {}
    for r in records:
        pz = poses[r["mapId"]] = af.Poses()
        for turn in range(2):
            for phase in af.PHASES:
                actions, steps = demonstration_steps(r, phase, turn)
                for t, (pos, rot) in enumerate(steps[:len(actions)]):
                    pz[phase, turn, t] = [-1, [-1.0] * 3, pos, rot]
    alignment = validate.tag_alignment("val_seen", records, poses, "features")
    assert alignment.differ == 0 and alignment.compared > 500 and not alignment.off_by()
    assert alignment.headings == [alignment.compared, 0]
    assert alignment.shifted[1][1] > 100          # a step late differs at every move


def feature_files(feats, map_id):
    return sorted((feats / af.VFEAT_DIR).glob(f"vfeat_{map_id}_*.npy"))


def test_every_planted_damage_is_named(tmp_path):
    manual, feats, records, _ = release(tmp_path)
    train = records["train"]
    truncated, nan, wrong, pickled, gone = feature_files(feats, train[0]["mapId"])[:5]
    truncated.write_bytes(truncated.read_bytes()[:-9])
    x = np.zeros(af.FEATURE_SHAPE, np.float32)
    x[1, 2, 3] = np.nan
    np.save(nan, x)
    np.save(wrong, np.zeros((7, 7, 1024), np.float32))
    np.save(pickled, np.array([None, 1], object))
    gone.unlink()
    bad_pose = feats / af.POS_DIR / f"pos_{train[1]['mapId']}.json"
    bad_pose.write_text(bad_pose.read_text()[:-5])
    lost_pose = feats / af.POS_DIR / f"pos_{train[2]['mapId']}.json"
    lost_pose.unlink()
    val = records["val_seen"]
    val[0]["gt_actions"]["navi_action_gt"][1][0] = "x"
    (manual / "val_seen.json").write_text(json.dumps(val))
    vocab = manual / validate.VOCAB_FILE
    vocab.write_text("<PAD>\n<UNK>\nthe\nwalk\nthe\n")

    problems, _ = validate.validate_release(str(manual), str(feats))
    assert all("\n" not in p for p in problems)
    expected = [f"{manual / 'val_seen.json'}: instance 0 (code {val[0]['code']!r}): field "
                "'gt_actions.navi_action_gt[1][0]' is not one of ('f', 'l', 'r', 'P'): 'x'",
                f"{vocab}: not an official vocabulary file (one token a line, <PAD> and <UNK> "
                "first): 'the' on lines 3 and 5",
                f"{bad_pose}: invalid JSON",
                f"{truncated}: truncated",
                f"{nan}: non-finite value nan at index (1, 2, 3) (stored as float32)",
                f"{wrong}: expected float [7, 7, 2048], got float32 [7, 7, 1024]",
                f"{pickled}: an object array",
                f"{feats / af.POS_DIR}: no pose file for 1 mapIds the records name, e.g. "
                f"['{lost_pose}']",
                f"{feats / af.VFEAT_DIR}: no feature file for 1 steps the pose files list, e.g. "
                f"['{gone}']"]
    for needle in expected:
        assert sum(p.startswith(needle) for p in problems) == 1, (needle, problems)
    for planted in (truncated, nan, wrong, pickled, bad_pose, vocab, manual / "val_seen.json"):
        assert sum(str(planted) in p for p in problems) == 1, (planted, problems)
    assert len(problems) == len(expected)
    # headers only: the NaN goes unseen, the rest is still found
    problems, _ = validate.validate_release(str(manual), str(feats), bodies=False)
    assert len(problems) == len(expected) - 1 and not any(str(nan) in p for p in problems)


def test_float16_overflow_unrecorded_starts_and_missing_folders_are_named(tmp_path):
    manual, feats, records, _ = release(tmp_path)
    big = feature_files(feats, records["train"][0]["mapId"])[0]
    np.save(big, np.full(af.FEATURE_SHAPE, 1e6, np.float32))
    map_id = records["val_seen"][0]["mapId"]
    pose = feats / af.POS_DIR / f"pos_{map_id}.json"
    entries = json.loads(pose.read_text())
    del entries[f"{map_id}_assem_1_0"]
    pose.write_text(json.dumps(entries))
    problems, _ = validate.validate_release(str(manual), str(feats))
    assert problems == [f"{pose}: no entry for assem_1_0, the first view of turn 1's assembly",
                        f"{big}: value 1000000.0 at index (0, 0, 0) is not finite as float16, the "
                        "dtype it is used in (stored as float32)"]
    problems, _ = validate.validate_release(str(manual), str(tmp_path / "nowhere"))
    assert len(problems) == 1 and problems[0].startswith(f"{tmp_path / 'nowhere'}: not a folder")
    for f in ("train.json", "val_seen.json"):
        os.remove(manual / f)
    problems, checked = validate.validate_release(str(manual))
    assert checked == 1 and len(problems) == 1
    assert problems[0].startswith(f"{manual}: no instance file (expected any of train.json")


def test_the_real_val_seen_has_no_problem():
    data = os.path.join(SHARED_DATA, "arramon")
    assert os.path.isfile(os.path.join(data, "val_seen.json")), f"shared data missing: {data}"
    assert validate.validate_release(data) == ([], 2)


def test_five_planted_faults_one_a_damaged_instance_file_are_all_named(tmp_path):
    """One pass names 5 faults in 5 files (5/5), the instance file among them: flipped bytes in
    val_seen.json hide none of the pose and feature files it names, which are listed from their
    folders and checked all the same."""
    fuzz_cases.build(tmp_path)
    m0, m1 = fuzz_cases.MAP_IDS
    feats = tmp_path / "features"
    faults = {
        tmp_path / fuzz_cases.SPLIT: (flip_bytes(), "unreadable (UnicodeDecodeError"),
        feats / af.VFEAT_DIR / f"vfeat_{m0}_navi_0_0.npy": (
            edit_npy(lambda a: planted(a, np.nan)), "non-finite value nan at index"),
        feats / af.VFEAT_DIR / f"vfeat_{m1}_assem_0_0.npy": (
            edit_npy(lambda a: planted(a, 1e300, np.float64)), "is not finite as float16"),
        feats / af.POS_DIR / f"pos_{m1}.json": (
            set_field(f"{m1}_assem_1_0", "2.2", 1e300),
            f"key '{m1}_assem_1_0': field 'agent_pos' (entry[2]) is not a coordinate"),
        tmp_path / fuzz_cases.VOCAB: (blank_line(3), "line 4 is ''"),
    }
    _, clean = validate.validate_release(str(tmp_path / "data"), str(feats))
    for path, (mutate, _) in faults.items():
        mutate(path)
    problems, checked = validate.validate_release(str(tmp_path / "data"), str(feats))
    assert checked == clean == 12            # val_seen, the vocabulary, 2 pose and 8 feature files
    named = [path for path, (_, message) in faults.items()
             if sum(p.startswith(f"{path}: ") and message in p for p in problems) == 1]
    assert len(named) == len(faults) == len(problems) == 5, problems
