"""The pipeline on files in the RxR release's exact schema (`ttw_jax.rxr.release`): every key of
the README's guide, follower, pose-trace and text-feature files; the readers' masks from them;
and the trainer end to end, evaluating the guides' paths only unless told otherwise."""
import gzip
import json
import os

import numpy as np
import pytest

from tests.conftest import shared_path
from tests.experiments.trainers import TRAINERS
from ttw_datasets.rxr.rxr_dataset_builder import SYNTHETIC_TRAIN_SCANS, SYNTHETIC_UNSEEN_SCANS
from ttw_jax.rxr import predictions, records as rr
from ttw_jax.rxr.graph import load_matterport_graph
from ttw_jax.rxr.release import write_release
from ttw_jax.rxr.synthetic import synthetic_split_records

GUIDE_KEYS = {"split", "instruction_id", "annotator_id", "language", "path_id", "scan", "path",
              "heading", "instruction", "timed_instruction", "edit_distance"}
FOLLOWER_KEYS = {"demonstration_id", "instruction_id", "annotator_id", "path", "metrics"}
TRACE_KEYS = {"pano", "time", "extrinsic_matrix", "intrinsic_matrix", "image_mask",
              "feature_weights", "text_masks"}


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    conn = shared_path("matterport", "connectivity")
    recs = synthetic_split_records(conn, SYNTHETIC_TRAIN_SCANS[:4], SYNTHETIC_UNSEEN_SCANS[:1],
                                   (("train", 48, 0), ("val_seen", 12, 1), ("val_unseen", 12, 2)))
    scans = sorted({r["scan"] for split in recs.values() for r in split})
    graph, nodes, _ = load_matterport_graph(conn, scans)
    manual = str(tmp_path_factory.mktemp("rxr_release"))
    counts = write_release(manual, graph, nodes, recs, dim=16)
    return manual, recs, counts


def read_jsonl(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_files_carry_every_key_of_the_release(release):
    manual, recs, counts = release
    assert counts == {"train": 48, "val_seen": 12, "val_unseen": 12}
    guides = read_jsonl(os.path.join(manual, "rxr_val_seen_guide.jsonl.gz"))
    followers = read_jsonl(os.path.join(manual, "rxr_val_seen_follower.jsonl.gz"))
    assert all(set(g) == GUIDE_KEYS for g in guides)
    assert all(set(w) == {"word", "start_time", "end_time"} for w in guides[0]["timed_instruction"])
    assert all(set(f) == FOLLOWER_KEYS for f in followers)
    assert set(followers[0]["metrics"]) == {"ne", "sr", "spl", "dtw", "ndtw", "sdtw"}
    g = guides[0]
    with np.load(os.path.join(manual, "pose_traces", "rxr_val_seen",
                              f"{g['instruction_id']:06d}_guide_pose_trace.npz")) as z:
        assert set(z.files) == TRACE_KEYS
        k, n = len(g["path"]), len(z["pano"])
        assert z["pano"].shape == (n, 1) and z["extrinsic_matrix"].shape == (n, 16)
        assert z["image_mask"].shape == (k, 128, 256) and z["feature_weights"].shape == (k, 36)
    d = followers[0]["demonstration_id"]
    with np.load(os.path.join(manual, "pose_traces", "rxr_val_seen",
                              f"{d:06d}_follower_pose_trace.npz")) as z:
        assert set(z.files) == TRACE_KEYS | {"audio_time"}
    lang = g["language"].split("-")[0]
    with np.load(os.path.join(manual, "text_features", "rxr_val_seen",
                              f"{g['instruction_id']:06d}_{lang}_text_features.npz")) as z:
        assert set(z.files) == {"tokens", "features"}
        assert z["features"].shape == (len(z["tokens"]), 16) and z["tokens"].shape[1] == 1


def test_readers_take_the_masks_and_features_of_the_release(release):
    manual, _, _ = release
    records = rr.read_rxr_split(manual, "val_seen", ("guide", "follower"))
    assert {r["annotator"] for r in records} == {"guide", "follower"}
    for r in records:
        assert r["step_views"].shape == (len(r["path"]), 36) and r["step_views"].any(1).all()
        assert r["step_subwords"].shape == (len(r["path"]), len(r["text_features"]))
        assert r["text_features"].shape[1] == 16
    # the intrinsics give the same visual masks as the release's feature_weights
    g = records[0]
    trace = rr.load_pose_trace(os.path.join(manual, "pose_traces", "rxr_val_seen",
                                            f"{g['instruction_id']:06d}_guide_pose_trace.npz"))
    from_weights = rr.trace_step_views(trace, g["path"], "t")
    from_cameras = rr.trace_step_views(dict(trace, feature_weights=None), g["path"], "t")
    np.testing.assert_array_equal(from_weights, from_cameras)
    assert from_cameras.sum(1).min() >= 4      # each viewpoint's snapshots cover several views


@pytest.mark.slow
def test_trainer_runs_on_the_release_and_scores_guides_only(release, tmp_path):
    from experiments.rxr import train
    manual, recs, counts = release
    c = TRAINERS["rxr"].config(str(tmp_path / "tfds"), data__tfds_config="guide_follower",
                               data__manual_dir=manual, data__text_features=True,
                               data__max_tokens=64, data__max_path=16, eval__horizon=16,
                               train_horizon=12, data__dev_split="val_unseen",
                               data__eval_splits="val_seen", eval__baselines="random_walk",
                               eval__per_annotator=True,
                               data__allow_synthetic_perception=True)
    for d in ("a", "b"):
        os.makedirs(tmp_path / d)
    data = train.load_data(c, str(tmp_path / "a"))
    for split in ("val_seen", "val_unseen"):
        eps = data["episodes"][split]
        assert (eps["annotator"] == rr.ANNOTATORS.index("guide")).all()
        assert len(eps["start"]) == counts[split]
        guide_paths = {r["instruction_id"]: len(r["path"]) for r in recs[split]}
        assert eps["path_len"].tolist() == [guide_paths[i] for i in eps["instruction_id"]]
    train_eps = data["episodes"]["train"]
    assert set(train_eps["annotator"]) == {0, 1} and train_eps["has_word_mask"].all()
    assert train_eps["text_features"].shape[-1] == 16
    res = train.train_and_evaluate(c, str(tmp_path / "run"))
    agent = res["val_seen"]["full"]
    assert res["val_seen"]["episodes"] == counts["val_seen"]
    assert set(agent["per_annotator"]) == {"guide"}
    assert agent["per_annotator"]["guide"]["ndtw"] == pytest.approx(agent["ndtw"])
    # both annotators scored when asked: the followers' (shorter) paths are references too,
    # and each annotator's paths go to a leaderboard file of their own (an instruction_id once
    # per file), which scores back against that annotator's references
    c.data.eval_annotators = "guide,follower"
    data = train.load_data(c, str(tmp_path / "b"))
    both = data["episodes"]["val_seen"]
    assert len(both["start"]) == 2 * counts["val_seen"]
    assert sorted(set(both["annotator"])) == [0, 1]
    per = {"path": both["path"].copy(), "path_len": both["path_len"].copy()}
    per["path_len"][::2] = 1                          # some predictions stop at the start
    names = predictions.write_split_predictions(str(tmp_path / "b"), "val_seen", data, per)
    assert names == ["predictions_val_seen_guide.jsonl", "predictions_val_seen_follower.jsonl"]
    from ttw_jax.rxr.metrics import path_metrics
    for name, who in zip(names, ("guide", "follower")):
        mask = both["annotator"] == rr.ANNOTATORS.index(who)
        preds = predictions.read_predictions(str(tmp_path / "b" / name))
        assert sorted(preds) == sorted(both["instruction_id"][mask].tolist())
        eps = {k: both[k][mask] for k in ("instruction_id", "path", "path_len")}
        scored = predictions.score_predictions(preds, eps, data["nodes"], data["geodesic"])
        want = path_metrics(per["path"][mask], per["path_len"][mask], eps["path"],
                            eps["path_len"], data["geodesic"])
        for k in ("ne", "sr", "ndtw"):
            assert scored[k] == pytest.approx(float(np.mean(want[k])), abs=1e-5)


@pytest.mark.slow
def test_the_rxr_config_runs_on_the_release(release, tmp_path):
    # configs/rxr.py (the paper's scale) for two steps; synthetic view features stand in for
    # the user's, the rest as configured: text features, paths and horizons as long as the
    # longest reference path, no structural direction features
    from experiments.rxr import train
    from experiments.rxr.configs import rxr
    from tests.helpers import override
    manual, recs, _ = release
    c = override(rxr.get_config(), num_steps=2, eval_every=2, log_every=1, batch_size=8, num_devices=1,
                 data__manual_dir=manual, data__tfds_dir=str(tmp_path / "tfds"),
                 data__connectivity_dir=shared_path("matterport", "connectivity"),
                 data__features="synthetic", data__allow_synthetic_perception=True, eval__baselines="random_walk",
                 eval__baseline_seeds=1)
    res = train.train_and_evaluate(c, str(tmp_path / "run"))
    assert res["best_step"] == 2 and set(res["val_unseen"]["full"]["per_language"]) <= {"en", "hi"}
    data = train.load_data(c, str(tmp_path / "run"))
    longest = max(len(r["path"]) for s in ("train", "val_seen", "val_unseen") for r in recs[s])
    assert data["max_path"] == longest and train.horizons(c, data) == (longest, longest)
    assert "text_features" in data["episodes"]["train"]


@pytest.mark.slow
def test_streamed_text_features_equal_the_decoded_ones_and_a_run_resumes(release, tmp_path):
    """`data.stream`: the text features stay in the ArrayRecord files (a `LazyRows` reading a
    row when indexed) and equal the decoded ones; a streaming run killed after its first
    checkpoint keeps the stream's state there and resumes to the end."""
    from experiments.rxr import train
    from tests.experiments.contract import crash_after
    from tests.helpers import Crash
    from ttw_jax.core.stream import LazyRows
    manual, _, _ = release
    tfds = str(tmp_path / "tfds")
    args = dict(data__tfds_config="guide", data__manual_dir=manual, data__text_features=True,
                data__max_tokens=64, data__max_path=16, eval__horizon=16, train_horizon=12,
                eval__baselines="random_walk", data__eval_splits="val_unseen",
                data__allow_synthetic_perception=True)
    c = TRAINERS["rxr"].config(tfds, **args)
    s = TRAINERS["rxr"].config(tfds, **args, data__stream=True)
    for d in ("a", "b"):
        os.makedirs(tmp_path / d)
    dense = train.load_data(c, str(tmp_path / "a"))["episodes"]
    lazy = train.load_data(s, str(tmp_path / "b"))["episodes"]
    for split in ("train", "val_unseen"):
        assert isinstance(lazy[split]["text_features"], LazyRows)
        idx = np.arange(len(dense[split]["start"]))[::3]
        np.testing.assert_array_equal(lazy[split]["text_features"][idx].astype(np.float32),
                                      dense[split]["text_features"][idx].astype(np.float32))
        for k in ("token_len", "start", "path", "word_mask"):
            np.testing.assert_array_equal(lazy[split][k], dense[split][k])
    # a streaming run (its resume is exact as the SDR one's: `tests/touchdown/test_sdr_stream.py`)
    with pytest.raises(Crash):
        train.train_and_evaluate(s, str(tmp_path / "run"), hooks=[crash_after(11)])
    meta = tmp_path / "run" / "checkpoints" / "8" / "meta" / "metadata"
    assert json.loads(meta.read_text())["data_state"] == {"next_index": 8}
    res = train.train_and_evaluate(s, str(tmp_path / "run"))
    assert res["best_step"] in (8, 16) and 0 <= res["val_unseen"]["full"]["sr"] <= 1


def test_a_release_without_pose_traces_reads_as_a_guide_only_one(release, tmp_path):
    manual, recs, _ = release
    conn = shared_path("matterport", "connectivity")
    small = {"val_seen": recs["val_seen"][:3]}
    graph, nodes, _ = load_matterport_graph(conn, sorted({r["scan"] for r in small["val_seen"]}))
    assert write_release(str(tmp_path), graph, nodes, small, dim=8, pose_traces=False) == \
        {"val_seen": 3}
    assert not os.listdir(tmp_path / "pose_traces" / "rxr_val_seen")
    assert not os.path.exists(tmp_path / "rxr_val_seen_follower.jsonl.gz")
    read = rr.read_rxr_split(str(tmp_path), "val_seen")
    assert [r["instruction_id"] for r in read] == [r["instruction_id"] for r in small["val_seen"]]
    assert all(r["step_views"] is None and r["text_features"].shape[1] == 8 for r in read)
