"""The ArraMon release's pre-recorded features: reading the layout as shipped (and every bad
input named), the float16 pack (missing steps, never stale), the nearest-recorded-pose rule on
a hand-made path, and V/L and V/O trained and evaluated end to end from files in the release's
layout."""
import json
import os

import jax.numpy as jnp
import numpy as np
import pytest

from experiments.arramon import score, train
from experiments.arramon.configs import default
from tests.conftest import xla_optimizations
from ttw_jax.arramon import (env, episodes as ae, features as af, synthetic as syn,
                             training_data)
from ttw_jax.arramon.predictions import read_predictions, score_predictions
from ttw_jax.arramon.synthetic_features import write_features
from ttw_jax.core.vocab import Vocabulary


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """A release-layout folder: train.json / val_seen.json of synthetic instances, and their
    features with every 4th step unrecorded."""
    root = tmp_path_factory.mktemp("arramon_release")
    manual, feats = root / "data", root / "features"
    manual.mkdir()
    records = {}
    for name, n, seed in (("train", 16, 1), ("val_seen", 6, 2)):
        recs = syn.synthetic_instances(n, seed=seed)
        for i, r in enumerate(recs):
            r["mapId"] = 1000 * seed + i
        (manual / f"{name}.json").write_text(json.dumps(recs))
        write_features(recs, str(feats), seed=seed, skip_every=4)
        records[name] = recs
    return {"manual": str(manual), "features": str(feats), "records": records,
            "root": root}


def test_nearest_recorded_pose_on_a_hand_made_path():
    # A demonstration: at (0, 0) facing 0, turn right twice, walk to (0, 1) and (1, 1).
    poses = jnp.array([[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 1, 2], [1, 1, 2], [1, 1, 5]],
                      jnp.float32)
    rec = jnp.array([True, True, False, True, True, True])
    pick = lambda xz, h, r=rec: int(af.nearest_recorded(jnp.array(xz, jnp.float32),   # noqa
                                                        jnp.int32(h), poses, r))
    assert pick((0, 0), 0) == 0            # on a recorded pose
    assert pick((0, 0), 2) == 1            # step 2 is unrecorded: heading 1 is the nearest
    assert pick((0, 0), 11) == 0           # headings wrap round: 11 is one step from 0
    assert pick((0.1, 0.9), 7) == 3        # off the path: the nearest position first
    assert pick((1, 1), 4) == 5            # same place: heading 5 is nearer than 2
    assert pick((1, 1), 3) == 4            # heading 2 is 1 step away, 5 is 2
    assert pick((5, 5), 0) == 4            # far away: (1, 1), and of its headings the nearer
    assert pick((0, 0), 2, rec.at[1].set(False)) == 0     # only recorded poses count


def _pose_file(tmp_path, entries):
    d = tmp_path / af.POS_DIR
    d.mkdir(exist_ok=True)
    (d / "pos_7.json").write_text(json.dumps(entries))
    return str(tmp_path)


ENTRY = [-1, [-1, -1, -1], [1.0, 0.525, 2.0], [0, 90, 0]]
NAN = float("nan")


@pytest.mark.parametrize("entries, message", [
    ({"7_navi_0_0": ENTRY, "8_navi_0_1": ENTRY}, r"key '8_navi_0_1' is not '7_<navi\|assem>"),
    ({"7_navi_0_0": ENTRY, "7_walk_0_1": ENTRY}, "key '7_walk_0_1' is not"),
    ({"7_navi_0_0": [-1, [0, 0], [0, 0, 0], 0]},
     r"key '7_navi_0_0': field 'obj_pos' \(entry\[1\]\) is not \[x, y, z\]: \[0, 0\]"),
    ({"7_navi_0_0": ENTRY[:3]}, r"key '7_navi_0_0': expected \[obj_ids"),
    ({"7_navi_0_0": [1.5, *ENTRY[1:]]}, r"'7_navi_0_0': field 'obj_ids' \(entry\[0\]\) is not "
                                        r"an integer, or a float of integral value: 1.5"),
    ({"7_navi_0_0": [True, *ENTRY[1:]]}, r"'7_navi_0_0': field 'obj_ids'"),
    ({"7_navi_0_0": [-1, [-1, -1, -1], [NAN, 0.525, 2.0], 0]},
     r"'7_navi_0_0': field 'agent_pos' \(entry\[2\]\) is not a coordinate within \+-1e7: nan"),
    ({"7_navi_0_0": [-1, [-1, -1, -1], [1, 0.525, 2.0], float("inf")]},
     r"'7_navi_0_0': field 'agent_rot' \(entry\[3\]\) is not an angle in degrees"),
    ({"7_navi_0_0": [-1, [-1, -1, -1], [1, 0.525, 2.0], [0, 1e300, 0]]},
     r"'7_navi_0_0': field 'agent_rot' \(entry\[3\]\) is not an angle in degrees"),
    ({"7_navi_0_0": [-1, [1e300, -1, -1], *ENTRY[2:]]}, r"'7_navi_0_0': field 'obj_pos'"),
    # A key of turn 2 is not used, but a malformed one is still a malformed file.
    ({"7_navi_0_0": ENTRY, "7_assem_2_0": [NAN, *ENTRY[1:]]}, "key '7_assem_2_0': field "),
    ({}, "pos_7.json: no entries"),
    ([ENTRY], "expected a JSON object keyed by"),
])
def test_bad_pose_files_are_named(tmp_path, entries, message):
    root = _pose_file(tmp_path, entries)
    with pytest.raises(af.FeatureFormatError, match=message) as e:
        af.read_poses(root, 7)
    assert "pos_7.json" in str(e.value)


def test_pose_files_are_read_like_the_official_dict_lookup(tmp_path):
    # Any key order, obj_ids -1.0 (an integral float) and turns >= 2 (ignored, counted).
    root = _pose_file(tmp_path, {"7_assem_1_0": [-1.0, *ENTRY[1:]], "7_navi_3_4": ENTRY,
                                 "7_navi_0_1": ENTRY, "7_navi_2_0": ENTRY, "7_navi_0_0": ENTRY})
    poses = af.read_poses(root, 7)
    assert set(poses) == {("assem", 1, 0), ("navi", 0, 1), ("navi", 0, 0)}
    assert poses.ignored == 2
    assert poses["assem", 1, 0][0] == -1 and isinstance(poses["assem", 1, 0][0], int)
    np.testing.assert_array_equal(af.entry_poses(poses, "navi", 0, 3)[:2],
                                  [[1.0, 0.525, 2.0, 0, 90, 0]] * 2)
    assert np.isnan(af.entry_poses(poses, "navi", 0, 3)[2]).all()     # step 2: no entry


def _lengths(recs):
    return {p: np.array([[len(ae.actions_of(r["gt_actions"][f"{p}_action_gt"][t]))
                          for t in range(2)] for r in recs]) for p in af.PHASES}


def test_layout_variants_pack_to_the_same_features(release, tmp_path):
    recs = release["records"]["val_seen"][:2]
    ep = _lengths(recs)
    canonical = tmp_path / "canonical"
    write_features(recs, str(canonical), seed=5, skip_every=3)
    want = af.pack(str(canonical), recs, ep, str(tmp_path / "cache"), progress=False)
    assert want.ignored == 0
    turn1 = sum(k.split("_")[2] == "1" for f in (canonical / af.POS_DIR).glob("*.json")
                for k in json.loads(f.read_text()))
    for variant in ("shuffled", "float_ids", "third_turn"):
        folder = tmp_path / variant
        write_features(recs, str(folder), seed=5, skip_every=3, variants=(variant,))
        name = f"pos_{recs[0]['mapId']}.json"
        entries = json.loads((folder / af.POS_DIR / name).read_text())
        base = json.loads((canonical / af.POS_DIR / name).read_text())
        assert {"shuffled": list(entries) != list(base) and entries == base,
                "float_ids": all(e[0] == -1.0 and isinstance(e[0], float)
                                 for e in entries.values()),
                "third_turn": sum(k.split("_")[2] == "2" for k in entries) > 0}[variant], variant
        got = af.pack(str(folder), recs, ep, str(tmp_path / "cache"), progress=False)
        for a, b in ((got.feats, want.feats), (got.recorded, want.recorded),
                     (got.offset, want.offset), (got.poses, want.poses)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=variant)
        assert got.ignored == (turn1 if variant == "third_turn" else 0), variant


def test_recorded_headings_and_merge_on_hand_made_poses():
    # psi0 = 10 degrees: heading k points to 10 + 30 k; Euler (pitch, yaw, roll) degrees.
    rot = np.array([[0, 70, 0], [0, 72, 0], [0, 80, 0], [0, -20, 0], [360, 10, 0],
                    [90, 70, 0], [NAN, 70, 0], [0, 430, 0]], float)
    np.testing.assert_array_equal(af.recorded_headings(rot, 10.0), [2, 2, -1, 11, 0, -1, -1, 2])
    replayed = np.array([[[[0, 0, 0], [0, 1, 0], [0, 2, 3]]]], np.float32)   # [1, 1, 3, 3]
    recorded = np.array([[[[0, 0.5, 0.1, 0, 10, 0],       # 0.1 away: the replay kept
                           [2, 0.5, 1, 0, 100, 0],        # 2 away, yaw 100 = heading 3
                           [NAN] * 6]]])                  # no entry
    poses, counts = af.merge_recorded(replayed, recorded, 10.0)
    np.testing.assert_array_equal(poses[0, 0], [[0, 0, 0], [2, 1, 3], [0, 2, 3]])
    assert counts == {"compared": 2, "differ": 1, "headings": 1}
    recorded[0, 0, 1, 3:] = [0, 110, 0]                   # off the lattice: replayed heading
    poses, counts = af.merge_recorded(replayed, recorded, 10.0)
    np.testing.assert_array_equal(poses[0, 0, 1], [2, 1, 0])
    assert counts["headings"] == 0
    np.testing.assert_allclose(af.heading_base("navi", np.radians([10.0])), [[[10.0]]])
    np.testing.assert_array_equal(af.heading_base("assem", np.radians([10.0])), [[[0.0]]])


def test_add_features_takes_the_recorded_pose_where_the_replay_differs(release, tmp_path,
                                                                       capsys):
    recs = release["records"]["val_seen"][:3]
    walk, index = ae.walkable_for(recs)
    d = default.get_config().data
    d.features_cache, d.missing_feature = str(tmp_path / "cache"), "zeros"
    results = {}
    for shift in (0, 1):
        d.features_dir = str(tmp_path / f"shift{shift}")
        write_features(recs, d.features_dir, seed=3, skip_every=4, shift=shift)
        ep = ae.episodes(recs, Vocabulary(("<pad>", "<unk>")), 1, 16, index, "ignore")
        training_data.add_features(ep, walk, recs, d)
        results[shift] = ep, capsys.readouterr().out
    ep, out = results[0]
    demo = af.demonstration_poses(walk, ep)
    assert "recorded poses: navi 0 of " in out and ", assem 0 of " in out
    for phase in af.PHASES:
        np.testing.assert_array_equal(ep[f"{phase}_feat_pose"], demo[phase])
    # Recorded one step late: tag t holds the pose after action t, which differs from the
    # replayed pose before it exactly where action t moved the agent.
    ep, out = results[1]
    moved = 0
    for phase in af.PHASES:
        acts, rec, got = ep[f"{phase}_actions"], ep[f"{phase}_recorded"], ep[f"{phase}_feat_pose"]
        nxt = np.concatenate([demo[phase][:, :, 1:], demo[phase][:, :, -1:]], 2)
        step = rec & (acts == env.FORWARD) & (np.arange(acts.shape[-1]) < ep[f"{phase}_len"][
            ..., None])
        np.testing.assert_allclose(got[..., :2], np.where(step[..., None], nxt, demo[phase])[
            ..., :2], atol=1e-4, err_msg=phase)
        np.testing.assert_array_equal(got[..., 2], demo[phase][..., 2])   # a forward step
        assert f"{phase} {int(step.sum())} of {int(rec.sum())}" in out     # keeps its heading
        moved += int(step.sum())
    assert moved > 10 and f"({moved} with the recorded heading)" in out


def test_missing_files_and_bad_feature_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"pos_3.json: file not found \(no recorded "
                                                r"poses for mapId 3\).*features_dir"):
        af.read_poses(str(tmp_path), 3)
    (tmp_path / af.VFEAT_DIR).mkdir()
    path = str(tmp_path / af.VFEAT_DIR / "vfeat_7_navi_0_0.npy")
    with pytest.raises(FileNotFoundError, match="vfeat_7_navi_0_0.npy: file not found"):
        af.read_feature(path)
    np.save(path, np.zeros((7, 7, 512), np.float32))
    with pytest.raises(af.FeatureFormatError, match=r"vfeat_7_navi_0_0.npy: expected float "
                                                    r"\[7, 7, 2048\], got float32 \[7, 7, 512\]"):
        af.read_feature(path)
    bad = np.zeros(af.FEATURE_SHAPE, np.float32)
    bad[0, 0, 5] = np.nan
    np.save(path, bad)
    with pytest.raises(af.FeatureFormatError, match=r"non-finite value nan at index \(0, 0, 5\)"):
        af.read_feature(path)
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(af.FeatureFormatError, match="vfeat_7_navi_0_0.npy: an object array"):
        af.read_feature(path)               # never unpickled
    np.save(path, np.zeros(af.FEATURE_SHAPE, np.float64))
    with open(path, "ab") as f:
        f.write(b"\0tail")
    with pytest.raises(af.FeatureFormatError, match="vfeat_7_navi_0_0.npy: 5 bytes after the"):
        af.read_feature(path)
    big = np.zeros(af.FEATURE_SHAPE, np.float64)
    big[1, 2, 3] = 1e300                    # finite as stored, infinite as float16
    np.save(path, big)
    with pytest.raises(af.FeatureFormatError, match=r"value 1e\+300 at index \(1, 2, 3\) is not "
                                                    "finite as float16"):
        af.read_feature(path)
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY")               # truncated
    with pytest.raises(af.FeatureFormatError, match="not readable"):
        af.read_feature(path)


def test_pack_fills_unrecorded_steps_and_is_never_stale(release, tmp_path):
    recs = release["records"]["val_seen"][:2]
    ep = _lengths(recs)
    cache = str(tmp_path / "cache")
    packed = af.pack(release["features"], recs, ep, cache, progress=False)
    n0 = int(ep["navi"][0, 0])
    assert n0 > 5
    rows = packed.turn_rows("navi", n0 + 3)[0]                     # instance 0, turn 1
    feats = release["features"]
    want = np.load(af.feature_path(feats, recs[0]["mapId"], "navi", 0, 3)).reshape(49, -1)
    np.testing.assert_array_equal(rows[3], want.astype(np.float16))
    assert rows.dtype == np.float16 and not rows[4].any()          # step 4 unrecorded: zeros
    assert not rows[n0:].any()                                     # padding past the phase
    mask = packed.recorded_mask("navi", n0)[0, 0]
    assert mask[:4].all() and not mask[4] and mask[5]
    prev = af.pack(feats, recs, ep, str(tmp_path / "prev"), missing="previous", progress=False)
    np.testing.assert_array_equal(prev.turn_rows("navi", n0)[0][4], rows[3])
    # Turn 2's rows follow all turn 1 rows (`episodes.turn_examples` order).
    t2 = packed.turn_rows("assem", 4)[2 + 1]                        # instance 1, turn 2
    want = np.load(af.feature_path(feats, recs[1]["mapId"], "assem", 1, 0)).reshape(49, -1)
    np.testing.assert_array_equal(t2[0], want.astype(np.float16))
    # The same sources reuse the pack; a changed feature file is packed again.
    assert af.pack(feats, recs, ep, cache, progress=False) is not None
    assert len(os.listdir(cache)) == 1
    path = af.feature_path(feats, recs[0]["mapId"], "navi", 0, 3)
    saved = np.load(path)
    try:
        np.save(path, saved + 1.0)
        os.utime(path, ns=(0, 12345))
        again = af.pack(feats, recs, ep, cache, progress=False)
        assert len(os.listdir(cache)) == 2
        np.testing.assert_array_equal(again.turn_rows("navi", n0)[0][3],
                                      (saved + 1.0).reshape(49, -1).astype(np.float16))
    finally:
        np.save(path, saved)


def test_a_map_without_features_is_named(release, tmp_path):
    recs = [dict(release["records"]["val_seen"][0], mapId=99)]
    ep = {"navi": np.array([[3, 3]]), "assem": np.array([[2, 2]])}
    with pytest.raises(FileNotFoundError, match="pos_99.json: file not found"):
        af.pack(release["features"], recs, ep, str(tmp_path), progress=False)


def _config(release, name, tfds_dir):
    c = default.get_config()
    c.model.name = name
    c.model.embed_dim, c.model.action_dim, c.model.hidden = 16, 8, 32
    c.data.tfds_config, c.data.manual_dir = "english", release["manual"]
    c.data.tfds_dir = tfds_dir
    c.data.features_dir = release["features"]
    c.data.dev_split = c.data.eval_splits = "val_seen"
    c.batch_size, c.num_steps, c.eval_every, c.log_every = 8, 6, 6, 3
    c.num_devices = 1
    c.optim.learning_rate = 1e-2
    c.eval.horizon, c.eval.batch_size, c.eval.num_figures = 40, 8, 1
    c.eval.perfect_navigation = False
    c.eval.baselines = ""          # tests/arramon/test_train.py checks them
    return c


@pytest.mark.slow
@pytest.mark.parametrize("name, steps", [("vl", 6),
                                         pytest.param("vo", 30, marks=pytest.mark.learning)])
def test_vl_and_vo_train_and_evaluate_from_the_release_layout(release, name, steps, tmp_path,
                                                              capsys, request, learning_seed):
    """V/O, measured over 11 runs (seeds 0-4; 0-2 under --xla_cpu_max_isa=AVX2 and AVX;
    tests/learning_spread.py; 8 devices): navigation accuracy 0.815-0.849 (bound 0.7), assembly
    0.582-0.768 (bound 0.45; 70 held-out actions, so 1.4% an action). On one device, 6 runs
    (seeds 0-2, default ISA and AVX): 0.815-0.849 and 0.646-0.768."""
    c = _config(release, name, str(release["root"] / "tfds"))
    c.num_steps = c.eval_every = steps
    c.seed += learning_seed
    c.eval.perfect_navigation = name == "vo"
    if name == "vo":   # 2e-2: V/O's navigation accuracy 0.82-0.85 after 30 steps (1e-2: 0.76-0.83)
        c.optim.learning_rate = 2e-2
    with xla_optimizations(False):      # tiny models: compilation dominates
        res = train.train_and_evaluate(c, str(tmp_path))
    m = res["val_seen"][name]
    assert 0 <= m["navi_tf_accuracy"] <= 1 and 0 <= m["assem_tf_accuracy"] <= 1
    assert res["num_params"]["navi"] > 2048 * 32      # the 2048 -> hidden projection
    out = capsys.readouterr().out
    assert "teacher-forced action accuracy along the recorded demonstrations" in out
    assert f"paper val_seen {name.upper()[0]}/" in out          # the evaluated split's row
    for f in ("predictions_val_seen.json", "trajectories.png", "results.json"):
        assert (tmp_path / f).is_file()
    preds = read_predictions(str(tmp_path / "predictions_val_seen.json"))
    again = score_predictions(preds, score.split_records(workdir=str(tmp_path),
                                                         split="val_seen"))
    assert again["navi_ndtw"] == pytest.approx(m["navi_ndtw"], abs=1e-5)
    assert again["ptc"] == pytest.approx(m["ptc"], abs=1e-6)
    if name == "vo":
        # The fixture's views hold the demonstrated action (channels 0-3; every 4th step
        # unrecorded shows a neighbour's): reading them, V/O imitates well above always taking
        # the most common action (teacher-forced accuracy on the 6 held-out instances: 'forward'
        # is 64.5% of their navigation actions, 33% of their assembly ones).
        request.getfixturevalue("learned")(navi_tf_accuracy=(m["navi_tf_accuracy"], ">", 0.7),
                                           assem_tf_accuracy=(m["assem_tf_accuracy"], ">", 0.45))
        # Table 6: after the ground truth's navigation every turn collects its object, and the
        # same assembly module places it at least as well as after its own navigation.
        perfect = res["val_seen"]["vo_perfect_navigation"]
        assert perfect["ctc0"] == perfect["ctc3"] == 1.0
        assert perfect["navi_ndtw"] == pytest.approx(1.0, abs=1e-5)
        assert perfect["rpod"] >= m["rpod"] and perfect["ptc"] >= m["ptc"]
    with pytest.raises(ValueError, match="student_forcing needs the simulator's views"):
        c.student_forcing = 0.5
        train.train_and_evaluate(c, str(tmp_path / "sf"))
