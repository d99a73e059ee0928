"""What produced a Touchdown result (issue 53): synthetic perception beside the release's records
is refused unless `data.allow_synthetic_perception`, and the results.json of the navigation and
SDR launchers (and the pipeline's provenance) say what they read."""
import json
import os

import pytest

from experiments.touchdown_full import train as full_train
from experiments.touchdown_full.configs import default as full_default, paper as full_paper
from experiments.touchdown_nav import train as nav_train
from experiments.touchdown_nav.configs import baselines as nav_baselines
from experiments.touchdown_sdr import train as sdr_train
from tests.experiments.trainers import TRAINERS
from tests.helpers import override
from ttw_datasets.touchdown import touchdown_dataset_builder as td_builder
from ttw_jax.core.train import provenance as prov
from ttw_jax.touchdown.graph import write_graph_files
from ttw_jax.touchdown.sdr.stream import write_synthetic_release

pytestmark = pytest.mark.usefixtures("fast_compile")   # two-step runs: compilation dominates

FEATURES_REFUSED = r'data.features="" \(synthetic panorama features\) with an official release'
SDR_SHAPE = (10, 56, 8)


@pytest.fixture(scope="module")
def nav_release(tmp_path_factory) -> str:
    """A navigation release in the official layout: synthetic routes as `{train,dev,test}.json`
    (64 / 16 / 16) and their grid as `graph/nodes.txt`, `graph/links.txt`."""
    folder = tmp_path_factory.mktemp("nav_release")
    cfg = td_builder.Builder.builder_configs["synthetic_navigation"]
    records = td_builder.synthetic_split_records(cfg)
    for split, n in (("train", 64), ("dev", 16), ("test", 16)):
        (folder / f"{split}.json").write_text("".join(json.dumps(r) + "\n"
                                                      for r in records[split][:n]))
    write_graph_files(str(folder / "graph"), *cfg.grid())
    return str(folder)


@pytest.fixture(scope="module")
def sdr_release(tmp_path_factory) -> str:
    folder = str(tmp_path_factory.mktemp("sdr_release"))
    write_synthetic_release(folder, 20, seed=2, shape=SDR_SHAPE)
    return folder


def nav_config(release: str, tmp_path, **overrides):
    """The navigation trainers' tiny config on `release` (its own TFDS folder)."""
    return TRAINERS["touchdown_nav"].config(
        str(tmp_path / "tfds"), data__tfds_config="navigation", data__manual_dir=release,
        data__graph_dir=os.path.join(release, "graph"), data__max_tokens=0, **overrides)


def read_provenance(workdir, data: str, perception: str, width) -> dict:
    """results.json's provenance, checked field by field (kinds as given)."""
    res = prov.read_results(os.path.join(workdir, "results.json"))
    assert res["schema_version"] == prov.SCHEMA_VERSION
    p = res["provenance"]
    assert p["data"]["kind"] == data
    assert p["perception"]["kind"] == perception and p["perception"].get("width") == width
    assert p["protocol"] == {"name": "official"} and p["seeds"] == 1 and p["dtype"] == "float32"
    assert p["hidden_splits"] == []      # the release ships every split's references
    assert p["config_hash"] == prov.config_hash(res["config"]) and len(p["config_hash"]) == 16
    code = p["code"]
    assert code["version"] and ("revision" not in code or len(code["revision"]) == 40)
    # the run's devices: its `num_devices` (the tests' tiny configs take 1), else all 8
    assert p["device"]["platform"] == "cpu"
    assert p["device"]["count"] == (res["config"].get("num_devices") or 8)
    return p


def test_navigation_refuses_synthetic_features_beside_the_release(nav_release, tmp_path):
    with pytest.raises(ValueError, match=FEATURES_REFUSED + r".*--config\.data\."
                                         r"allow_synthetic_perception=True"):
        nav_train.train_and_evaluate(nav_config(nav_release, tmp_path), str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()      # refused before the run starts
    # the baselines see no features; named features, or synthetic routes, are no stand-in
    nav_train.check_perception(override(nav_baselines.get_config(), data__manual_dir=nav_release))
    nav_train.check_perception(nav_config(nav_release, tmp_path, data__features="f.npz"))
    nav_train.check_perception(TRAINERS["touchdown_nav"].config(str(tmp_path)))


def test_navigation_with_the_flag_says_synthetic_perception(nav_release, tmp_path, capsys):
    c = nav_config(nav_release, tmp_path, data__allow_synthetic_perception=True, num_steps=2,
                   eval_every=2, log_every=1, batch_size=8, train_horizon=8, eval__horizon=4,
                   model__text_hidden=16, model__hidden=16, eval__baselines="",
                   eval__num_figures=0, eval__write_predictions=False)
    nav_train.train_and_evaluate(c, str(tmp_path / "run"))
    title = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert title and title[-1].startswith("[SYNTHETIC PERCEPTION] data: " + nav_release)
    p = read_provenance(tmp_path / "run", "release", "synthetic", c.data.feature_dim)
    assert p["data"]["folder"] == nav_release
    assert p["data"]["fingerprint"] == prov.fingerprint(nav_release)
    assert p["data"]["graph"]["folder"] == c.data.graph_dir
    assert p["perception"]["seed"] == c.seed and prov.tags(p) == ["synthetic perception"]
    # a named feature file is the perception, with its fingerprint and width
    (tmp_path / "f.npz").write_bytes(b"features")
    named = override(c, data__features=str(tmp_path / "f.npz"))
    assert nav_train.perception_provenance(named, 128) == {
        "kind": "file", "file": str(tmp_path / "f.npz"),
        "fingerprint": prov.fingerprint(tmp_path / "f.npz"), "width": 128}
    baselines = override(nav_baselines.get_config(), data__manual_dir=nav_release,
                         data__graph_dir=c.data.graph_dir)
    assert nav_train.run_provenance(baselines, None)["perception"] == prov.NONE


def test_sdr_results_name_the_release_and_its_feature_files(sdr_release, tmp_path, capsys):
    c = TRAINERS["touchdown_sdr"].config(str(tmp_path / "tfds"), data__stream=True,
                                         data__manual_dir=sdr_release, num_steps=2, eval_every=2,
                                         data__feature_shape=",".join(map(str, SDR_SHAPE)),
                                         data__max_tokens=0, write_plots=False,
                                         eval__baselines="", eval__write_predictions=False)
    sdr_train.train_and_evaluate(c, str(tmp_path / "run"))
    out = capsys.readouterr().out
    assert f"\ndata: {sdr_release} [" in "\n" + out and "SYNTHETIC" not in out
    p = read_provenance(tmp_path / "run", "release", "file", SDR_SHAPE[-1])
    assert p["data"]["folder"] == sdr_release
    assert p["perception"]["file"] == os.path.join(sdr_release, "features")
    assert p["perception"]["fingerprint"] == prov.fingerprint(os.path.join(sdr_release, "features"))
    # the synthetic scenes come with synthetic descriptions: both say so, nothing to refuse
    synthetic = sdr_train.run_provenance(TRAINERS["touchdown_sdr"].config(str(tmp_path)), 12)
    assert synthetic["data"] == {"kind": "synthetic", "seed": 0}
    assert synthetic["perception"] == {"kind": "synthetic", "seed": 0, "width": 12}
    assert prov.tags(synthetic) == ["synthetic data", "synthetic perception"]
    baselines = override(c, mode="baselines", data__stream=False)
    assert sdr_train.run_provenance(baselines, None)["perception"] == prov.NONE


def test_full_task_refuses_synthetic_perception_and_records_both_stages(nav_release, sdr_release,
                                                                         tmp_path):
    graph = os.path.join(nav_release, "graph")
    paper = override(full_paper.get_config(), data__manual_dir=nav_release, data__graph_dir=graph)
    with pytest.raises(ValueError, match=FEATURES_REFUSED):
        full_train.train_and_evaluate(paper, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()
    (tmp_path / "f.npz").write_bytes(b"features")
    c = full_default.get_config()
    override(c.nav, data__tfds_config="navigation", data__manual_dir=nav_release,
             data__graph_dir=graph, data__features=str(tmp_path / "f.npz"))
    with pytest.raises(ValueError, match=r"data.views=synthetic \(synthetic SDR scenes\) with an "
                                         r"official release"):
        full_train.check_perception(c, full_train.stage_config(c, "nav"))
    c.data.allow_synthetic_perception = True
    nav_cfg = full_train.stage_config(c, "nav")
    full_train.check_perception(c, nav_cfg)
    assert nav_cfg.data.allow_synthetic_perception     # the flag covers the navigation stage

    # synthetic scenes on the release's routes: synthetic on top, the agent's features below
    sdr_cfg = override(full_train.stage_config(c, "sdr"), dtype="bfloat16")
    p = full_train.run_provenance(c, nav_cfg, sdr_cfg, 64, 12)
    assert p["data"]["kind"] == "release" and p["data"]["folder"] == nav_release
    assert p["perception"]["kind"] == "synthetic" and p["perception"]["seed"] == c.data.scene_seed
    assert p["perception"]["navigation"]["kind"] == "file"
    assert p["perception"]["navigation"]["width"] == 64
    assert p["dtype"] == "navigation float32, sdr bfloat16"
    assert prov.tags(p) == ["synthetic perception"]
    # the release's views: the agent's feature file on top, the SDR feature files under "sdr"
    c.data.views = "release"
    sdr_cfg = override(sdr_cfg, data__tfds_config="sdr", data__manual_dir=sdr_release,
                       dtype="float32")
    p = full_train.run_provenance(c, nav_cfg, sdr_cfg, 64, SDR_SHAPE[-1])
    assert p["perception"]["kind"] == "file" and p["perception"]["width"] == 64
    assert p["perception"]["sdr"]["file"] == os.path.join(sdr_release, "features")
    assert p["data"]["sdr"]["folder"] == sdr_release and p["dtype"] == "float32"
    assert prov.tags(p) == []
