"""Every Touchdown experiment end to end on one folder in the official release's layout, written
by the project's synthetic generators: `data/{train,dev,test}.json` (JSON lines, navigation and
SDR fields), `graph/nodes.txt` and `graph/links.txt`, and one feature map per panorama,
`data/features/<panoid>.npy` [H, W, C] float16, from which `convert_features` writes the
navigation table as the README's commands do. Navigation trains on the release with that table,
SDR streams the feature files and checks early stopping once per epoch (the paper's cadence),
and the complete task pipelines the navigation run with an SDR stage it trains on the release's
views (`data.views=release`, through the `sdr` TFDS config)."""
import json
import math
import os

import numpy as np
import pytest

from experiments.touchdown_full import train as full_train
from experiments.touchdown_full.configs import default as full_default
from experiments.touchdown_nav import convert_features, train as nav_train
from experiments.touchdown_sdr import train as sdr_train
from tests.experiments.trainers import TRAINERS
from ttw_datasets.touchdown import touchdown_dataset_builder as td_builder
from ttw_jax.touchdown import records as td_records
from ttw_jax.touchdown.features import synthetic_pano_images
from ttw_jax.touchdown.graph import load_touchdown_graph, write_graph_files

# end to end on release-format files; a few steps each, where compilation dominates
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("fast_compile")]

SHAPE = (6, 24, 8)   # [H, W, C] of each panorama's feature map (the release: 100 x 464 x 128)
ROUTES = {"train": 24, "dev": 6, "test": 6}


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> dict:
    """{data, graph, table}: the release's folders and the navigation table converted from its
    feature files."""
    root = tmp_path_factory.mktemp("touchdown_release")
    data, graph = root / "data", str(root / "graph")
    cfg = td_builder.Builder.builder_configs["synthetic_navigation"]
    write_graph_files(graph, *cfg.grid())
    records = td_builder.synthetic_split_records(cfg)
    data.mkdir()
    for split, n in ROUTES.items():
        (data / f"{split}.json").write_text("".join(json.dumps(r) + "\n"
                                                    for r in records[split][:n]))
    pano_graph, nodes = load_touchdown_graph(graph)
    os.makedirs(data / "features")
    for panoid, fmap in zip(nodes.ids, synthetic_pano_images(pano_graph, *SHAPE)):
        np.save(data / "features" / f"{panoid}.npy", fmap)
    table = str(root / "features_rows.npz")
    assert convert_features.convert(str(data / "features"), graph, table) == len(nodes.ids)
    return {"data": str(data), "graph": graph, "table": table}


def sdr_views(release, split) -> int:
    """The views of the split's records in which Touchdown is visible."""
    with open(os.path.join(release["data"], f"{split}.json")) as f:
        return sum(len(td_records.sdr_examples(json.loads(line))) for line in f)


def nav_config(release, tfds_dir):
    return TRAINERS["touchdown_nav"].config(
        tfds_dir, data__tfds_config="navigation", data__manual_dir=release["data"],
        data__graph_dir=release["graph"], data__features=release["table"], data__max_tokens=0,
        data__eval_splits="dev,test", num_steps=2, eval_every=2, log_every=1, batch_size=8,
        train_horizon=8, eval__horizon=4, model__text_hidden=16, model__hidden=16,
        eval__baselines="stop", eval__num_figures=0)


def sdr_config(release, tfds_dir, **overrides):
    """The SDR trainers' tiny config on the release, early stopping checked once per epoch (the
    paper's cadence); streamed or through the `sdr` TFDS config, the same programs."""
    return TRAINERS["touchdown_sdr"].config(
        tfds_dir, data__manual_dir=release["data"], data__max_tokens=0,
        data__feature_shape=",".join(map(str, SHAPE)), eval_every_epochs=1, num_steps=12,
        write_plots=False, eval__baselines="center", **overrides)


def test_every_touchdown_experiment_runs_on_one_release_folder(release, tmp_path, monkeypatch):
    tfds_dir = str(tmp_path / "tfds")

    # navigation on the release, with the table converted from the feature files
    nav_dir = str(tmp_path / "nav")
    nav = nav_train.train_and_evaluate(nav_config(release, tfds_dir), nav_dir)
    assert nav["best_step"] == 2
    assert nav["dev"]["episodes"] == ROUTES["dev"] and nav["test"]["episodes"] == ROUTES["test"]
    assert nav["provenance"]["perception"]["file"] == release["table"]

    # SDR streaming the feature files; early stopping checked once per epoch, as the paper does
    sdr = sdr_train.train_and_evaluate(
        sdr_config(release, tfds_dir, data__stream=True), str(tmp_path / "sdr"))
    tune_views = sdr["tune"]["examples"]
    epoch = math.ceil((sdr_views(release, "train") - tune_views) / 16)
    assert 1 < epoch < 6 and sdr["eval_every"] == epoch
    with open(tmp_path / "sdr" / "metrics.jsonl") as f:
        evaluated = [m["step"] for m in map(json.loads, f) if "tune/acc_80" in m]
    assert evaluated == [s for s in range(1, 13) if s % epoch == 0 or s == 12]
    assert sdr["test"]["examples"] == sdr_views(release, "test")
    assert sdr["provenance"]["perception"]["file"] == os.path.join(release["data"], "features")

    # the complete task: the navigation run, then an SDR stage trained here on the release's
    # views through the `sdr` TFDS config (whose feature maps are the release's 100 x 464 x 128)
    monkeypatch.setattr(td_builder.Builder.builder_configs["sdr"], "feature_shape", SHAPE)
    c = full_default.get_config()
    c.nav_workdir = nav_dir
    c.sdr = full_default.stage_defaults(sdr_config(release, tfds_dir, data__tfds_config="sdr"))
    c.data.views, c.data.split = "release", "test"
    c.data.manual_dir, c.data.graph_dir = release["data"], release["graph"]
    c.data.features, c.data.tfds_dir = release["table"], tfds_dir
    c.write_plots, c.num_devices = False, 1
    full = full_train.train_and_evaluate(c, str(tmp_path / "full"))
    with open(tmp_path / "full" / "sdr" / "results.json") as f:
        assert json.load(f)["eval_every"] == epoch    # the same views as the streamed run's
    assert full["nav_best_step"] == nav["best_step"] and full["sdr_best_step"] in evaluated
    assert full["episodes"] == ROUTES["test"] and full["views"] == sdr["test"]["examples"]
    assert full["gold_navigation"]["found"] == 1.0    # every route's main view is at its goal
    for m in (full["full_task"], full["gold_navigation"]):
        assert 0 <= m["acc_40"] <= m["acc_80"] <= m["acc_120"] <= m["found"]
    assert full["provenance"]["data"]["sdr"]["folder"] == release["data"]
