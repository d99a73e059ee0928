"""End-to-end Touchdown navigation: train_and_evaluate on a tiny synthetic config; crash and
resume; the trained agents beat the Random baseline on held-out synthetic routes."""
import json
import os

import pytest

from experiments.touchdown_nav import train
from experiments.touchdown_nav.configs import default
from tests.helpers import Crash, crash_at, override


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("tfds"))


def tiny_config(tfds_dir, **overrides):
    c = default.get_config()
    c.model.text_hidden = 32
    c.model.hidden = 32
    c.model.conv_features = 16
    c.batch_size = 16
    c.num_steps = 24
    c.eval_every = 8
    c.log_every = 4
    c.patience = 100
    c.data.tfds_dir = tfds_dir
    c.data.eval_splits = "test"
    c.eval.baselines = "random"
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
        assert json.load(f)["test"]["ga"] == res["test"]["ga"]
    assert res["test"]["episodes"] == 200
    for agent in ("ga", "random"):
        m = res["test"][agent]
        assert 0 <= m["sed"] <= m["tc"] <= 1 and m["spd"] >= 0
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        dev = [json.loads(line) for line in f if "dev/spd" in line]
    assert [d["step"] for d in dev] == [8, 16, 24]


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_result(uninterrupted, tfds_dir, tmp_path):
    _, expected = uninterrupted
    workdir = str(tmp_path)
    with pytest.raises(Crash):
        train.train_and_evaluate(tiny_config(tfds_dir), workdir, hooks=[crash_at(13)])
    assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["8"]
    resumed = train.train_and_evaluate(tiny_config(tfds_dir), workdir)
    assert resumed["test"] == expected["test"]
    assert resumed["best_step"] == expected["best_step"]


@pytest.mark.slow
def test_resuming_with_another_model_is_refused(uninterrupted, tfds_dir):
    workdir, _ = uninterrupted
    with pytest.raises(ValueError, match=r"another config \(model.kind: 'ga' -> 'rconcat'\)"):
        train.train_and_evaluate(tiny_config(tfds_dir, model__kind="rconcat"), workdir)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ga", "rconcat"])
def test_trained_agents_beat_random_on_held_out_routes(kind, tfds_dir, tmp_path):
    c = tiny_config(tfds_dir, model__kind=kind, num_steps=150, eval_every=50,
                    model__text_hidden=64, model__hidden=64, learning_rate=3e-3)
    res = train.train_and_evaluate(c, str(tmp_path))
    assert res["test"][kind]["tc"] > res["test"]["random"]["tc"] + 0.05
