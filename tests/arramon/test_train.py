"""ArraMon trainer beyond the shared contract (`tests/experiments`): what its results hold, the
real-data partition, and that the trained V/L agent beats the random walk on held-out synthetic
instances."""
import pytest

from experiments.arramon import train
from tests.experiments.contract import TrainerContract
from tests.experiments.trainers import TRAINERS

ARRAMON = TRAINERS["arramon"]


class TestTrainer(TrainerContract):
    name = "arramon"

    def test_results_hold_ordered_metrics_for_agent_and_random_walk(self, trained):
        _, res = trained(self.name)
        assert res["val_unseen"]["episodes"] == 200
        for agent in ("vl", "random"):
            m = res["val_unseen"][agent]
            assert 0 <= m["ctc7"] <= 1 and m["ctc0"] <= m["ctc3"] <= m["ctc5"] <= m["ctc7"]
            assert 0 <= m["ptc"] <= m["rpod"] <= 1 and 0 < m["navi_ndtw"] <= 1
            assert m["ptc"] <= m["ctc3"]


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
    c = ARRAMON.config(tfds_dir, num_steps=80, eval_every=80)   # the contract's programs
    res = train.train_and_evaluate(c, str(tmp_path))
    ours, rnd = res["val_unseen"]["vl"], res["val_unseen"]["random"]
    assert ours["navi_ndtw"] > rnd["navi_ndtw"] + 0.05
    assert ours["ctc3"] > rnd["ctc3"] + 0.03


@pytest.mark.slow
def test_baselines_mode_runs_the_random_walk_under_both_ctc_rules(tfds_dir, tmp_path):
    c = ARRAMON.config(tfds_dir, mode="baselines", eval__baselines="random,random_by_distance",
                       eval__baseline_seeds=2)
    res = train.train_and_evaluate(c, str(tmp_path))
    assert "best_step" not in res and not (tmp_path / "checkpoints").exists()
    strict, by_distance = res["val_unseen"]["random"], res["val_unseen"]["random_by_distance"]
    assert strict["navi_ndtw"] == by_distance["navi_ndtw"] and "ctc3_std" in strict
    assert strict["ctc3"] <= by_distance["ctc3"]   # the fallback rule only ever zeroes CTC-k
