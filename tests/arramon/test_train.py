"""End-to-end ArraMon: train_and_evaluate on a tiny synthetic config; crash and resume; the
trained V/L agent beats the random walk on held-out synthetic instances; the real-data
partition."""
import json
import os

import pytest

from experiments.arramon import train
from experiments.arramon.configs import default
from tests.helpers import Crash, crash_at, override


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("tfds"))


def tiny_config(tfds_dir, **overrides):
    c = default.get_config()
    c.model.embed_dim = 16
    c.model.action_dim = 8
    c.model.hidden = 16
    c.batch_size = 16
    c.num_steps = 12
    c.eval_every = 4
    c.log_every = 4
    c.patience = 100
    c.horizon = 40
    c.data.tfds_dir = tfds_dir
    c.data.dev_split = "val_unseen"
    c.data.eval_splits = "val_unseen"
    c.eval.batch_size = 200
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
        assert json.load(f)["val_unseen"]["vl"] == res["val_unseen"]["vl"]
    assert res["val_unseen"]["episodes"] == 200
    for agent in ("vl", "random"):
        m = res["val_unseen"][agent]
        assert 0 <= m["ctc7"] <= 1 and m["ctc0"] <= m["ctc3"] <= m["ctc5"] <= m["ctc7"]
        assert 0 <= m["ptc"] <= m["rpod"] <= 1 and 0 < m["navi_ndtw"] <= 1
        assert m["ptc"] <= m["ctc3"]
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        dev = [json.loads(line) for line in f if "dev/ctc3" in line]
    assert [d["step"] for d in dev] == [4, 8, 12]


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_result(uninterrupted, tfds_dir, tmp_path):
    _, expected = uninterrupted
    workdir = str(tmp_path)
    with pytest.raises(Crash):
        train.train_and_evaluate(tiny_config(tfds_dir), workdir, hooks=[crash_at(7)])
    assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["4"]
    resumed = train.train_and_evaluate(tiny_config(tfds_dir), workdir)
    assert resumed["val_unseen"] == expected["val_unseen"]
    assert resumed["best_step"] == expected["best_step"]


@pytest.mark.slow
def test_resuming_with_another_model_is_refused(uninterrupted, tfds_dir):
    workdir, _ = uninterrupted
    with pytest.raises(ValueError, match=r"another config \(model.kind: 'vl' -> 'lo'\)"):
        train.train_and_evaluate(tiny_config(tfds_dir, model__kind="lo"), workdir)


def test_bad_metric_is_refused(tfds_dir, tmp_path):
    with pytest.raises(ValueError, match="config.metric must be one of"):
        train.train_and_evaluate(tiny_config(tfds_dir, metric="spl"), str(tmp_path))


def test_partition_is_stable_and_disjoint():
    records = [{"code": f"C{i:04d}"} for i in range(1000)]
    parts = train.partition(records, (0.7, 0.1))
    sizes = {k: len(v) for k, v in parts.items()}
    assert sum(sizes.values()) == 1000
    assert 620 < sizes["partition_train"] < 780 and 60 < sizes["partition_dev"] < 140
    again = train.partition(list(reversed(records)), (0.7, 0.1))
    for k in parts:
        assert sorted(r["code"] for r in again[k]) == sorted(r["code"] for r in parts[k])


@pytest.mark.slow
def test_trained_agent_beats_the_random_walk(tfds_dir, tmp_path):
    c = tiny_config(tfds_dir, num_steps=120, eval_every=120, model__embed_dim=32,
                    model__hidden=64, model__action_dim=16, learning_rate=3e-3)
    res = train.train_and_evaluate(c, str(tmp_path))
    ours, rnd = res["val_unseen"]["vl"], res["val_unseen"]["random"]
    assert ours["navi_ndtw"] > rnd["navi_ndtw"] + 0.05
    assert ours["ctc3"] > rnd["ctc3"] + 0.03
