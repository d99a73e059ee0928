"""The landmark classifier's per-corner predictions and kept parameters, written beside
results.json, re-score to the run's reported numbers (`experiments.ttw_landmarks.score`), and a
changed prediction changes the score."""
import io
import json
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from experiments.ttw_landmarks import score, train
from experiments.ttw_landmarks.configs import default
from tests.conftest import ROOT
from tests.helpers import override
from ttw_jax.core.records import RecordFormatError
from ttw_jax.talk_the_walk.landmarks import features as lf
from ttw_jax.talk_the_walk.landmarks import predictions as lp
from ttw_jax.talk_the_walk.landmarks.model import read_params


def _config():
    # one synthetic neighbourhood (80 corners) in batches of 16: several train and valid
    # batches, so the means over batches differ from the whole-split scores
    return override(default.get_config(), num_epochs=3, batch_size=16,
                    model__features="resnet,textrecog", data__neighborhoods="fidi")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("lm")
    return str(workdir), train.train_and_evaluate(_config(), str(workdir))


def _write(path, data: dict) -> str:
    buf = io.BytesIO()
    np.savez(buf, **data)
    path.write_bytes(buf.getvalue())
    return str(path)


def test_predictions_rescore_to_the_results(run):
    workdir, r = run
    with open(os.path.join(workdir, "results.json")) as f:
        written = json.load(f)
    for split in lp.SPLITS:
        path = os.path.join(workdir, r["predictions"][split])
        data = lp.read_predictions(path)
        n = r["corners"][split]
        assert data["corner"].shape == (n,) and data["logits"].shape == (n, lf.NUM_CLASSES)
        assert len(set(data["batch"].tolist())) == -(-n // 16) > 1         # several batches
        keys = [f"{nbh}_{x}_{y}" for nbh, (x, y) in zip(data["neighborhood"], data["location"])]
        assert keys == data["corner"].tolist()
        scores = score.score_file(path)
        assert score.mismatches(scores, written) == []
        for field, name in score.TABLE18[split].items():
            if name != "loss":                     # the loss is recomputed: to rounding
                assert scores["batch_means"][name] == r["table18"][field]
    valid = score.score_file(os.path.join(workdir, "predictions_valid.npz"))
    assert {k: valid[k] for k in score.SUMMARIES} == written["valid"]
    assert valid["batch_means"]["weighted_f1"] != valid["model"]["weighted_f1"]


def test_kept_parameters_give_the_valid_logits(run):
    workdir, r = run
    data = lp.read_predictions(os.path.join(workdir, "predictions_valid.npz"))
    inputs = train.load_data(_config())["inputs"]
    model = train.build_model(_config(), r["vocab_size"])
    params = read_params(os.path.join(workdir, r["params"]))
    logits = model.apply({"params": params},
                         {k: jnp.asarray(v[data["index"]]) for k, v in inputs.items()})
    np.testing.assert_allclose(np.asarray(logits), data["logits"], rtol=1e-5, atol=1e-6)
    assert int(data["epoch"]) == r["best_epoch"]


def test_a_changed_prediction_changes_the_score(run, tmp_path, capsys):
    workdir, r = run
    results = os.path.join(workdir, "results.json")
    data = lp.read_predictions(os.path.join(workdir, "predictions_valid.npz"))
    # a false negative of a class with positives turned into a true positive
    i, c = np.argwhere(data["labels"] & ~data["predictions"])[0]
    data["logits"][i, c] = 1.0
    data["predictions"][i, c] = True
    changed = _write(tmp_path / "changed.npz", data)
    scores = score.score_file(changed)
    assert scores["batch_means"]["weighted_recall"] > r["table18"]["valid_recall"]
    bad = score.mismatches(scores, json.load(open(results)))
    assert any(b.startswith("batch_means/weighted_f1") for b in bad)
    assert score.report(changed, results) == 1 and "differs from" in capsys.readouterr().out
    data["predictions"][i, c] = False            # no longer logits >= 0
    with pytest.raises(RecordFormatError, match="'predictions': differs from logits >= 0"):
        lp.read_predictions(_write(tmp_path / "inconsistent.npz", data))
    del data["weights"]
    with pytest.raises(RecordFormatError, match="'weights': missing"):
        lp.read_predictions(_write(tmp_path / "short.npz", data))


def test_score_command(run):
    workdir, _ = run
    out = subprocess.run([sys.executable, "-m", "experiments.ttw_landmarks.score",
                          f"--predictions={workdir}/predictions_train.npz",
                          f"--results={workdir}/results.json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "every number of" in out.stdout and "train: " in out.stdout
