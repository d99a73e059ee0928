"""A NaN planted in one instruction's text-feature file (`text_features/rxr_train/
<id>_<lang>_text_features.npz`) of an RxR release stops the trainer where it reads the file,
preparing its dataset, before any step: the error names the file and the element (subword row,
dimension). The TFDS copy it trains on then never holds a non-finite value (a NaN there could
come from no file, so no `nonfinite_step_<n>.json` is written for it)."""
import os
import re

import numpy as np
import pytest

from tests.conftest import shared_path
from tests.experiments.trainers import TRAINERS
from ttw_datasets.rxr.rxr_dataset_builder import SYNTHETIC_TRAIN_SCANS, SYNTHETIC_UNSEEN_SCANS
from ttw_jax.rxr import records as rr
from ttw_jax.rxr.graph import load_matterport_graph
from ttw_jax.rxr.release import write_release
from ttw_jax.rxr.synthetic import synthetic_split_records


def test_a_nan_in_a_text_feature_file_is_named_by_file_and_row(tmp_path):
    from experiments.rxr import train
    conn = shared_path("matterport", "connectivity")
    recs = synthetic_split_records(conn, SYNTHETIC_TRAIN_SCANS[:2], SYNTHETIC_UNSEEN_SCANS[:1],
                                   (("train", 8, 0), ("val_seen", 2, 1), ("val_unseen", 2, 2)))
    graph, nodes, _ = load_matterport_graph(conn, sorted({r["scan"] for s in recs.values()
                                                          for r in s}))
    manual = str(tmp_path / "release")
    write_release(manual, graph, nodes, recs, dim=16)
    g = recs["train"][3]
    planted = os.path.join(manual, "text_features", "rxr_train",
                           f"{g['instruction_id']:06d}_{g['language'].split('-')[0]}"
                           "_text_features.npz")
    with np.load(planted) as z:
        tokens, features = z["tokens"], z["features"].copy()
    features[2, 5] = np.nan
    np.savez(planted, tokens=tokens, features=features)
    c = TRAINERS["rxr"].config(str(tmp_path / "tfds"), data__tfds_config="guide_follower",
                               data__manual_dir=manual, data__text_features=True,
                               data__dev_split="val_unseen", data__eval_splits="val_seen",
                               data__allow_synthetic_perception=True)
    with pytest.raises(rr.PoseTraceError,
                       match=re.escape(planted) + r": .*non-finite.* nan at index \(2, 5\)"):
        train.train_and_evaluate(c, str(tmp_path / "run"))
    assert not (tmp_path / "run" / "checkpoints").exists()
