"""End-to-end RxR training: train_and_evaluate on a tiny synthetic config (real Matterport graphs),
outputs, crash and resume, refusal of a changed config, and that training beats the baselines that
do not see the gold path."""
import json
import os

import pytest

from experiments.rxr import train
from experiments.rxr.configs import default
from tests.conftest import shared_path
from tests.helpers import Crash, crash_at, override


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("tfds"))


def tiny_config(tfds_dir, **overrides):
    c = default.get_config()
    c.model.embed_dim = 16
    c.model.hidden = 32
    c.batch_size = 16
    c.num_steps = 16
    c.eval_every = 8
    c.log_every = 4
    c.patience = 100
    c.loss.horizon = 8
    c.test_horizon = 10
    c.data.tfds_dir = tfds_dir
    c.data.connectivity_dir = shared_path("matterport", "connectivity")
    c.data.eval_splits = "val_unseen"
    c.eval.baselines = "random_walk"
    c.eval.baseline_seeds = 1
    return override(c, **overrides)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, tfds_dir):
    workdir = str(tmp_path_factory.mktemp("full"))
    return workdir, train.train_and_evaluate(tiny_config(tfds_dir), workdir)


@pytest.mark.slow
def test_runs_end_to_end_and_writes_outputs(uninterrupted):
    workdir, res = uninterrupted
    for name in ("results.json", "metrics.jsonl", "vocab.json", "config.json"):
        assert os.path.exists(os.path.join(workdir, name)), name
    with open(os.path.join(workdir, "results.json")) as f:
        assert json.load(f)["val_unseen"]["full"]["sr"] == res["val_unseen"]["full"]["sr"]
    assert res["val_unseen"]["episodes"] == 300
    assert set(res["languages"]) == {"en-US", "hi-IN"}
    agent = res["val_unseen"]["full"]
    assert set(agent["per_language"]) == {"en-US", "hi-IN"}
    for m in (agent, res["val_unseen"]["random_walk"]):
        assert 0 <= m["sdtw"] <= m["ndtw"] <= 1 and 0 <= m["spl"] <= m["sr"] <= 1
        assert m["pl"] >= 0 and m["ne"] >= 0
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        dev = [json.loads(line) for line in f if "dev/ndtw" in line]
    assert [d["step"] for d in dev] == [8, 16]


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_result(uninterrupted, tfds_dir, tmp_path):
    _, expected = uninterrupted
    workdir = str(tmp_path)
    with pytest.raises(Crash):
        train.train_and_evaluate(tiny_config(tfds_dir), workdir, hooks=[crash_at(11)])
    assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["8"]
    resumed = train.train_and_evaluate(tiny_config(tfds_dir), workdir)
    assert resumed["val_unseen"] == expected["val_unseen"]
    assert resumed["best_step"] == expected["best_step"]


@pytest.mark.slow
def test_changed_config_is_refused_and_bad_settings_are_named(uninterrupted, tfds_dir, tmp_path):
    workdir, _ = uninterrupted
    with pytest.raises(ValueError, match=r"another config \(model.kind: 'full' -> 'vision_only'\)"):
        train.train_and_evaluate(tiny_config(tfds_dir, model__kind="vision_only"), workdir)
    with pytest.raises(ValueError, match="connectivity_dir"):
        train.train_and_evaluate(tiny_config(tfds_dir, data__connectivity_dir=""),
                                 str(tmp_path / "a"))
    with pytest.raises(ValueError, match="unknown model.kind"):
        train.train_and_evaluate(tiny_config(tfds_dir, model__kind="blind"), str(tmp_path / "b"))
    with pytest.raises(ValueError, match="lr_schedule"):
        train.train_and_evaluate(tiny_config(tfds_dir, lr_schedule="linear"), str(tmp_path / "c"))


@pytest.mark.slow
def test_trained_agent_beats_the_baselines_that_ignore_the_gold_path(tfds_dir, tmp_path):
    c = tiny_config(tfds_dir, num_steps=150, eval_every=50, model__hidden=64,
                    learning_rate=2e-3, eval__baselines="random_walk,random_heading")
    res = train.train_and_evaluate(c, str(tmp_path))["val_unseen"]
    best = max(res["random_walk"]["ndtw"], res["random_heading"]["ndtw"])
    assert res["full"]["ndtw"] > best + 0.05
