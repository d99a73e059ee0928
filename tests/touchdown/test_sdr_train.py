"""Touchdown SDR trainer beyond the shared contract (`tests/experiments`): it trains over 8 fake
devices (the shared data-parallel step), what its results hold, and the tune split."""
import json
import os

import jax
import numpy as np

from experiments.touchdown_sdr import train
from tests.experiments.contract import TrainerContract


class TestTrainer(TrainerContract):
    name = "touchdown_sdr"

    def test_trains_on_8_devices_and_reports_every_model_and_baseline(self, trained):
        assert jax.device_count() == 8
        workdir, res = trained(self.name)
        for name in ("lingunet", "random", "center", "average"):
            m = res["test"][name]
            assert 0 <= m["acc@40"] <= m["acc@80"] <= m["acc@120"] <= 1
            assert 0 <= m["consistency"] <= 1 and m["distance"] > 0
        with open(os.path.join(workdir, "metrics.jsonl")) as f:
            losses = [json.loads(line)["train/loss"] for line in f]
        assert np.isfinite(losses).all()


def test_tune_split_holds_out_whole_descriptions():
    split = {"route_id": np.repeat(np.arange(50), 2), "center": np.zeros((100, 2)),
             "text": [str(i) for i in range(100)]}
    rest, tune = train.split_tune(split, 0.1, seed=0)
    assert len(np.unique(tune["route_id"])) == 5 and len(tune["text"]) == 10
    assert not set(tune["route_id"]) & set(rest["route_id"])
