"""The seed-sweep launcher and the bounds table of Talk The Walk localization."""
import json
import os

import numpy as np
import pytest

from experiments.ttw_emergent import bounds, sweep
from experiments.ttw_emergent.configs import default
from tests.conftest import xla_optimizations
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.upper_bound import bayes_rate


def fake_result(config, acc, sampled=None, success=0.5, full_task_splits=("test",)):
    res = {"config": config.to_dict(), "best_step": 10, "last_step": 20}
    for split in maps.SPLITS:
        res[split] = {"accuracy": acc, "upper_bound": 0.9 + config.T / 100,
                      "upper_bound_no_actions": 0.5}
        if sampled is not None:
            res[split].update(accuracy_greedy_messages=acc, accuracy_sampled_messages=sampled)
    for split in full_task_splits:
        res[split]["full_task"] = {"success_rate": success, "mean_steps_ended": 30.0 + config.T}
    return res


def test_sweep_reads_finished_runs_and_tabulates_mean_and_std(tmp_path):
    base = default.get_config()
    accs = {("masc", "continuous"): [0.5, 0.7], ("masc", "discrete"): [0.4, 0.6]}
    for (model, comm), values in accs.items():
        for seed, acc in enumerate(values):
            c = sweep.run_config(base, model, comm, seed)
            rdir = tmp_path / f"{model}_{comm}_s{seed}"
            rdir.mkdir()
            sampled = acc - 0.1 if comm == "discrete" else None
            (rdir / "results.json").write_text(json.dumps(fake_result(c, acc, sampled, acc / 2)))
    summary = sweep.run_sweep(base, str(tmp_path), [0, 1], ["masc"], ["continuous", "discrete"])
    cont = summary["masc, continuous"]
    assert cont["test"] == pytest.approx((0.6, 0.1))        # mean, population std of 0.5, 0.7
    assert cont["test full task"] == pytest.approx((0.3, 0.05))
    disc = summary["masc, discrete"]
    assert disc["valid (sampled bits)"] == pytest.approx((0.4, 0.1))
    table = (tmp_path / "sweep.md").read_text()
    assert "| masc, continuous | 0.6000 +- 0.1000 |" in table
    assert "| masc, discrete, sampled bits | 0.4000 +- 0.1000 |" in table
    kept = json.loads((tmp_path / "sweep.json").read_text())
    assert kept["seeds"] == [0, 1]
    # what the README's table prints besides the means: best steps and bounds
    assert kept["best_steps"]["masc, discrete"] == [10, 10]
    assert kept["bounds"][str(base.T)]["test"] == {"upper_bound": 0.9 + base.T / 100,
                                                   "upper_bound_no_actions": 0.5}
    # Discrete runs take the discrete config's settings, and the seed is set.
    c = sweep.run_config(base, "no_masc", "discrete", 2)
    assert (c.model.comm, c.model.name, c.seed, c.model.tourist_gate_init) == \
        ("discrete", "no_masc", 2, "partition")


def test_table17_sweep_over_T_skips_masc_at_T0_and_reports_every_full_task(tmp_path):
    base = default.get_config()
    for T in (0, 1):
        for model in ("masc", "no_masc"):
            if T == 0 and model == "masc":
                continue
            c = sweep.run_config(base, model, "continuous", 0)
            c.T = T
            rdir = tmp_path / f"T{T}_{model}_continuous_s0"
            rdir.mkdir()
            (rdir / "results.json").write_text(json.dumps(
                fake_result(c, 0.3 + T / 10, success=0.4 + T / 10, full_task_splits=maps.SPLITS)))
    summary = sweep.run_sweep(base, str(tmp_path), [0], ["masc", "no_masc"], ["continuous"],
                              Ts=[0, 1])
    assert list(summary) == ["T=0, no_masc, continuous", "T=1, masc, continuous",
                             "T=1, no_masc, continuous"]
    row = summary["T=1, masc, continuous"]
    assert row["valid full task"] == pytest.approx((0.5, 0.0))
    assert row["train full-task steps"] == pytest.approx((31.0, 0.0))
    table = (tmp_path / "sweep.md").read_text()
    assert "| train full task | valid full task | test full task |" in table
    assert "| T=0, no_masc, continuous | 0.3000 +- 0.0000 |" in table
    assert "| T=1, Bayes upper bound, with actions | 0.9100 | 0.9100 | 0.9100 |" in table
    assert "| T=0, Bayes upper bound, with actions | 0.9000 |" in table


def test_sweep_refuses_a_finished_run_with_another_config(tmp_path):
    base = default.get_config()
    rdir = tmp_path / "masc_continuous_s0"
    rdir.mkdir()
    other = sweep.run_config(base, "masc", "continuous", 0)
    other.T = 2
    (rdir / "results.json").write_text(json.dumps(fake_result(other, 0.5)))
    with pytest.raises(ValueError, match="another config"):
        sweep.run_sweep(base, str(tmp_path), [0], ["masc"], ["continuous"])


@pytest.mark.slow
def test_sweep_trains_each_seed(tmp_path):
    from tests.experiments.trainers import TRAINERS
    c = TRAINERS["ttw_emergent"].config("", num_steps=10, eval_every=10, write_plots=False,
                                        full_task__splits="")
    with xla_optimizations(False):
        summary = sweep.run_sweep(c, str(tmp_path), [0, 1], ["masc"], ["continuous"])
    runs = [json.load(open(os.path.join(tmp_path, f"masc_continuous_s{s}", "results.json")))
            for s in (0, 1)]
    tests = [r["test"]["accuracy"] for r in runs]
    assert summary["masc, continuous"]["test"] == pytest.approx((np.mean(tests), np.std(tests)))
    assert tests[0] != tests[1]   # the seeds differ


def test_bounds_table_matches_bayes_rate():
    w = maps.load_windows(None)
    small = {s: maps.Windows(v.landmarks[:3], v.neighborhood[:3], v.origin[:3])
             for s, v in w.items()}
    rows = bounds.bounds_table(small, 1, ["final", "start"], ["agnostic", "aware"])
    assert len(rows) == 2 * 2 * 3   # T=0 once, T=1 with and without actions
    for r in rows:
        cond = r["actions"] is not False
        c, n = bayes_rate(small["valid"].landmarks, r["T"], cond, label=r["label"],
                          orientation_aware=r["tourist"] == "aware")
        assert r["valid"] == c / n
    assert "| start | aware | 1 | True |" in bounds.to_markdown(rows)
