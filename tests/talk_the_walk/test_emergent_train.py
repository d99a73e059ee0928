"""Talk The Walk emergent-communication trainer beyond the shared contract (`tests/experiments`):
what its results hold, the discrete no-MASC variant, and settings refused with their names."""
import os

import numpy as np
import pytest

from tests.conftest import xla_optimizations
from tests.experiments.contract import TrainerContract
from tests.experiments.trainers import TRAINERS

EMERGENT = TRAINERS["ttw_emergent"]


class TestTrainer(TrainerContract):
    name = "ttw_emergent"

    def test_results_lie_between_chance_and_the_upper_bound(self, trained):
        workdir, res = trained(self.name)
        assert os.listdir(os.path.join(workdir, "tensorboard"))
        for split in ("train", "valid", "test"):
            assert 1 / 16 < res[split]["accuracy"] <= 1.0
            assert res[split]["accuracy"] <= res[split]["upper_bound"] + 1e-9
        assert res["test"]["examples"] == 160 * 4
        assert 0.0 <= res["test"]["full_task"]["success_rate"] <= 1.0


@pytest.mark.slow
def test_discrete_no_masc_config_trains(tmp_path):
    c = EMERGENT.config("", model__comm="discrete", model__name="no_masc", num_steps=10)
    with xla_optimizations(False):      # ten steps: compilation dominates
        res = EMERGENT.train.train_and_evaluate(c, str(tmp_path))
    assert np.isfinite(res["valid"]["accuracy"])
    assert not os.path.exists(os.path.join(str(tmp_path), "masc_masks.png"))


@pytest.mark.parametrize("override, field", [({"model__comm": "telepathy"}, "model.comm"),
                                             ({"optim__schedule": "step"}, "optim.schedule")])
def test_bad_config_values_are_rejected(tmp_path, override, field):
    with pytest.raises(ValueError, match=field):
        EMERGENT.train.train_and_evaluate(EMERGENT.config("", **override), str(tmp_path))
