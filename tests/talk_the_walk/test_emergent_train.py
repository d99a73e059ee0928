"""End-to-end: the launcher's train_and_evaluate on a tiny synthetic config; crash and resume."""
import json
import os

import numpy as np
import pytest

from experiments.ttw_emergent import train
from experiments.ttw_emergent.configs import default
from tests.helpers import Crash, crash_at


def tiny_config(**overrides):
    c = default.get_config()
    c.T = 1
    c.features = 16
    c.batch_size = 16
    c.num_steps = 30
    c.eval_every = 10
    c.log_every = 5
    c.patience = 100
    c.full_task.repeats = 1
    c.full_task.max_steps = 30
    c.eval.chunk_size = 4096
    for k, v in overrides.items():
        setattr(c, k, v)
    return c


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("full"))
    return workdir, train.train_and_evaluate(tiny_config(), workdir)


@pytest.mark.slow
def test_runs_end_to_end_and_writes_outputs(uninterrupted):
    workdir, res = uninterrupted
    for name in ("results.json", "metrics.jsonl", "learning_curve.png", "masc_masks.png"):
        assert os.path.exists(os.path.join(workdir, name)), name
    assert os.listdir(os.path.join(workdir, "tensorboard"))
    with open(os.path.join(workdir, "results.json")) as f:
        assert json.load(f)["test"]["accuracy"] == res["test"]["accuracy"]
    for split in ("train", "valid", "test"):
        assert 1 / 16 < res[split]["accuracy"] <= 1.0
        assert res[split]["accuracy"] <= res[split]["upper_bound"] + 1e-9
    assert res["test"]["examples"] == 160 * 4
    assert 0.0 <= res["test"]["full_task"]["success_rate"] <= 1.0


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_result(uninterrupted, tmp_path):
    _, expected = uninterrupted
    workdir = str(tmp_path)
    with pytest.raises(Crash):
        train.train_and_evaluate(tiny_config(), workdir, hooks=[crash_at(17)])
    # Checkpoints exist for steps 10 (and not 17); the rerun resumes from step 10.
    assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["10"]
    resumed = train.train_and_evaluate(tiny_config(), workdir)
    for split in ("train", "valid", "test"):
        assert resumed[split]["accuracy"] == expected[split]["accuracy"]
        assert resumed[split].get("full_task") == expected[split].get("full_task")
    assert resumed["best_step"] == expected["best_step"]
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        steps = [json.loads(line)["step"] for line in f]
    assert steps == sorted(steps) and len(steps) == len(set(steps))


@pytest.mark.slow
@pytest.mark.parametrize("override, change", [({"features": 32}, "features: 16 -> 32"),
                                              ({"num_steps": 40}, "num_steps: 30 -> 40")])
def test_resuming_with_another_config_is_refused(uninterrupted, override, change):
    workdir, _ = uninterrupted
    with pytest.raises(ValueError, match=rf"another config \({change}\)"):
        train.train_and_evaluate(tiny_config(**override), workdir)


@pytest.mark.slow
def test_discrete_no_masc_config_trains(tmp_path):
    res = train.train_and_evaluate(tiny_config(comm="discrete", masc=False, num_steps=10), str(tmp_path))
    assert np.isfinite(res["valid"]["accuracy"])
    assert not os.path.exists(os.path.join(str(tmp_path), "masc_masks.png"))


@pytest.mark.parametrize("override, field", [({"comm": "telepathy"}, "config.comm"),
                                             ({"lr_schedule": "step"}, "config.lr_schedule")])
def test_bad_config_values_are_rejected(tmp_path, override, field):
    with pytest.raises(ValueError, match=field):
        train.train_and_evaluate(tiny_config(**override), str(tmp_path))
