"""Stable interfaces (issue 53): a renamed config key, or a renamed metric as a config value, is
accepted for one version with a warning naming the new one (a removed key is still refused), and
a renamed result key stays readable (`provenance.read_results`, the sweep's table)."""
import importlib
import json
import os
import subprocess
import sys
import warnings

import ml_collections
import pytest

import ttw_jax
from experiments import sweep
from tests.conftest import ROOT
from ttw_jax.core.train import provenance
from ttw_jax.core.train.launch import (config_keys, renamed_config_args, renamed_flag_errors,
                                       unknown_config_keys)

EXPERIMENTS = ("arramon", "rxr", "touchdown_nav", "touchdown_sdr", "ttw_emergent",
               "ttw_landmarks")


def default(name):
    return importlib.import_module(f"experiments.{name}.configs.default")


def renamed(name, argv, version=None):
    d = default(name)
    return renamed_config_args(["main", *argv], d.RENAMED, d.get_config(), d.RENAMED_IN, version)


def accepted(old, new):
    return (f"--config.{old}: renamed to {new} in ttw_jax 0.1.0; the old name is accepted until "
            "the next version")


def test_an_old_key_is_rewritten_with_a_warning_naming_the_new_one():
    argv, warned, errors = renamed("touchdown_sdr", ["--workdir=/tmp/x",
                                                     "--config.learning_rate=0.5",
                                                     "--config.seed=3"])
    assert argv == ["main", "--workdir=/tmp/x", "--config.optim.learning_rate=0.5",
                    "--config.seed=3"]
    assert warned == [accepted("learning_rate", "optim.learning_rate")] and errors == []
    # A renamed section renames the keys below it; the space-separated form keeps its value.
    config = ml_collections.ConfigDict({"objective": {"gamma": 1.0}})
    assert renamed_config_args(["main", "--config.loss.gamma", "2"], {"loss": "objective"},
                               config, "0.1.0", "0.1.0") == (
        ["main", "--config.objective.gamma", "2"], [accepted("loss", "objective")], [])


def test_removed_and_changed_keys_are_still_refused():
    argv = ["--config.data.image_width=800", "--config.learning_rate=0.5"]
    new, _, errors = renamed("touchdown_sdr", argv)
    assert errors == ["--config.data.image_width: data.image_width is now removed: SDR distances "
                      "are measured at the official evaluation's scale (3,680 x 800 px, "
                      "ttw_jax.touchdown.sdr.metrics)"]
    assert new[1] == argv[0]
    # A replacement that is not a key (a changed meaning) cannot be mapped: refused.
    assert renamed("ttw_emergent", ["--config.masc=False"])[2] == [
        "--config.masc: masc is now model.name (masc | no_masc)"]
    assert renamed("ttw_landmarks", ["--config.num_steps=30"])[2] == [
        "--config.num_steps: num_steps is now num_epochs (epochs, not steps)"]
    # A key of the default config that the selected config lacks is refused too.
    assert renamed_config_args(["main", "--config.learning_rate=1"],
                               {"learning_rate": "optim.learning_rate"},
                               ml_collections.ConfigDict({"seed": 0}), "0.1.0", "0.1.0")[2] == [
        "--config.learning_rate: learning_rate is now optim.learning_rate"]


def test_a_rename_is_accepted_for_one_version_only():
    assert renamed("touchdown_nav", ["--config.model.kind=ga"], version="0.1.3")[2] == []
    assert renamed("touchdown_nav", ["--config.model.kind=ga"], version="0.2.0")[2] == [
        "--config.model.kind: model.kind is now model.name"]


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_renamed_key_is_accepted_or_refused_by_its_launcher(name):
    d = default(name)
    config, keys = d.get_config(), set(config_keys(d.get_config()))
    assert d.RENAMED_IN == ttw_jax.__version__
    for old, new in d.RENAMED.items():
        argv, warned, errors = renamed(name, [f"--config.{old}=1"])
        if new in keys:
            assert argv[1] == f"--config.{new}=1" and warned == [accepted(old, new)]
            assert not errors and not unknown_config_keys(argv, config)
        else:
            assert argv[1] == f"--config.{old}=1" and not warned
            assert errors == renamed_flag_errors(["main", f"--config.{old}=1"], d.RENAMED)


def test_a_renamed_metric_value_is_rewritten_with_a_warning():
    argv, warned, errors = renamed("touchdown_sdr", ["--config.eval.metric=acc@80"])
    assert argv == ["main", "--config.eval.metric=acc_80"] and errors == []
    assert warned == [accepted("eval.metric=acc@80", "acc_80")]
    # Any launcher, any metric key (the full task's SDR stage); other values are left alone.
    full = importlib.import_module("experiments.touchdown_full.configs.default").get_config()
    assert renamed_config_args(["main", "--config.sdr.eval.metric=consistency@40",
                                "--config.sdr.eval.baselines=acc@40"], {}, full, None)[0] == [
        "main", "--config.sdr.eval.metric=consistency_40", "--config.sdr.eval.baselines=acc@40"]


def test_the_launcher_runs_an_old_key_and_an_old_metric_under_their_new_names(tmp_path):
    """Past flag parsing: the baselines mode records the config, then stops at the empty
    record folder."""
    (tmp_path / "records").mkdir()
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-m", "experiments.touchdown_sdr.main",
                          f"--workdir={tmp_path / 'run'}", "--config.learning_rate=0.25",
                          "--config.eval.metric=acc@40", "--config.mode=baselines",
                          f"--config.data.manual_dir={tmp_path / 'records'}"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert accepted("learning_rate", "optim.learning_rate") in out.stderr.splitlines()
    assert accepted("eval.metric=acc@40", "acc_40") in out.stderr.splitlines()
    assert "No Touchdown record files" in out.stderr and out.returncode == 1
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["optim"]["learning_rate"] == 0.25 and config["eval"]["metric"] == "acc_40"


OLD = {"config": {"seed": 0}, "model": "lingunet",
       "dev": {"examples": 10, "lingunet": {"acc@40": 0.25, "acc@80": 0.5, "dist": 100.0}}}


def test_read_results_upgrades_a_schema_1_file_and_reads_the_old_key(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(OLD))
    with pytest.warns(DeprecationWarning, match="'acc@40' is now 'acc_40'"):
        res = provenance.read_results(path)
    dev = res["dev"]["lingunet"]
    assert dict(dev) == {"acc_40": 0.25, "acc_80": 0.5, "dist": 100.0}
    with pytest.warns(DeprecationWarning, match="'acc@40' is now 'acc_40'"):
        assert dev["acc@40"] == 0.25
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dev["acc_40"] == 0.25


def test_a_sweep_over_results_written_before_the_rename_builds_its_table(tmp_path):
    """Seed 0 written before the rename (schema 1, `acc@40`, selected by `eval.metric=acc@80`),
    seed 1 now (schema 2 with its provenance): one table of the new names, no provenance."""
    config = default("touchdown_sdr").get_config()
    old = json.loads(json.dumps({**OLD, "config": config.to_dict()}))
    old["config"]["eval"]["metric"] = "acc@80"
    new = provenance.finalize(
        {**OLD, "config": {**config.to_dict(), "seed": 1},
         "dev": {"examples": 10, "lingunet": {"acc_40": 0.75, "acc_80": 1.0, "dist": 50.0}}},
        provenance.provenance(config, data=provenance.synthetic_data(1)))
    for seed, res in enumerate((old, new)):
        (tmp_path / f"s{seed}").mkdir()
        (tmp_path / f"s{seed}" / "results.json").write_text(json.dumps(res))

    def train(config, workdir):
        raise AssertionError("finished runs are read back")

    with pytest.warns(DeprecationWarning):
        summary = sweep.run_seeds(train, config, tmp_path, [0, 1], "touchdown_sdr")
    assert summary == {"dev/examples": (10.0, 0.0), "dev/lingunet/acc_40": (0.5, 0.25),
                       "dev/lingunet/acc_80": (0.75, 0.25), "dev/lingunet/dist": (75.0, 25.0)}
    written = json.loads((tmp_path / "sweep.json").read_text())
    assert written["schema_version"] == provenance.SCHEMA_VERSION
    assert set(written) == {"schema_version", "experiment", "seeds", "parallel", "summary",
                            "provenance"}
    assert written["provenance"] is None       # one run predates the provenance block
    assert "| result | examples | acc_40 | acc_80 | dist |" in (tmp_path / "sweep.md").read_text()
