"""End-to-end Touchdown SDR: train_and_evaluate on a tiny synthetic config over 8 fake devices
(the shared data-parallel step); crash and resume; outputs."""
import json
import os

import numpy as np
import pytest

from experiments.touchdown_sdr import train
from experiments.touchdown_sdr.configs import default
from tests.helpers import Crash, crash_at, override


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("tfds"))


def tiny_config(tfds_dir, **overrides):
    c = default.get_config()
    c.model.channels = 8
    c.model.mlp_hidden = 8
    c.model.embed_dim = 16
    c.model.hidden = 8
    c.batch_size = 16
    c.num_steps = 12
    c.eval_every = 4
    c.log_every = 4
    c.patience = 100
    c.data.tfds_dir = tfds_dir
    c.data.eval_splits = "test"
    c.num_heatmaps = 3
    return override(c, **overrides)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, tfds_dir):
    workdir = str(tmp_path_factory.mktemp("full"))
    return workdir, train.train_and_evaluate(tiny_config(tfds_dir), workdir)


@pytest.mark.slow
def test_runs_end_to_end_on_8_devices_and_writes_outputs(uninterrupted):
    import jax
    assert jax.device_count() == 8
    workdir, res = uninterrupted
    for name in ("results.json", "metrics.jsonl", "vocab.json", "heatmaps.png"):
        assert os.path.exists(os.path.join(workdir, name)), name
    with open(os.path.join(workdir, "results.json")) as f:
        assert json.load(f)["test"]["lingunet"] == res["test"]["lingunet"]
    for name in ("lingunet", "random", "center", "average"):
        m = res["test"][name]
        assert 0 <= m["acc@40"] <= m["acc@80"] <= m["acc@120"] <= 1
        assert 0 <= m["consistency"] <= 1 and m["distance"] > 0
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    assert [r["step"] for r in rows if "tune/acc@80" in r] == [4, 8, 12]
    losses = [r["train/loss"] for r in rows]
    assert np.isfinite(losses).all()


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_result(uninterrupted, tfds_dir, tmp_path):
    _, expected = uninterrupted
    workdir = str(tmp_path)
    with pytest.raises(Crash):
        train.train_and_evaluate(tiny_config(tfds_dir), workdir, hooks=[crash_at(6)])
    resumed = train.train_and_evaluate(tiny_config(tfds_dir), workdir)
    assert resumed["test"] == expected["test"] and resumed["best_step"] == expected["best_step"]


def test_tune_split_holds_out_whole_descriptions():
    split = {"route_id": np.repeat(np.arange(50), 2), "center": np.zeros((100, 2)),
             "text": [str(i) for i in range(100)]}
    rest, tune = train.split_tune(split, 0.1, seed=0)
    assert len(np.unique(tune["route_id"])) == 5 and len(tune["text"]) == 10
    assert not set(tune["route_id"]) & set(rest["route_id"])
