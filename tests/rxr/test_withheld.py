"""The evaluation contract on the real R2R release: a split whose references are withheld (R2R
test, RxR test_standard / test_challenge) gets leaderboard predictions and no metric; synthetic
view features with real instructions need their own flag and say so; results.json carries its
provenance."""
import json
import os

import pytest

from tests.conftest import shared_path
from tests.experiments.trainers import TRAINERS
from tests.helpers import override
from ttw_jax.core.train import provenance as prov
from ttw_jax.rxr import predictions
from ttw_jax.rxr.records import hidden_splits

RXR = TRAINERS["rxr"]
METRIC_KEYS = {"pl", "ne", "sr", "spl", "ndtw", "sdtw", "osr"}


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """A manual folder holding the real R2R_val_seen.json and R2R_test.json (as shipped), and a
    TFDS folder the two runs share."""
    root = tmp_path_factory.mktemp("r2r")
    manual = root / "manual"
    manual.mkdir()
    for name in ("R2R_val_seen.json", "R2R_test.json"):
        os.symlink(shared_path("r2r", name), manual / name)
    return str(manual), str(root / "tfds")


def r2r_config(release, config_file="default", **overrides):
    manual, tfds = release
    c = RXR.default.get_config() if config_file == "default" else config_file.get_config()
    c.data.tfds_config, c.data.manual_dir, c.data.tfds_dir = "r2r", manual, tfds
    c.data.connectivity_dir = shared_path("matterport", "connectivity")
    c.data.train_split, c.data.max_tokens, c.data.max_path = "val_seen", 8, 12
    c.num_devices = 1
    return override(c, **overrides)


def all_keys(tree) -> set:
    if isinstance(tree, dict):
        return set(tree) | {k for v in tree.values() for k in all_keys(v)}
    return set()


def test_hidden_splits_of_each_release():
    assert hidden_splits("r2r") == ("test",)
    assert hidden_splits("guide") == ("test_standard", "test_challenge")
    assert hidden_splits("synthetic") == ()     # the synthetic test split has its references


@pytest.mark.parametrize("overrides, message", [
    (dict(data__dev_split="test", data__eval_splits="val_seen"),
     r"data.dev_split \(model selection\) uses 'test': the release withholds the references"),
    (dict(data__features="synthetic", data__eval_splits="test"),
     r"data.features=synthetic with an official release.*allow_synthetic_perception"),
])
def test_uses_that_need_withheld_references_or_fake_views_are_refused(release, overrides, message):
    with pytest.raises(ValueError, match=message):
        RXR.train.check_config(r2r_config(release, **{"data__dev_split": "train_holdout",
                                                      **overrides}))


def test_a_leaderboard_file_needs_every_language(release):
    c = r2r_config(release, data__tfds_config="guide", data__languages="hi",
                   data__dev_split="val_seen", data__eval_splits="test_standard",
                   data__features="")
    c.model.name = "language_only"
    with pytest.raises(ValueError, match="takes every instruction of the split"):
        RXR.train.check_config(c)


def test_leaderboard_rows_are_checked_against_the_complete_id_set():
    rows = [{"instr_id": "1_0", "trajectory": [["a", 0.0, 0.0]]},
            {"instr_id": "1_1", "trajectory": [["b", 0.5, 0.0]]}]
    predictions.check_leaderboard(rows, "r2r", ["1_0", "1_1"], "f")
    with pytest.raises(ValueError, match=r"missing 1 \(e.g. \['2_0'\]\)"):
        predictions.check_leaderboard(rows, "r2r", ["1_0", "1_1", "2_0"], "f")
    with pytest.raises(ValueError, match="repeated 1"):
        predictions.check_leaderboard(rows + rows[:1], "r2r", ["1_0", "1_1"], "f")
    with pytest.raises(ValueError, match=r"keys \['instr_id', 'path'\]"):
        predictions.check_leaderboard([{"instr_id": "1_0", "path": ["a"]}], "r2r", ["1_0"], "f")
    with pytest.raises(ValueError, match="not in the split 1"):
        predictions.check_leaderboard([{"instruction_id": 7, "path": ["a"]}], "rxr", [], "f")


@pytest.mark.slow
def test_baselines_on_the_real_r2r_test_split_write_predictions_and_no_metric(release, tmp_path,
                                                                             capsys):
    from experiments.rxr.configs import baselines
    c = r2r_config(release, baselines, data__dev_split="val_seen",
                   data__eval_splits="val_seen,test", eval__baseline_seeds=1,
                   eval__straight="fixed")
    res = RXR.train.train_and_evaluate(c, str(tmp_path))
    test = res["test"]
    assert test["references"] == "withheld" and test["episodes"] == 4173
    assert not all_keys(test) & METRIC_KEYS and "gold" not in test
    assert set(test["predictions"]) == {"random_walk", "random_heading"}
    assert test["not_run"] == {"first_step": "reads the reference path"}
    with open(shared_path("r2r", "R2R_test.json")) as f:
        expected = {f"{e['path_id']}_{k}" for e in json.load(f)
                    for k in range(len(e["instructions"]))}
    for names in test["predictions"].values():
        (name,) = names
        rows = json.loads((tmp_path / name).read_text())
        assert {r["instr_id"] for r in rows} == expected
        assert all(len(step) == 3 for r in rows for step in r["trajectory"])
    assert res["val_seen"]["gold"]["sr"] == 1.0           # a split with references is scored
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["schema_version"] == prov.SCHEMA_VERSION
    assert on_disk["provenance"]["hidden_splits"] == ["test"]
    assert on_disk["provenance"]["data"]["kind"] == "release"
    assert on_disk["provenance"]["perception"] == {"kind": "none"}
    out = capsys.readouterr().out
    test_lines = [line for line in out.splitlines() if line.startswith("test ")]
    assert len(test_lines) == 1 and "no metrics" in test_lines[0]


@pytest.mark.slow
def test_synthetic_views_on_real_instructions_run_with_the_flag_and_say_so(release, tmp_path,
                                                                           capsys):
    c = r2r_config(release, data__dev_split="train_holdout", data__eval_splits="test",
                   data__features="synthetic", data__allow_synthetic_perception=True,
                   eval__baselines="random_walk", eval__baseline_seeds=1)
    c.model.embed_dim, c.model.hidden = 8, 16
    c.batch_size, c.num_steps, c.eval_every, c.log_every = 8, 2, 2, 2
    c.train_horizon, c.eval.horizon = 4, 4
    res = RXR.train.train_and_evaluate(c, str(tmp_path))
    p = res["provenance"]
    assert p["perception"]["kind"] == "synthetic" and p["perception"]["width"] > 0
    assert "synthetic perception" in prov.tags(p)
    assert set(p) == {"data", "perception", "protocol", "code", "config_hash", "device", "dtype",
                      "seeds", "hidden_splits", "token_limits"}
    assert p["config_hash"] == prov.config_hash(c) and p["device"]["count"] >= 1
    assert p["code"]["version"] and p["dtype"] == "float32" and p["seeds"] == 1
    assert res["test"]["predictions"]["full"] == ["predictions_test.json"]
    assert not all_keys(res["test"]) & METRIC_KEYS
    first = capsys.readouterr().out.splitlines()
    title = next(line for line in first if line.startswith("["))
    assert "SYNTHETIC PERCEPTION" in title and "data: " in title
