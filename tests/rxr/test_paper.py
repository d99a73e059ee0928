"""The paper's agent and settings (Ku et al. 2020, section 5, Tables 5, 6 and 8) on a fixture in
the RxR release's exact layout (`ttw_jax.rxr.release`, with cross-translated text features),
view features in the Matterport3DSimulator TSV, `.house` panorama centres and an R2R release:
`configs/paper*.py` train on guide and follower paths, select on val_seen, stream, refuse to run
without view features; the cross-translations, the multitask mixture and the human followers'
row, hand-checked."""
import json
import os

import numpy as np
import pytest
from scipy.sparse import csgraph

from tests.conftest import shared_path
from tests.helpers import override
from ttw_datasets.rxr import rxr_dataset_builder as rb
from ttw_datasets.rxr.rxr_dataset_builder import SYNTHETIC_TRAIN_SCANS, SYNTHETIC_UNSEEN_SCANS
from ttw_jax.core.pano_graph import adjacency
from ttw_jax.core.stream import mixture_index
from ttw_jax.rxr import house, records as rr, view_features as vf
from ttw_jax.rxr.evaluation import human_followers
from ttw_jax.rxr.graph import geodesic_table, load_matterport_graph
from ttw_jax.rxr.metrics import path_metrics_np
from ttw_jax.rxr.release import word_vector, write_release
from ttw_jax.rxr.synthetic import synthetic_split_records

DIM = 16


def write_house(path, names, centres):
    lines = ["ASCII 1.1", "H name label " + " ".join(["0"] * 26)]
    for i, (n, c) in enumerate(zip(names, centres)):
        lines.append(f"P {n} {i} -1 0 {c[0]:.6f} {c[1]:.6f} {c[2]:.6f} 0 0 0 0 0")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").write("\n".join(lines) + "\n")


def write_r2r(folder, records):
    """R2R_{split}.json (one instruction per path) and text_features/{id:06d}.npy of each."""
    os.makedirs(os.path.join(folder, "text_features"), exist_ok=True)
    for split, recs in records.items():
        entries = []
        for i, r in enumerate(recs):
            pid = 1000 * (1 + ["train", "val_seen", "val_unseen"].index(split)) + i
            entries.append({"distance": 1.0, "scan": r["scan"], "path_id": pid,
                            "path": r["path"], "heading": r["heading"],
                            "instructions": [r["instruction"]]})
            words = ["[CLS]"] + r["instruction"].lower().split() + ["[SEP]"]
            np.save(os.path.join(folder, "text_features", f"{pid * 10:06d}.npy"),
                    np.stack([word_vector(w, DIM) for w in words]).astype(np.float32))
        json.dump(entries, open(os.path.join(folder, f"R2R_{split}.json"), "w"))


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    conn = shared_path("matterport", "connectivity")
    recs = synthetic_split_records(conn, SYNTHETIC_TRAIN_SCANS[:3], SYNTHETIC_UNSEEN_SCANS[:1],
                                   (("train", 24, 0), ("val_seen", 8, 1), ("val_unseen", 8, 2)))
    scans = sorted({r["scan"] for split in recs.values() for r in split})
    graph, nodes, scan_of = load_matterport_graph(conn, scans)
    root = tmp_path_factory.mktemp("paper")
    manual = str(root / "rxr")
    write_release(manual, graph, nodes, recs, dim=DIM, cross_translations=True)
    feats = np.random.default_rng(0).normal(size=(len(nodes.ids), 36, 8)).astype(np.float32)
    tsv = str(root / "img_features.tsv")
    vf.write_tsv(tsv, nodes.ids, feats)
    # panorama centres: the connectivity poses moved by up to 0.5 m, so distances differ
    centres = np.asarray(graph.positions, np.float64) + np.random.default_rng(1).uniform(
        -0.5, 0.5, (len(nodes.ids), 3))
    houses = str(root / "house")
    for s in scans:
        idx = [i for i, v in enumerate(nodes.ids) if v.startswith(s + "/")]
        write_house(os.path.join(houses, s, "house_segmentations", f"{s}.house"),
                    [nodes.ids[i].split("/")[1] for i in idx], centres[idx])
    r2r = str(root / "r2r")
    r2r_recs = synthetic_split_records(conn, SYNTHETIC_TRAIN_SCANS[:3], SYNTHETIC_UNSEEN_SCANS[:1],
                                       (("train", 16, 5), ("val_unseen", 6, 6)))
    write_r2r(r2r, r2r_recs)
    return dict(manual=manual, recs=recs, tsv=tsv, houses=houses, r2r=r2r, r2r_recs=r2r_recs,
                conn=conn, graph=graph, nodes=nodes, scan_of=scan_of, centres=centres,
                tfds=str(root / "tfds"))


def paper_config(release, name="paper", **overrides):
    import importlib
    c = importlib.import_module(f"experiments.rxr.configs.{name}").get_config()
    settings = dict(num_steps=2, eval_every=2, log_every=1, batch_size=8, num_devices=1,
                    model__embed_dim=16, model__hidden=32, model__value_hidden=8,
                    data__manual_dir=release["manual"], data__tfds_dir=release["tfds"],
                    data__connectivity_dir=release["conn"], data__features=release["tsv"],
                    data__house_dir=release["houses"],
                    data__features_cache=os.path.join(release["tfds"], "view_cache"),
                    eval__baselines="random_walk", eval__baseline_seeds=1)
    return override(c, **{**settings, **overrides})


def test_the_paper_configs_are_the_papers_settings():
    from experiments.rxr.configs import (paper, paper_grounding, paper_mono, paper_multitask,
                                         paper_xlate, rxr)
    c = paper.get_config()
    assert (c.data.tfds_config, c.data.train_annotators, c.data.eval_annotators) == (
        "guide_follower", "", "guide")                       # G and F paths, scored on G
    assert (c.loss.visual_grounding, c.loss.textual_grounding) == (0.0, 0.0)   # exp. 4
    assert (c.data.dev_split, c.data.eval_splits) == ("val_seen", "val_unseen")
    assert c.data.stream and c.data.text_features and c.data.features == ""
    assert (c.optim.learning_rate, c.batch_size, c.num_steps) == (1e-4, 32, 100_000)
    # where the paper is silent, VALAN's (tests/rxr/test_valan.py has the rest)
    assert (c.model.arch, c.loss.pg, c.optim.schedule) == ("rcm", "actor_critic", "exponential")
    assert c.loss.bc_every == 2 and not c.model.structure_features and c.eval.human
    assert rxr.get_config() == c
    assert paper_mono.get_config().data.languages == "en"
    g = paper_grounding.get_config()
    assert (g.loss.visual_grounding, g.loss.textual_grounding, g.loss.grounding_steps) == (
        1.0, 0.0, "on_gold_path")
    assert paper_xlate.get_config().data.tfds_config == "guide_follower_xlate"
    m = paper_multitask.get_config()
    assert (m.data.multitask, m.data.multitask_share) == ("r2r", -1.0)


def test_refused_without_view_features_or_with_a_reported_dev_split(release, tmp_path):
    from experiments.rxr import train
    with pytest.raises(ValueError, match=r"model.name='full' sees the views, and data.features "
                                         r"is empty: set --config.data.features to view "
                                         r"features: a Matterport3DSimulator TSV"):
        train.train_and_evaluate(paper_config(release, data__features=""), str(tmp_path / "a"))
    with pytest.raises(ValueError, match=r"data.dev_split 'val_seen' selects the model and is "
                                         r"also reported"):
        train.train_and_evaluate(paper_config(release, data__eval_splits="val_seen,val_unseen"),
                                 str(tmp_path / "b"))
    with pytest.raises(ValueError, match=r"eval.human scores the follower annotations, and "
                                         r"rxr/guide has none"):
        train.train_and_evaluate(paper_config(release, data__tfds_config="guide"),
                                 str(tmp_path / "c"))
    assert not os.listdir(tmp_path)                         # nothing written


def test_cross_translations_pair_each_guide_with_its_translations(release):
    manual = release["manual"]
    cfg = rb.Builder.builder_configs["guide_follower_xlate"]
    by_split = rb.split_records(cfg, manual)
    train = by_split["train"]
    guides = [r for r in train if r["annotator"] == "guide" and not r["translated_from"]]
    followers = [r for r in train if r["annotator"] == "follower"]
    xl = [r for r in train if r["translated_from"]]
    assert len(guides) == len(followers) == 24 and len(xl) == 2 * 24
    assert all(not r["translated_from"] for s in ("val_seen", "val_unseen") for r in by_split[s])
    g = guides[0]
    mine = [r for r in xl if r["instruction_id"] == g["instruction_id"]]
    own = g["language"].split("-")[0]
    assert sorted(r["language"] for r in mine) == sorted(
        {"en": "en", "hi": "hi-IN", "te": "te-IN"}[x] for x in ("en", "hi", "te") if x != own)
    for r in mine:
        assert r["path"] == g["path"] and r["translated_from"] == g["language"]
        assert r["step_views"] is None and r["step_subwords"] is None
        lang = r["language"].split("-")[0]
        path = os.path.join(manual, "text_features", "rxr_train",
                            f"{g['instruction_id']:06d}_{lang}_text_features.npz")
        np.testing.assert_array_equal(r["text_features"], rr.load_text_features(path))
        assert r["instruction"].split()[0].startswith(f"{lang}:")
    assert len({rb.example_key(r) for r in train}) == len(train)


def test_human_followers_are_hand_checked(release):
    """The followers of the fixture's val_unseen walk the guide's path, one step short for every
    other instruction: each scored against its guide's path by the definitions (numpy, with
    distances between the `.house` panorama centres)."""
    recs = rr.read_rxr_split(release["manual"], "val_unseen", ("guide", "follower"))
    graph, nodes, scan_of = release["graph"], release["nodes"], release["scan_of"]
    lengths = house.edge_lengths(graph, house.panorama_centres(
        release["houses"], nodes, sorted({n.split("/")[0] for n in nodes.ids})))
    metric_graph = graph.replace(lengths=lengths)
    dist = csgraph.shortest_path(adjacency(metric_graph, weighted=True), method="D")
    got = human_followers(recs, recs, nodes, geodesic_table(metric_graph, scan_of))
    guide = {r["instruction_id"]: r for r in recs if r["annotator"] == "guide"}
    per = {}
    for f in (r for r in recs if r["annotator"] == "follower"):
        g = guide[f["instruction_id"]]
        ids = lambda r: nodes.lookup([f"{r['scan']}/{v}" for v in r["path"]], "viewpoint")
        m = path_metrics_np(list(ids(f)), list(ids(g)), dist)
        per.setdefault(g["language"].split("-")[0], []).append(m)
        per.setdefault("all", []).append(m)
    assert got["followers"] == len(per["all"]) == 8
    short = sum(len(f["path"]) < len(guide[f["instruction_id"]]["path"])
                for f in recs if f["annotator"] == "follower")
    assert 0 < short < 8                        # some followers stop early: not all perfect
    for k in ("pl", "ne", "sr", "spl", "ndtw", "sdtw"):
        assert got[k] == pytest.approx(np.mean([m[k] for m in per["all"]]), abs=1e-4), k
        for lang, rows in per.items():
            if lang != "all":
                assert got["per_language"][lang][k] == pytest.approx(
                    np.mean([m[k] for m in rows]), abs=1e-4)
    assert got["ndtw"] < 1 and got["sr"] > 0


def test_house_centres_give_the_edge_lengths(release, tmp_path):
    graph, nodes = release["graph"], release["nodes"]
    scans = sorted({n.split("/")[0] for n in nodes.ids})
    centres = house.panorama_centres(release["houses"], nodes, scans)
    np.testing.assert_allclose(centres, release["centres"], atol=1e-5)
    lengths = house.edge_lengths(graph, centres)
    nb = np.asarray(graph.neighbors)
    a, k = np.argwhere(nb >= 0)[3]
    assert lengths[a, k] == pytest.approx(np.linalg.norm(centres[nb[a, k]] - centres[a]), abs=1e-5)
    assert (lengths[nb < 0] == 0).all()
    # bad files are named by file and line; a missing scan names the expected path
    bad = tmp_path / "s" / "house_segmentations" / "s.house"
    write_house(str(bad), ["v0"], [[0, 0, 0]])
    text = bad.read_text().replace("P v0 0 -1 0 0.000000", "P v0 0 -1 0 x")
    bad.write_text(text)
    with pytest.raises(house.HouseFormatError, match=r"s.house:3: field 'px py pz' is"):
        house.read_panorama_centres(str(bad))
    with pytest.raises(FileNotFoundError, match="no .house file of 1 scans .* "
                                                "nope/house_segmentations/nope.house"):
        house.panorama_centres(str(tmp_path), nodes, ["nope"])


def test_the_mixture_draws_the_second_dataset_at_its_share():
    idx = mixture_index(100, 30, 0.25, seed=0)
    assert (idx[:100] == np.arange(100)).all() and len(idx) == 100 + 33
    assert set(idx[100:]) == set(range(100, 130))          # every second row, once at least
    assert np.mean(idx >= 100) == pytest.approx(0.25, abs=0.01)
    assert (mixture_index(100, 30, 0.0, 0) == np.arange(100)).all()
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        mixture_index(10, 10, 1.0, 0)


@pytest.mark.slow
def test_the_paper_agent_with_visual_grounding_runs_on_the_release(release, tmp_path):
    """`configs/paper_grounding.py` (exp. 6 = exp. 4 + the visual loss on gold-path steps) for
    two steps: guide and follower paths trained on, text features streamed, view features from
    the TSV, the checkpoint selected on val_seen, val_unseen reported with the human row and
    distances between panorama centres."""
    from experiments.rxr import train
    from ttw_jax.core.stream import LazyRows
    c = paper_config(release, "paper_grounding")
    res = train.train_and_evaluate(c, str(tmp_path / "run"))
    assert res["dev"]["split"] == "val_seen" and "val_seen" not in res
    assert res["best_step"] == 2 and res["distances"] == "house panorama centres"
    unseen = res["val_unseen"]
    assert unseen["episodes"] == 8 and set(unseen) >= {"full", "random_walk", "human"}
    assert unseen["human"]["followers"] == 8 and 0 < unseen["human"]["ndtw"] < 1
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train_lines = [x for x in lines if "train/visual_grounding_loss" in x]
    assert train_lines and all(x["train/visual_grounding_loss"] > 0 for x in train_lines)
    assert all(x["train/value_loss"] >= 0 and x["train/learning_rate"] <= 1e-4
               for x in train_lines)                   # VALAN's learner and schedule
    assert not any("train/textual_grounding_loss" in x for x in lines)
    data = train.load_data(c, str(tmp_path / "run"))
    eps = data["episodes"]["train"]
    assert isinstance(eps["text_features"], LazyRows) and eps["text_features"].shape[-1] == DIM
    assert sorted(set(eps["annotator"].tolist())) == [rr.ANNOTATORS.index("guide"),
                                                      rr.ANNOTATORS.index("follower")]
    assert len(eps["start"]) == 2 * 24
    assert data["features"].dtype == np.uint16 and data["features"].shape[-1] == 8   # bf16 bits


@pytest.mark.slow
def test_multitask_with_cross_translations_runs_on_the_releases(release, tmp_path):
    """`configs/paper_multitask.py` on `guide_follower_xlate` beside the R2R files for two
    steps: RxR's train split with its translations and R2R's train split mixed at a share of
    0.4; RxR val_unseen and R2R val_unseen reported apart."""
    from experiments.rxr import train
    c = paper_config(release, "paper_multitask", data__tfds_config="guide_follower_xlate",
                     data__multitask_dir=release["r2r"], data__multitask_share=0.4,
                     data__stream=False)
    os.makedirs(tmp_path / "data")
    data = train.load_data(c, str(tmp_path / "data"))
    eps = data["episodes"]["train"]
    n_rxr = 24 * 4                                 # guides, followers, two translations each
    r2r = rr.ANNOTATORS.index("r2r")
    assert len(eps["start"]) == n_rxr + 16 and (eps["annotator"][n_rxr:] == r2r).all()
    assert np.mean(eps["annotator"][data["mixture"]] == r2r) == pytest.approx(0.4, abs=0.02)
    assert set(data["episodes"]) >= {"val_seen", "val_unseen", "r2r/val_unseen"}
    res = train.train_and_evaluate(c, str(tmp_path / "run"))
    assert res["val_unseen"]["episodes"] == 8 and res["r2r/val_unseen"]["episodes"] == 6
    assert "human" in res["val_unseen"] and "human" not in res["r2r/val_unseen"]
    assert res["r2r/val_unseen"]["full"]["predictions"] == ["predictions_r2r_val_unseen.json"]
    assert (tmp_path / "run" / "predictions_r2r_val_unseen.json").exists()
