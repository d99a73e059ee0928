r"""Scores an ArraMon predictions file (`predictions_<split>.json`, written by every training
run for each evaluated split) against the split's instances: nDTW, CTC-0/3/5/7, assembly nDTW,
rPOD and PTC, overall (the mean of the two turns) and per turn, under either CTC rule. Each
instance's prediction is found by its id (its mapId, as the file is keyed), so a split file
whose instances are reordered scores the same; a missing or extra instance is named.

  python -m experiments.arramon.score --predictions=/tmp/arramon_vl/predictions_val_seen.json \
      --split_file=/path/to/ArraMon/data/val_seen.json
  python -m experiments.arramon.score --predictions=/tmp/arramon_vl/predictions_val_unseen.json \
      --workdir=/tmp/arramon_vl --split=val_unseen

(the second reads the run's own data, named by its config.json, and refuses a hidden split of
the release, test_unseen, whose references the authors keep for their leaderboard).
"""
import json

import ml_collections
from absl import app, flags

from experiments.arramon import train
from ttw_jax.arramon import evaluation, records as ar, training_data
from ttw_jax.arramon.predictions import read_predictions, score_predictions
from ttw_jax.core import paths
from ttw_jax.core.train import provenance


def split_records(split_file: str = "", workdir: str = "", split: str = "") -> list[dict]:
    """The instances the predictions are scored against: an official file, or a run's split."""
    if split_file:
        return ar.read_arramon(split_file)
    if not (workdir and split):
        raise ValueError("give --split_file, or --workdir and --split")
    config = ml_collections.ConfigDict(json.loads(
        paths.resolve(workdir).joinpath("config.json").read_text()))
    provenance.check_hidden(train.hidden_splits(config), {"--split (scoring)": split})
    return training_data.load_records(config.data, [split])[0][split]


def _define_flags():
    """The command's flags (defined when it runs, so importing this module defines none)."""
    flags.DEFINE_string("predictions", None, "A predictions_<split>.json file.")
    flags.DEFINE_string("split_file", "", "The official split file the predictions are for.")
    flags.DEFINE_string("workdir", "", "Or: a run's workdir, whose config.json names the data.")
    flags.DEFINE_string("split", "", "With --workdir: the split (e.g. val_seen, partition_test).")
    flags.DEFINE_enum("ctc_rule", "distance", ["distance", "strict"], "The CTC rule.")


def main(argv):
    del argv
    f = flags.FLAGS
    scores = score_predictions(read_predictions(f.predictions),
                               split_records(f.split_file, f.workdir, f.split), f.ctc_rule)
    print(f"{f.predictions} (CTC rule {f.ctc_rule!r}):")
    for name in evaluation.METRICS:
        print(f"  {name:10s} {scores[name]:.4f}  (turns {scores[name + '_0']:.4f} / "
              f"{scores[name + '_1']:.4f})")


if __name__ == "__main__":
    _define_flags()
    flags.mark_flags_as_required(["predictions"])
    app.run(main)
