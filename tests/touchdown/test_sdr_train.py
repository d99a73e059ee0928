"""Touchdown SDR trainer beyond the shared contract (`tests/experiments`): what its results
hold, the tune split, and the baselines mode on the real records."""
import json
import os

import numpy as np
import pytest

from experiments.touchdown_sdr import train
from experiments.touchdown_sdr.configs import default, paper
from tests.experiments.contract import TrainerContract
from tests.helpers import override
from ttw_jax.touchdown.sdr import training_data as sdr_data


class TestTrainer(TrainerContract):
    name = "touchdown_sdr"

    def test_reports_every_model_and_baseline(self, trained):
        workdir, res = trained(self.name)
        for name in ("lingunet", "random", "center", "average"):
            m = res["test"][name]
            assert 0 <= m["acc_40"] <= m["acc_80"] <= m["acc_120"] <= 1
            assert all(0 <= m[f"consistency_{t}"] <= m[f"acc_{t}"] <= 1 for t in (40, 80, 120))
            assert m["distance"] > 0
        with open(os.path.join(workdir, "metrics.jsonl")) as f:
            losses = [json.loads(line)["train/loss"] for line in f]
        assert np.isfinite(losses).all()

    def test_prediction_files_score_back_to_the_reported_metrics(self, trained):
        from tests.experiments.trainers import TRAINERS
        from ttw_jax.touchdown.sdr import predictions
        workdir, res = trained(self.name)
        data = train.load_data(TRAINERS[self.name].config(res["config"]["data"]["tfds_dir"]),
                               workdir)
        agent = res["test"]["lingunet"]
        preds = predictions.read_predictions(os.path.join(workdir, agent["predictions"]))
        test = data["splits"]["test"]
        assert len(preds) == res["test"]["examples"] == len(test["center"])
        scored = predictions.score_predictions(preds, test)
        for k in (*(f"acc_{t}" for t in (40, 80, 120)), "consistency_80", "distance"):
            assert scored[k] == pytest.approx(agent[k], abs=1e-6), k


def test_tune_split_holds_out_whole_descriptions():
    split = {"route_id": np.repeat(np.arange(50), 2), "center": np.zeros((100, 2)),
             "text": [str(i) for i in range(100)]}
    rest, tune = sdr_data.split_tune(split, 0.1, seed=0)
    assert len(np.unique(tune["route_id"])) == 5 and len(tune["text"]) == 10
    assert not set(tune["route_id"]) & set(rest["route_id"])


def test_the_paper_config_checks_early_stopping_once_per_epoch(tmp_path):
    """configs/paper.py (App. D.2: accuracy on the tune set "after each epoch", patience 4):
    `eval_every_epochs=1` evaluates every ceil(training views / batch_size) steps, the official
    loader's batches per epoch (a run on the release checks the steps:
    tests/touchdown/test_release_end_to_end.py); 0 keeps `eval_every`."""
    config = paper.get_config()
    assert config.eval_every_epochs == 1 and config.patience == 4 and config.batch_size == 10
    assert train.fit_config(config, 16_630).eval_every == 1_663
    assert train.fit_config(config, 20).eval_every == 2 and config.eval_every == 200  # kept
    assert train.fit_config(override(config, eval_every_epochs=3), 21).eval_every == 9
    assert train.fit_config(default.get_config(), 21).eval_every == 200
    for bad in (-1, True):
        with pytest.raises(ValueError, match="eval_every_epochs must be an integer >= 0"):
            train.train_and_evaluate(override(default.get_config(), eval_every_epochs=bad),
                                     str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_baselines_mode_scores_the_real_views_without_features(tmp_path):
    from tests.conftest import shared_path
    from tests.experiments.trainers import TRAINERS
    records = shared_path("touchdown", "touchdown_unseen_dev_sample.json")
    config = TRAINERS["touchdown_sdr"].default.get_config()
    config.mode, config.data.manual_dir = "baselines", os.path.dirname(records)
    config.data.eval_splits, config.eval.baseline_seeds = "dev_sample", 3
    res = train.train_and_evaluate(config, str(tmp_path))
    dev = res["dev_sample"]
    assert dev["examples"] == 2237 and dev["descriptions"] <= 800
    # The centre baseline by hand: every view's gold (x, y) against (0.5, 0.5) on 3,680 x 800 px.
    with open(records) as f:
        golds = [json.loads(json.loads(line)[f"{v}_static_center"]) for line in f if line.strip()
                 for v in ("main", "pre", "post")]
    golds = np.array([[g["x"], g["y"]] for g in golds if g != {"x": -1, "y": -1}])
    d = np.hypot((golds[:, 0] - 0.5) * 3680, (golds[:, 1] - 0.5) * 800)
    assert len(d) == 2237
    assert dev["center"]["distance"] == pytest.approx(d.mean())
    assert dev["center"]["acc_80"] == pytest.approx(np.mean(d < 80))
    assert dev["average"]["distance"] < dev["center"]["distance"] < dev["random"]["distance"]
    assert "acc_80_std" in dev["random"] and "acc_80_std" not in dev["center"]
    assert res["average_location"] == pytest.approx(train.OFFICIAL_TRAIN_MEAN)
    assert not (tmp_path / "checkpoints").exists()
