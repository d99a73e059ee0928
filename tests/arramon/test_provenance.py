"""What produced an ArraMon result (`experiments/arramon/train.py`, `run_provenance`): the
symbolic views refused with the release's instructions unless
`data.allow_synthetic_perception`, the recorded features' rollouts marked as the proxy protocol
`nearest_recorded_pose` (and the paper's rows under their own heading), and the release's hidden
test_unseen: predictions checked against its complete instance set and written, never a metric,
never selected on. One tiny end-to-end run on a release-layout fixture."""
import json

import jax
import numpy as np
import pytest

from experiments.arramon import score, train
from experiments.arramon.configs import default
from tests.conftest import xla_optimizations
from ttw_jax.arramon import (episodes as ae, evaluation as arr_eval, predictions, report,
                             synthetic as syn)
from ttw_jax.arramon.synthetic_features import write_features
from ttw_jax.core.records import RecordFormatError
from ttw_jax.core.train import provenance
from ttw_jax.core.vocab import Vocabulary


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """A release-layout folder of synthetic instances: train.json, val_seen.json and the
    withheld test_unseen.json (the authors' file: here with references, which nothing may
    read)."""
    root = tmp_path_factory.mktemp("arramon_release")
    manual = root / "data"
    manual.mkdir()
    records = {}
    for name, n, seed in (("train", 12, 1), ("val_seen", 4, 2), ("test_unseen", 5, 3)):
        recs = syn.synthetic_instances(n, seed=seed)
        for i, r in enumerate(recs):
            r["mapId"] = 1000 * seed + i
        (manual / f"{name}.json").write_text(json.dumps(recs))
        records[name] = recs
    return {"manual": str(manual), "root": root, "records": records}


def _config(release, **data):
    c = default.get_config()
    c.model.embed_dim, c.model.action_dim, c.model.hidden = 16, 8, 32
    c.data.tfds_config, c.data.manual_dir = "english", release["manual"]
    c.data.tfds_dir = str(release["root"] / "tfds")
    c.data.dev_split, c.data.eval_splits = "val_seen", "val_seen,test_unseen"
    c.batch_size, c.num_steps, c.eval_every, c.log_every = 8, 2, 2, 2
    c.num_devices = 1
    c.eval.horizon, c.eval.batch_size, c.eval.num_figures = 20, 8, 0
    c.eval.perfect_navigation, c.eval.baselines = False, ""   # test_train.py checks them
    for k, v in data.items():
        c.data[k] = v
    return c


def test_symbolic_views_with_the_release_are_refused_naming_the_key(release, tmp_path):
    c = _config(release)
    with pytest.raises(ValueError, match=r"model.name='vl' without data.features_dir \(the "
                                         r"simulator's symbolic views\) with an official "
                                         r"release.*data.allow_synthetic_perception=True"):
        train.train_and_evaluate(c, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()                  # refused before any work
    for ok in (_config(release, allow_synthetic_perception=True),
               _config(release, features_dir="/release/features"),
               _config(release, tfds_config="synthetic", manual_dir="")):
        train.check_data_config(ok)
    lo = _config(release)
    lo.model.name = "lo"                                    # sees nothing
    train.check_data_config(lo)
    assert train.run_provenance(lo, ())["perception"] == provenance.NONE


def test_the_release_hidden_split_is_never_selected_on(release, tmp_path):
    assert "test_unseen" in train.hidden_splits(_config(release))
    with pytest.raises(ValueError, match=r"data.dev_split \(model selection\) uses "
                                         r"'test_unseen': the release withholds"):
        train.train_and_evaluate(_config(release, dev_split="test_unseen",
                                         allow_synthetic_perception=True), str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()
    for bad, what in ((dict(train_split="test_unseen"), "data.train_split"),
                      (dict(partition_split="test_unseen"), "data.partition_split")):
        with pytest.raises(ValueError, match=what):
            train.check_data_config(_config(release, allow_synthetic_perception=True, **bad))
    baselines = _config(release)
    baselines.mode = "baselines"
    with pytest.raises(ValueError, match=r"baselines mode only computes metrics\) uses "
                                         r"'test_unseen'"):
        train.check_data_config(baselines)
    # The synthetic generator's test_unseen has its references.
    train.check_data_config(_config(release, tfds_config="synthetic", manual_dir="",
                                    dev_split="test_unseen"))
    # Nor is a run's hidden split scored from its workdir.
    (tmp_path / "config.json").write_text(json.dumps(_config(release).to_dict()))
    with pytest.raises(ValueError, match=r"--split \(scoring\) uses 'test_unseen'"):
        score.split_records(workdir=str(tmp_path), split="test_unseen")


def test_predictions_of_a_hidden_split_hold_every_instance_once(release, tmp_path):
    records = release["records"]["test_unseen"]
    per = {f"{k}_{t}": v for t in range(2) for k, v in {
        "navi_xz": np.zeros((5, 3, 2)), "navi_xz_len": np.full(5, 2), "picked": np.zeros(5, int),
        "pick_auto": np.zeros(5, bool), "assem_xz": np.zeros((5, 3, 2)),
        "assem_xz_len": np.ones(5, int), "placed": np.ones((5, 3), int),
        "place_auto": np.zeros(5, bool)}.items()}
    preds = predictions.predictions(records, per)
    path = tmp_path / "predictions_test_unseen.json"
    keys = list(preds)
    for bad, message in (
            ({k: preds[k] for k in keys[1:]}, "1 of 5 instances have no prediction"),
            ({**preds, "9999": preds[keys[0]]}, "instances the split does not hold"),
            ({**preds, keys[1]: preds[keys[0]]}, f"prediction '{keys[1]}' is for instance 0"),
            ({**preds, keys[0]: {**preds[keys[0]], "turns": []}}, "turns")):
        with pytest.raises((ValueError, RecordFormatError), match=message) as e:
            predictions.write_checked_predictions(path, bad, records)
        assert "predictions_test_unseen.json" in str(e.value) and not path.exists()
    predictions.write_checked_predictions(path, preds, records)
    assert predictions.read_predictions(str(path)) == json.loads(json.dumps(preds))


def test_the_unscored_rollout_reads_no_reference_and_computes_no_metric():
    recs = syn.synthetic_instances(3, seed=5)
    vocab = Vocabulary.build(s for r in recs for s in r["instructions"]["navi_inst_gt"])
    walk, index = ae.walkable_for(recs)
    ep = ae.episodes(recs, vocab, map_index=index)
    key = jax.random.key(0)
    per = arr_eval.predict(arr_eval.make_task_rollout(arr_eval.random_factories(), 12,
                                                      scored=False), walk, None, ep, key, 4)
    assert not {k.rsplit("_", 1)[0] for k in per} & set(
        arr_eval.METRICS + tuple(f"{m}_{r}" for m in arr_eval.RULE_METRICS
                                 for r in ("distance", "strict")))
    scored = arr_eval.evaluate(arr_eval.make_task_rollout(arr_eval.random_factories(), 12),
                               walk, None, ep, key, 4)["episodes"]
    for k, v in per.items():             # the same paths and outcomes as the scored rollout
        np.testing.assert_array_equal(v, scored[k], err_msg=k)


def test_recorded_features_are_the_nearest_pose_proxy_and_the_paper_rows_stand_apart(
        release, tmp_path):
    feats = tmp_path / "features"
    write_features(release["records"]["val_seen"][:1], str(feats), seed=0)
    c = _config(release, features_dir=str(feats))
    prov = train.run_provenance(c, ())
    assert prov["protocol"] == {"name": "nearest_recorded_pose", "why": train.NEAREST_POSE["why"]}
    assert "Unity simulator" in prov["protocol"]["why"]
    assert prov["perception"]["kind"] == "file" and prov["perception"]["width"] == 2048
    assert prov["perception"]["file"] == str(feats)
    assert "proxy protocol 'nearest_recorded_pose'" in provenance.tags(prov)[0]
    m = {k: 0.5 for k in arr_eval.METRICS} | {f"{k}_{r}": 0.5 for k in arr_eval.RULE_METRICS
                                              for r in ("distance", "strict")}
    m |= {f"{k}_{t}": 0.5 for k in arr_eval.METRICS for t in range(2)}
    res = {"config": c.to_dict(), "agent": "vl", "best_step": 2,
           "val_seen": {"episodes": 4, "vl": m},
           "test_unseen": {"predictions": "predictions_test_unseen.json", "instances": 5}}
    lines = train.format_results(res).splitlines()
    proxy = next(i for i, line in enumerate(lines) if "NOT THE PAPER'S PROTOCOL" in line)
    assert "'nearest_recorded_pose'" in lines[proxy]
    assert proxy < next(i for i, line in enumerate(lines) if line.startswith("val_seen vl"))
    paper = next(i for i, line in enumerate(lines) if line.startswith("paper val_seen V/L"))
    assert "evaluated in the Unity simulator" in lines[paper - 1]
    assert "not under the proxy protocol 'nearest_recorded_pose'" in lines[paper - 1]
    hidden = [line for line in lines if "test_unseen" in line]
    assert hidden == ["test_unseen: references withheld (a leaderboard scores them), no metric: "
                      "predictions of 5 instances in predictions_test_unseen.json"]
    # Without the features a release run walks the map rebuilt from its ground-truth paths:
    # another proxy; a synthetic city carries its buildings: the official protocol.
    rebuilt = train.format_results({**res, "config": _config(release).to_dict()})
    assert "NOT THE PAPER'S PROTOCOL" in rebuilt and "'reconstructed_walkable_map'" in rebuilt
    assert ("evaluated in the Unity simulator, not under the proxy protocol "
            "'reconstructed_walkable_map'") in rebuilt
    official = train.format_results({**res, "config": _config(
        release, tfds_config="synthetic").to_dict()})
    assert "NOT THE PAPER'S PROTOCOL" not in official
    assert "paper val_seen" not in official      # the paper has no rows for synthetic cities


@pytest.mark.slow
def test_a_release_run_with_the_flag_says_synthetic_perception_and_only_predicts_test_unseen(
        release, tmp_path, capsys):
    c = _config(release, allow_synthetic_perception=True)
    with xla_optimizations(False):      # tiny models: compilation dominates
        res = train.train_and_evaluate(c, str(tmp_path))
    out = capsys.readouterr().out
    written = json.loads((tmp_path / "results.json").read_text())
    assert written == json.loads(json.dumps(res))
    prov = written["provenance"]
    title = next(line for line in out.splitlines() if line.startswith("[SYNTHETIC PERCEPTION, "))
    assert title == provenance.title(prov)
    assert written["schema_version"] == provenance.SCHEMA_VERSION
    assert prov["data"] == {"kind": "release", "folder": release["manual"],
                            "fingerprint": provenance.fingerprint(release["manual"])}
    assert prov["perception"] == {"kind": "synthetic", "seed": c.seed,
                                  "width": train.SYMBOLIC_WIDTH}
    assert "synthetic perception" in provenance.tags(prov)
    assert prov["protocol"] == report.RECONSTRUCTED_MAP
    assert prov["config_hash"] == provenance.config_hash(c)
    assert prov["code"]["version"] and isinstance(prov["code"].get("modified", False), bool)
    assert prov["device"]["platform"] == "cpu" and prov["device"]["count"] == c.num_devices == 1
    assert prov["dtype"] == "float32" and prov["seeds"] == 1
    assert prov["hidden_splits"] == ["test_unseen"]
    # The hidden split: its predictions file (every instance once), no metric anywhere.
    assert written["test_unseen"] == {"predictions": "predictions_test_unseen.json",
                                      "instances": 5}
    preds = predictions.read_predictions(str(tmp_path / "predictions_test_unseen.json"))
    predictions.check_instances(preds, release["records"]["test_unseen"])
    assert f"predictions of its 5 instances written to {tmp_path / 'predictions_test_unseen.json'}" \
        in out
    assert not [line for line in out.splitlines() if line.startswith("test_unseen ")]
    assert "test_unseen" not in (tmp_path / "metrics.jsonl").read_text()
    assert "ctc3" in written["val_seen"]["vl"]                 # the scored split is scored
