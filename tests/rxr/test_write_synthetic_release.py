"""`python -m experiments.rxr.write_synthetic_release`: a synthetic RxR release in the official
layout and a Matterport3DSimulator TSV of its viewpoints' view features, read back by the
project's readers (the ones the paper configs' preparation and trainer use)."""
import os

import numpy as np
import pytest

from experiments.rxr import write_synthetic_release as wsr
from tests.conftest import shared_path
from ttw_datasets.rxr.rxr_dataset_builder import SYNTHETIC_TRAIN_SCANS, SYNTHETIC_UNSEEN_SCANS
from ttw_jax.rxr import records as rr, view_features as vf, views
from ttw_jax.rxr.graph import load_matterport_graph
from ttw_jax.rxr.synthetic import node_landmarks


def test_the_release_and_its_view_features_read_back(tmp_path):
    conn = shared_path("matterport", "connectivity")
    train, unseen = SYNTHETIC_TRAIN_SCANS[:2], SYNTHETIC_UNSEEN_SCANS[:1]
    got = wsr.write(str(tmp_path), conn, wsr.parse_sizes("train=3,val_seen=2,val_unseen=2"),
                    train_scans=train, unseen_scans=unseen, text_dim=8, feature_dim=4)
    manual = os.path.join(str(tmp_path), "rxr")
    assert got["manual_dir"] == manual and got["counts"] == {"train": 3, "val_seen": 2,
                                                             "val_unseen": 2}
    fields = {}
    guides = rr.read_rxr(os.path.join(manual, "rxr_val_unseen_guide.jsonl.gz"),
                         guide_fields=fields)
    followers = rr.read_rxr(os.path.join(manual, "rxr_val_unseen_follower.jsonl.gz"), fields)
    assert len(guides) == len(followers) == 2
    assert {g["scan"] for g in guides} <= set(unseen)
    assert all(g["text_features"].shape[1] == 8 and g["step_views"] is not None for g in guides)
    # the train split's cross-translations: every instruction in all three languages
    assert len(os.listdir(os.path.join(manual, "text_features", "rxr_train"))) == 3 * 3
    graph, nodes, _ = load_matterport_graph(conn, list(train) + list(unseen))
    assert got["viewpoints"] == len(nodes.ids)
    table = vf.feature_table(got["features"], nodes, str(tmp_path / "cache"))
    landmarks = node_landmarks([i.split("/", 1)[1] for i in nodes.ids], wsr.NUM_LANDMARKS)
    want = views.synthetic_view_features(graph, landmarks, wsr.NUM_LANDMARKS, 4,
                                         wsr.FEATURE_NOISE, seed=0)
    np.testing.assert_allclose(table, want, atol=4e-3)       # through the float16 cache


def test_sizes_are_split_counts():
    assert wsr.parse_sizes(wsr.DEFAULT_SIZES) == [("train", 200, 0), ("val_seen", 40, 1),
                                                  ("val_unseen", 40, 2)]
    for bad in ("train", "train=x", ""):
        with pytest.raises(ValueError, match="--sizes"):
            wsr.parse_sizes(bad)
