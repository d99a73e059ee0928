"""ArraMon trainer beyond the shared contract (`tests/experiments`): what its results hold, its
predictions files scored back, the baselines mode, the real-data partition, the whole
instructions of every real-data config, and the paper row of the evaluated split. (Learning:
`tests/arramon/test_model.py` overfits through the simulator, `tests/arramon/test_features.py`
trains V/O on recorded views to imitate far above chance.)"""
import importlib
import json
import os

import pytest

from experiments.arramon import score, train
from tests.conftest import shared_path
from tests.experiments.contract import TrainerContract
from tests.experiments.trainers import TRAINERS
from ttw_jax.arramon import (episodes as ae, evaluation as arr_eval, records as ar,
                             training_data)
from ttw_jax.core.vocab import Vocabulary, token_limit, tokenize
from ttw_jax.arramon.predictions import (instance_keys, object_names, read_predictions,
                                         score_predictions)

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

    def test_predictions_file_scores_back_to_the_results(self, trained):
        workdir, res = trained(self.name)
        path = os.path.join(workdir, "predictions_val_unseen.json")
        preds = read_predictions(path)
        records = score.split_records(workdir=workdir, split="val_unseen")
        assert len(preds) == len(records) == 200
        first = preds[instance_keys(records)[0]]["turns"][0]
        assert first["picked_object"] in (None, *object_names(records[0]))
        for rule in ("distance", "strict"):
            again = score_predictions(preds, records, rule)
            for k in arr_eval.METRICS:
                for suffix in ("", "_0", "_1"):
                    name = (f"{k}_{rule}" if k in arr_eval.RULE_METRICS else k) + suffix
                    assert again[k + suffix] == pytest.approx(res["val_unseen"]["vl"][name],
                                                              abs=1e-5), (rule, name)
        # A damaged file is named with its instance and field.
        key = next(iter(preds))
        preds[key]["turns"][1]["placement"] = [1, 2]
        bad = os.path.join(workdir, "bad_predictions.json")
        with open(bad, "w") as f:
            json.dump(preds, f)
        with pytest.raises(ValueError, match=f"bad_predictions.json: instance '{key}': field "
                                             r"'turns\[1\].placement'"):
            read_predictions(bad)

    def test_baselines_mode_runs_the_random_walk_and_the_shortest_path(self, tfds_dir, tmp_path):
        c = ARRAMON.config(tfds_dir, mode="baselines", eval__baselines="random,shortest_path",
                           eval__baseline_seeds=2, eval__horizon=40)   # the gold takes <= 33
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
    parts = training_data.partition(records, (0.7, 0.1))
    sizes = {k: len(v) for k, v in parts.items()}
    assert sum(sizes.values()) == 2000
    assert 1240 < sizes["partition_train"] < 1560 and 120 < sizes["partition_dev"] < 280
    for k, part in parts.items():
        maps = [r["mapId"] for r in part]
        assert all(maps.count(m) == 2 for m in maps), k
    again = training_data.partition(list(reversed(records)), (0.7, 0.1))
    for k in parts:
        assert sorted(r["n"] for r in again[k]) == sorted(r["n"] for r in parts[k])


def test_student_forcing_outside_zero_to_one_is_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match=r"student_forcing must be in \[0, 1\], got 1.5"):
        train.train_and_evaluate(ARRAMON.config(str(tmp_path), student_forcing=1.5),
                                 str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def _val_seen():
    return ar.read_arramon(shared_path("arramon", "val_seen.json"))


@pytest.mark.parametrize("name", ["default", "real_val_seen", "baselines", "paper", "official"])
def test_no_real_data_config_cuts_an_instruction_of_val_seen(name):
    c = importlib.import_module(f"experiments.arramon.configs.{name}").get_config()
    records = _val_seen()
    texts = [t for r in records for k in ("navi_inst_gt", "assem_inst_gt")
             for t in r["instructions"][k]]
    longest = max(len(tokenize(t)) for t in texts)
    assert longest == 108
    assert token_limit(c.data.max_tokens, texts) >= longest
    c.data.tfds_config = "english"
    assert training_data.truncation(c) in ("error", "ignore")   # never cut silently on real data


def test_a_limit_that_would_cut_real_instructions_is_refused_naming_the_longest():
    records = _val_seen()[:200]
    vocab = Vocabulary.build(t for r in records for t in r["instructions"]["navi_inst_gt"])
    with pytest.raises(ValueError, match=r"navi instructions \(data.max_tokens\) have more than "
                                         r"20 tokens \(longest \d+\) and would be cut"):
        ae.episodes(records, vocab, 20, truncate="error")


def test_the_printed_paper_row_follows_the_evaluated_split():
    names = arr_eval.METRICS
    m = {k: 0.5 for k in names} | {f"{k}_{r}": 0.5 for k in arr_eval.RULE_METRICS
                                   for r in ("distance", "strict")}
    m |= {f"{k}_{t}": 0.5 for k in names for t in range(2)}

    def printed(tfds_config, split, agent="vl", mode="train"):
        c = TRAINERS["arramon"].default.get_config()
        c.data.tfds_config, c.mode = tfds_config, mode
        res = {"config": c.to_dict(), "agent": agent,
               split: {"episodes": 3, agent: m, "random": m}}
        if mode == "train":
            res.update(best_step=1, num_params={"total": 2, "navi": 1, "assem": 1})
        return [line for line in train.format_results(res).splitlines()
                if line.startswith("paper")]

    rows = printed("english", "val_unseen")
    assert [r.split(" (")[0] for r in rows] == ["paper val_unseen V/L", "paper val_unseen R/W"]
    assert rows[0].split()[-7:] == ["0.1090", "0.0000", "0.0620", "0.1080", "0.1530", "0.0360",
                                    "0.0280"]
    assert rows[1].split()[-7:] == ["0.0450", "0.0000", "0.0240", "0.0430", "0.0750", "0.0050",
                                    "0.0010"]
    assert printed("english", "val_seen")[0].split()[-7] == "0.1350"
    assert [r.split(" (")[0] for r in printed("english", "test_unseen")] == [
        "paper test_unseen V/L"]                      # Table 3: V/L only
    assert printed("english", "partition_test") == []   # the paper has no such split
    assert printed("hindi", "val_seen") == [] and printed("synthetic", "val_seen") == []
