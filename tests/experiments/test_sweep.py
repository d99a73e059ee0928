"""`python -m experiments.sweep`: any experiment over seeds, mean +- std of every number its
results report (worked example), resumable; run end to end on the landmark classifier."""
import json

import ml_collections
import numpy as np
import pytest

from experiments import sweep


def test_seeds_numbers_and_the_table_by_hand():
    assert sweep.seed_list("3") == [0, 1, 2] and sweep.seed_list("0,4") == [0, 4]
    with pytest.raises(ValueError):
        sweep.seed_list("0")
    runs = [{"config": {"seed": 0}, "best_step": 10, "test": {"ga": {"tc": 0.5, "spd": 2.0,
                                                                     "predictions": "p"}}},
            {"config": {"seed": 1}, "best_step": 30, "test": {"ga": {"tc": 0.7, "spd": 4.0,
                                                                     "predictions": "p"}}}]
    s = sweep.summarize(runs)
    assert s == {"best_step": (20.0, 10.0), "test/ga/tc": (pytest.approx(0.6), pytest.approx(0.1)),
                 "test/ga/spd": (3.0, 1.0)}
    table = sweep.to_markdown(s, "t").splitlines()
    assert table[2] == "| result | best_step | tc | spd |"
    assert table[4] == "| (run) | 20 +- 10 |  |  |"
    assert table[5] == "| test/ga |  | 0.6 +- 0.1 | 3 +- 1 |"


def test_a_finished_run_whose_config_holds_a_tuple_is_read_back(tmp_path):
    c = ml_collections.ConfigDict({"seed": 0, "data": {"partition": (0.7, 0.1)}})
    runs = []

    def train_and_evaluate(config, workdir):
        runs.append(config.seed)
        workdir.mkdir(parents=True)
        res = {"config": config.to_dict(), "score": 0.5}
        (workdir / "results.json").write_text(json.dumps(res))
        return res
    first = sweep.train_or_read(train_and_evaluate, c, tmp_path / "s0")
    again = sweep.train_or_read(train_and_evaluate, c, tmp_path / "s0")
    assert runs == [0] and again["score"] == first["score"]
    c.data.partition = (0.8, 0.1)
    with pytest.raises(ValueError, match="holds a finished run of another config"):
        sweep.train_or_read(train_and_evaluate, c, tmp_path / "s0")


@pytest.mark.slow
def test_a_sweep_of_the_landmark_classifier_resumes(tmp_path):
    from experiments.ttw_landmarks import train
    from experiments.ttw_landmarks.configs import default
    c = default.get_config()
    c.num_epochs = 3
    s = sweep.run_seeds(train.train_and_evaluate, c, tmp_path, [0, 1], "ttw_landmarks")
    per = [json.loads((tmp_path / f"s{i}" / "results.json").read_text()) for i in (0, 1)]
    key = "valid/model/weighted_f1"
    vals = [sweep.numbers(r)[key] for r in per]
    assert s[key] == (pytest.approx(np.mean(vals)), pytest.approx(np.std(vals)))
    assert (tmp_path / "sweep.md").read_text().startswith("[SYNTHETIC DATA, SYNTHETIC ")
    written = json.loads((tmp_path / "sweep.json").read_text())
    assert written["provenance"] == dict(per[0]["provenance"], seeds=2)
    # a rerun reads the finished runs back; another config in the same folder is refused
    assert sweep.run_seeds(train.train_and_evaluate, c, tmp_path, [0, 1], "ttw_landmarks") == s
    c.num_epochs = 4
    with pytest.raises(ValueError, match="holds a finished run of another config"):
        sweep.run_seeds(train.train_and_evaluate, c, tmp_path, [0], "ttw_landmarks")
