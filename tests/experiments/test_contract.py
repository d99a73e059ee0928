"""The contract every experiment trainer honours, on its tiny config (`trainers.py`): it runs end to
end and writes its outputs; a run killed mid-training resumes from its last checkpoint to the
same results; a workdir refuses another config; the config follows the one schema (`model.name`,
`optim`, `eval.metric` / `eval.mode`, `train_horizon` / `eval.horizon`) and the launcher names the
replacement of every renamed key."""
import json
import os

import pytest

from tests.experiments.trainers import TRAINERS, run_dir
from tests.helpers import Crash
from ttw_jax.core.train.launch import renamed_flag_errors

NAMES = sorted(TRAINERS)
# Under pytest-xdist every experiment's tests share one worker (and so its one trained run).
GROUPED = [pytest.param(n, marks=pytest.mark.xdist_group(n)) for n in NAMES]
OLD_KEYS = {"model.kind", "learning_rate", "grad_clip", "lr_schedule", "test_horizon", "metric",
            "horizon", "loss.horizon", "select_metric", "comm", "masc"}


def crash_after(calls: int):
    """A hook that raises `Crash` at its `calls`-th call (training steps of every stage)."""
    count = {"n": 0}

    def hook(step):
        count["n"] += 1
        if count["n"] == calls:
            raise Crash(step)
    return hook


@pytest.mark.slow
@pytest.mark.parametrize("name", GROUPED)
def test_runs_end_to_end_and_writes_outputs(trained, name):
    trainer = TRAINERS[name]
    workdir, results = trained(name)
    for output in trainer.outputs:
        assert os.path.exists(os.path.join(workdir, output)), output
    with open(os.path.join(workdir, "results.json")) as f:
        assert json.load(f) == json.loads(json.dumps(results))
    with open(os.path.join(workdir, trainer.eval_stage, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    evals = [r["step"] for r in rows if any(k.startswith(("dev/", "valid/", "tune/")) for k in r)]
    assert evals == list(trainer.eval_steps)


@pytest.mark.slow
@pytest.mark.parametrize("name", GROUPED)
def test_killed_run_resumes_to_the_same_result(trained, tfds_dir, tmp_path, name):
    trainer = TRAINERS[name]
    _, expected = trained(name)
    workdir = str(tmp_path)
    if trainer.resumable:
        with pytest.raises(Crash):
            trainer.train.train_and_evaluate(trainer.config(tfds_dir), workdir,
                                             hooks=[crash_after(trainer.crash_after)])
        checkpoints = os.path.join(run_dir(workdir, trainer), "checkpoints")
        assert sorted(os.listdir(checkpoints)) == list(trainer.checkpoints_at_crash)
    else:   # no checkpoints: a rerun in the same workdir starts again and gives the same results
        trainer.train.train_and_evaluate(trainer.config(tfds_dir), workdir)
    resumed = trainer.train.train_and_evaluate(trainer.config(tfds_dir), workdir)
    assert resumed == expected
    with open(os.path.join(run_dir(workdir, trainer), "metrics.jsonl")) as f:
        steps = [json.loads(line)["step"] for line in f]
    assert steps == sorted(steps) and len(steps) == len(set(steps))


@pytest.mark.slow
@pytest.mark.parametrize("name", GROUPED)
def test_workdir_refuses_another_config(trained, tfds_dir, name):
    trainer = TRAINERS[name]
    workdir, _ = trained(name)
    key, value, message = trainer.changed
    config = trainer.config(tfds_dir, **{key.replace(".", "__"): value})
    with pytest.raises(ValueError, match=rf"another config \({message}\)"):
        trainer.train.train_and_evaluate(config, workdir)


@pytest.mark.parametrize("name", NAMES)
def test_config_follows_the_schema(name):
    config = TRAINERS[name].default.get_config()
    flat = set(_flatten(config.to_dict()))
    assert not flat & OLD_KEYS, flat & OLD_KEYS
    if name != "ttw_language":   # its stages name their own metrics and learning rates
        assert {"model.name", "eval.metric", "eval.mode", "optim.learning_rate"} <= flat
    assert not {k for k in flat if k.endswith("horizon")} - {"train_horizon", "eval.horizon"}


@pytest.mark.parametrize("name", NAMES)
def test_renamed_keys_name_their_replacement(name):
    default = TRAINERS[name].default
    renamed = getattr(default, "RENAMED", {})
    flat = set(_flatten(default.get_config().to_dict()))
    for old, new in renamed.items():
        assert old not in flat
        assert new.split()[0] in flat, new
        errors = renamed_flag_errors(["main", f"--config.{old}=1", "--config.seed=3"], renamed)
        assert errors == [f"--config.{old}: {old} is now {new}"]
    assert renamed_flag_errors(["main", "--config.seed=3", "--workdir=/tmp/x"], renamed) == []


@pytest.mark.parametrize("name", [n for n in NAMES if n != "ttw_language"])
def test_unknown_model_and_metric_are_refused_before_any_work(name, tfds_dir, tmp_path):
    trainer = TRAINERS[name]
    with pytest.raises(ValueError, match="model.name must be one of|unknown model.name"):
        trainer.train.train_and_evaluate(trainer.config(tfds_dir, model__name="blind"),
                                         str(tmp_path / "a"))
    with pytest.raises(ValueError, match="eval.metric must be one of"):
        trainer.train.train_and_evaluate(trainer.config(tfds_dir, eval__metric="bleu"),
                                         str(tmp_path / "b"))


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(_flatten(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out
