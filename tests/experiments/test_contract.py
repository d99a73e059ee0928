"""What every experiment trainer honours beyond its run (`contract.py`, subclassed in each
trainer's test module): the config follows the one schema (`model.name`, `optim`,
`eval.metric` / `eval.mode`, `train_horizon` / `eval.horizon`), the launcher names the replacement
of every renamed key, unknown models and metrics fail before any work, and every trainer's tests
hold it to the contract."""
import importlib

import pytest

from tests.experiments.contract import TrainerContract
from tests.experiments.trainers import TRAINERS
from ttw_jax.core.train.launch import renamed_flag_errors

NAMES = sorted(TRAINERS)
TRAINER_TESTS = {"tests.talk_the_walk.test_emergent_train": "ttw_emergent",
                 "tests.talk_the_walk.test_language_train": "ttw_language",
                 "tests.talk_the_walk.test_landmarks": "ttw_landmarks",
                 "tests.touchdown.test_nav_train": "touchdown_nav",
                 "tests.touchdown.test_sdr_train": "touchdown_sdr",
                 "tests.rxr.test_train": "rxr",
                 "tests.arramon.test_train": "arramon"}
OLD_KEYS = {"model.kind", "learning_rate", "grad_clip", "lr_schedule", "test_horizon", "metric",
            "horizon", "loss.horizon", "select_metric", "comm", "masc"}


@pytest.mark.parametrize("module", TRAINER_TESTS)
def test_every_trainer_test_module_holds_its_trainer_to_the_contract(module):
    classes = [c for c in vars(importlib.import_module(module)).values()
               if isinstance(c, type) and issubclass(c, TrainerContract) and c.name]
    assert [c.name for c in classes] == [TRAINER_TESTS[module]]


def test_every_trainer_has_a_contract_test():
    assert sorted(TRAINER_TESTS.values()) == NAMES


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
        assert new.startswith("removed: ") or new.split()[0] in flat, new
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
