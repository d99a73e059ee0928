"""ArraMon trainer beyond the shared contract (`tests/experiments`): what its results hold, the
real-data partition, and that the trained V/L agent beats the random walk on held-out synthetic
instances."""
import pytest

from experiments.arramon import train
from tests.conftest import xla_optimizations
from tests.experiments.contract import TrainerContract
from tests.experiments.trainers import TRAINERS
from ttw_jax.arramon import evaluation as arr_eval

ARRAMON = TRAINERS["arramon"]


class TestTrainer(TrainerContract):
    name = "arramon"

    def test_results_hold_ordered_metrics_for_agent_and_random_walk(self, trained):
        workdir, res = trained(self.name)
        assert res["val_unseen"]["episodes"] == 200
        for agent in ("vl", "random"):
            m = res["val_unseen"][agent]
            for rule in ("", "_distance", "_strict"):
                assert 0 <= m[f"ctc0{rule}"] <= 1
                assert m[f"ctc3{rule}"] <= m[f"ctc5{rule}"] <= m[f"ctc7{rule}"] <= 1
                assert 0 <= m[f"ptc{rule}"] <= m[f"rpod{rule}"] <= 1
                assert m[f"ptc{rule}"] <= max(m[f"ctc3{rule}"], m[f"ctc0{rule}"])
            # The default rule is the paper's; the strict one only ever takes CTC-k away.
            assert all(m[k] == m[f"{k}_distance"] >= m[f"{k}_strict"]
                       for k in ("ctc3", "ctc5", "ctc7"))
            assert 0 < m["navi_ndtw"] <= 1
            for k in ("navi_ndtw", "ctc3", "ptc"):        # overall = mean of the two turns
                assert m[k] == pytest.approx((m[f"{k}_0"] + m[f"{k}_1"]) / 2)
        p = res["num_params"]
        assert p["total"] == p["navi"] + p["assem"] and p["navi"] == p["assem"] > 0

    def test_trained_agent_beats_the_random_walk(self, tfds_dir, tmp_path):
        # The contract's config trained longer: after the contract's run (this class runs on one
        # worker, in order) its programs come from the compilation cache.
        c = ARRAMON.config(tfds_dir, num_steps=80, eval_every=80,
                           eval__perfect_navigation=True, eval__num_figures=0)
        with xla_optimizations(ARRAMON.xla_optimized):
            res = train.train_and_evaluate(c, str(tmp_path))
        ours, rnd = res["val_unseen"]["vl"], res["val_unseen"]["random"]
        assert ours["navi_ndtw"] > rnd["navi_ndtw"] + 0.05
        assert ours["ctc3"] > rnd["ctc3"] + 0.03
        # Table 6: after the ground truth's navigation, the same agent assembles better.
        perfect = res["val_unseen"]["vl_perfect_navigation"]
        assert perfect["ctc0"] == perfect["ctc3"] == 1.0
        assert perfect["navi_ndtw"] == pytest.approx(1.0, abs=1e-5)
        assert perfect["rpod"] > ours["rpod"] and perfect["ptc"] >= ours["ptc"]

    def test_baselines_mode_runs_the_random_walk_and_the_shortest_path(self, tfds_dir, tmp_path):
        c = ARRAMON.config(tfds_dir, mode="baselines", eval__baselines="random,shortest_path",
                           eval__baseline_seeds=2)   # horizon 40: the synthetic gold takes <= 33
        res = train.train_and_evaluate(c, str(tmp_path))
        assert "best_step" not in res and not (tmp_path / "checkpoints").exists()
        rnd, gold = res["val_unseen"]["random"], res["val_unseen"]["shortest_path"]
        assert "ctc3_std" in rnd and "ctc3_std" not in gold           # the replay draws nothing
        assert rnd["ctc3_strict"] <= rnd["ctc3"] == rnd["ctc3_distance"]
        # Replaying the ground truth is the paper's S/P row: every metric 1 under both rules.
        for k in arr_eval.METRICS + tuple(f"{m}_{r}" for m in arr_eval.RULE_METRICS
                                          for r in ("distance", "strict")):
            assert gold[k] == pytest.approx(1.0), k
        with pytest.raises(ValueError, match="baseline 'random_by_distance' was removed: every "
                                             "result now holds both CTC rules"):
            train.train_and_evaluate(ARRAMON.config(tfds_dir, mode="baselines",
                                                    eval__baselines="random_by_distance"),
                                     str(tmp_path / "old"))


def test_partition_is_stable_disjoint_and_keeps_a_map_together():
    records = [{"mapId": i // 2, "n": i} for i in range(2000)]   # two instances per map
    parts = train.partition(records, (0.7, 0.1))
    sizes = {k: len(v) for k, v in parts.items()}
    assert sum(sizes.values()) == 2000
    assert 1240 < sizes["partition_train"] < 1560 and 120 < sizes["partition_dev"] < 280
    for k, part in parts.items():
        maps = [r["mapId"] for r in part]
        assert all(maps.count(m) == 2 for m in maps), k
    again = train.partition(list(reversed(records)), (0.7, 0.1))
    for k in parts:
        assert sorted(r["n"] for r in again[k]) == sorted(r["n"] for r in parts[k])


def test_student_forcing_outside_zero_to_one_is_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match=r"student_forcing must be in \[0, 1\], got 1.5"):
        train.train_and_evaluate(ARRAMON.config(str(tmp_path), student_forcing=1.5),
                                 str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()
