r"""Re-scores a landmark-classification predictions file (`predictions_train.npz` or
`predictions_valid.npz`, written beside `results.json` by every run) to the run's numbers: Table
18's columns (the loss and the weighted precision, recall and F1, means over the scored batches),
the whole-split scores (weighted, micro, macro, per class) and, for valid, the 'all positive'
and 'random (0.5)' baselines.

  python -m experiments.ttw_landmarks.score --predictions=/tmp/lm/predictions_valid.npz
  python -m experiments.ttw_landmarks.score --predictions=/tmp/lm/predictions_valid.npz \
      --results=/tmp/lm/results.json

With `--results`, every number of that file the predictions file accounts for is compared
(`mismatches`): the kept epoch's row of Table 18 and of the history, and for valid the `valid`
block; the command fails when one differs. Precision, recall and F1 must be equal; the loss,
recomputed from the logits, within a relative `LOSS_RTOL` (float32 rounding).
"""
import json
import math

from absl import app, flags

from ttw_jax.core import paths
from ttw_jax.talk_the_walk.landmarks import predictions as lp

LOSS_RTOL = 1e-5
# results.json's Table 18 fields of each split: {field: batch-mean score}.
TABLE18 = {"train": {"train_loss": "loss", "train_f1": "weighted_f1"},
           "valid": {"valid_loss": "loss", "valid_f1": "weighted_f1",
                     "valid_precision": "weighted_precision",
                     "valid_recall": "weighted_recall"}}
SUMMARIES = ("model", "all_positive", "random")


def score_file(path: str) -> dict:
    """`predictions.score_predictions` of the file at `path`."""
    return lp.score_predictions(lp.read_predictions(path))


def _flat(tree, prefix: str = "") -> dict:
    if not isinstance(tree, dict):
        return {prefix: tree}
    return {k: v for key, sub in tree.items() for k, v in _flat(sub, f"{prefix}/{key}").items()}


def reported(results: dict, split: str) -> dict:
    """What `results` (a run's results.json) reports that a predictions file of `split`
    accounts for, flat {name: value}, in the names of `expected(scores)`."""
    out = {"epoch": results["best_epoch"], "corners": results["corners"][split]}
    out.update({f"batch_means/{score}": results["table18"][field]
                for field, score in TABLE18[split].items()})
    best = results["history"][results["best_epoch"] - 1]
    out.update({f"batch_means/{k}": best[f"{split}/{k}"] for k in lp.SCORES})
    if split == "valid":
        for name in SUMMARIES:
            out.update(_flat(results["valid"][name], name))
    return out


def expected(scores: dict) -> dict:
    """The scores of a predictions file, flat, in the names of `reported`."""
    out = {"epoch": scores["epoch"], "corners": scores["corners"],
           **_flat(scores["batch_means"], "batch_means")}
    for name in SUMMARIES:
        if name in scores:
            out.update(_flat(scores[name], name))
    return out


def mismatches(scores: dict, results: dict) -> list[str]:
    """'name: file X, results.json Y' for each number of `results` that `scores` (of one
    split's predictions file) does not reproduce: equal, or the loss within `LOSS_RTOL`."""
    ours, theirs = expected(scores), reported(results, scores["split"])
    out = []
    for name, value in theirs.items():
        mine = ours.get(name)
        same = (mine is not None and math.isclose(mine, value, rel_tol=LOSS_RTOL)
                if name.endswith("/loss") else mine == value)
        if not same:
            out.append(f"{name}: file {mine}, results.json {value}")
    return out


def format_scores(scores: dict) -> str:
    m = scores["batch_means"]
    lines = [f"{scores['split']}: {scores['corners']} corners, epoch {scores['epoch']}",
             "means over batches (Table 18): " + ", ".join(f"{k} {m[k]:.5f}" for k in lp.SCORES)]
    for name in SUMMARIES:
        if name in scores:
            s = scores[name]
            lines.append(f"{name + ', whole split:':<26} " + ", ".join(
                f"{avg} P/R/F1 {s[avg + '_precision']:.4f}/{s[avg + '_recall']:.4f}/"
                f"{s[avg + '_f1']:.4f}" for avg in ("weighted", "micro", "macro")))
    return "\n".join(lines)


def _define_flags():
    """The command's flags (defined when it runs, so importing this module defines none)."""
    flags.DEFINE_string("predictions", None, "A predictions_<split>.npz file of a run.")
    flags.DEFINE_string("results", "", "The run's results.json: compare every number with it.")


def report(predictions: str, results: str = "") -> int:
    """Prints the scores of the file `predictions` and, given `results` (a results.json), what
    of it they do not reproduce; the exit status: 1 when something differs, else 0."""
    scores = score_file(predictions)
    print(format_scores(scores))
    if not results:
        return 0
    with paths.open_binary(results) as f:
        bad = mismatches(scores, json.load(f))
    if bad:
        print(f"differs from {results}:\n  " + "\n  ".join(bad))
        return 1
    print(f"every number of {results} for {scores['split']} reproduced")
    return 0


def main(argv):
    del argv
    return report(flags.FLAGS.predictions, flags.FLAGS.results)


if __name__ == "__main__":
    _define_flags()
    flags.mark_flags_as_required(["predictions"])
    app.run(main)
