r"""Writes a synthetic fixture in the ArraMon release's layout, for runs of the release recipes
(`configs/paper.py`, `configs/official.py`) without the release: `<out>/data/` holds train.json,
val_seen.json and val_unseen.json of synthetic instances (generator seeds 1, 2, 3: distinct
mapIds) and na_vocab.txt in the official format, built from train.json as the official
`build_vocab` (the words seen at least 3 times); `<out>/features/` their pre-recorded features
(`ttw_jax.arramon.synthetic_features`: noise plus the demonstrated action in channels 0-3, every
`skip_every`-th step left unrecorded). Its numbers are a fixture's, not the paper's.

  python -m experiments.arramon.fixture --out=/tmp/arramon_fixture --train=40 --val=8
"""
import json
import os

from absl import app, flags

from ttw_jax.arramon import episodes as ae, synthetic as syn
from ttw_jax.arramon.synthetic_features import write_features

SPLIT_SEEDS = {"train": 1, "val_seen": 2, "val_unseen": 3}


def write_fixture(out: str, train: int, val: int, skip_every: int = 4) -> dict:
    """Writes the fixture into `out`; returns {split: number of instances}."""
    data, feats = os.path.join(out, "data"), os.path.join(out, "features")
    os.makedirs(data, exist_ok=True)
    sizes = {"train": train, "val_seen": val, "val_unseen": val}
    for split, seed in SPLIT_SEEDS.items():
        records = syn.synthetic_instances(sizes[split], seed=seed)
        with open(os.path.join(data, f"{split}.json"), "w") as f:
            json.dump(records, f)
        write_features(records, feats, seed=seed, skip_every=skip_every)
        if split == "train":
            ae.write_vocab_file(os.path.join(data, "na_vocab.txt"),
                                (t for r in records for k in ("navi_inst_gt", "assem_inst_gt")
                                 for t in r["instructions"][k]))
    return sizes


def _define_flags():
    """The command's flags (defined when it runs, so importing this module defines none)."""
    flags.DEFINE_string("out", None, "The folder to write (data/ and features/ inside).")
    flags.DEFINE_integer("train", 40, "Instances of train.json.")
    flags.DEFINE_integer("val", 8, "Instances of val_seen.json and of val_unseen.json.")
    flags.DEFINE_integer("skip_every", 4, "Leave every k-th step's features unrecorded (0: none).")


def main(argv):
    del argv
    f = flags.FLAGS
    sizes = write_fixture(f.out, f.train, f.val, f.skip_every)
    print(f"{f.out}: data/ ({', '.join(f'{s} {n}' for s, n in sizes.items())} instances, "
          "na_vocab.txt) and features/")


if __name__ == "__main__":
    _define_flags()
    flags.mark_flags_as_required(["out"])
    app.run(main)
