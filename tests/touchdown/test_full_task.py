"""The complete Touchdown task: the scoring rule on hand-computed examples, the synthetic scenes
at the routes' ends, and the pipeline end to end (both stages trained, then reused)."""
import json
import os

import numpy as np
import pytest

from tests.helpers import override
from ttw_datasets.touchdown import touchdown_dataset_builder as td_builder
from ttw_jax.touchdown import full_task
from ttw_jax.touchdown.sdr.synthetic import synthetic_sdr_examples


def test_an_episode_finds_touchdown_only_where_it_is_visible_and_within_the_threshold():
    # Views: route 7 at panoramas a (main), b (pre); route 8 at c (main).
    view_route = np.array([7, 7, 8])
    view_pano = ["a", "b", "c"]
    view_distance = np.array([30.0, 100.0, 79.99])
    # Episode 0 (route 7) stops at a; episode 1 (route 8) at a, which is route 7's view, not
    # its own; episode 2 (route 7) at b; episode 3 (route 8) at c.
    stop = full_task.stop_views(["a", "a", "b", "c"], np.array([7, 8, 7, 8]), view_route,
                                view_pano)
    np.testing.assert_array_equal(stop, [0, -1, 1, 2])
    d = full_task.full_task_distances(stop, view_distance)
    np.testing.assert_array_equal(d, [30.0, np.inf, 100.0, 79.99])
    m = full_task.full_task_metrics(d)
    # within 40: episode 0; within 80: 0 and 3 (79.99 < 80); within 120: 0, 2, 3
    assert m["acc_40"] == 0.25 and m["acc_80"] == 0.5 and m["acc_120"] == 0.75
    assert m["found"] == 0.75
    assert m["distance"] == pytest.approx((30 + 100 + 79.99) / 3)


def test_strictly_below_the_threshold_and_no_view_anywhere():
    m = full_task.full_task_metrics(np.array([80.0, 40.0]))
    assert m["acc_80"] == 0.5 and m["acc_40"] == 0.0 and m["acc_120"] == 1.0
    none = full_task.full_task_metrics(np.array([np.inf, np.inf]))
    assert none["found"] == 0.0 and none["acc_120"] == 0.0 and none["distance"] is None


def test_synthetic_scenes_sit_at_the_routes_end_and_its_neighbours():
    cfg = td_builder.Builder.builder_configs["synthetic_navigation"]
    _, links = cfg.grid()
    records = td_builder.synthetic_split_records(cfg)["test"][:40]
    views = full_task.synthetic_goal_views(records, links, seed=5, shape=(10, 56, 4))
    scenes = synthetic_sdr_examples(len(records), 5, 10, 56, 4)
    out_edges = {}
    for start, _, end in links:
        out_edges.setdefault(start, []).append(end)
    # every scene view is kept (synthetic routes have >= 2 panoramas; grid goals have an
    # out-neighbour off the route), in the scenes' order
    assert len(views["route_id"]) == len(scenes)
    assert views["features"].shape == (len(scenes), 10, 56, 4)
    for i, ex in enumerate(scenes):
        rec = records[ex["route_id"]]
        route = rec["route_panoids"]
        assert views["route_id"][i] == rec["route_id"] and views["which"][i] == ex["which"]
        assert views["text"][i] == ex["td_location_text"]
        np.testing.assert_array_equal(views["features"][i], ex["features"])
        np.testing.assert_allclose(views["center"][i], [ex["center_x"], ex["center_y"]])
        pano = views["panoid"][i]
        if ex["which"] == "main":
            assert pano == route[-1]
        elif ex["which"] == "pre":
            assert pano == route[-2]
        else:
            assert pano in out_edges[route[-1]] and pano not in route
    assert set(views["which"]) == {"main", "pre", "post"}


def test_a_finished_run_from_before_a_key_existed_still_loads(tmp_path):
    from experiments.touchdown_full import train
    from experiments.touchdown_full.configs import default
    from experiments.touchdown_nav.configs import default as nav_default
    saved = nav_default.get_config().to_dict()
    saved["model"]["hidden"] = 48
    del saved["model"]["image_encoder"]          # an older run's config
    saved["model"]["retired_key"] = 1            # a key today's config no longer has
    with open(tmp_path / "config.json", "w") as f:
        json.dump(saved, f)
    config = default.get_config()
    config.nav_workdir = str(tmp_path)
    config.data.graph_dir = "/graphs"
    nav = train.stage_config(config, "nav")
    assert nav.model.hidden == 48 and nav.model.image_encoder == "table"
    assert "retired_key" not in nav.model and nav.data.graph_dir == "/graphs"


def test_one_dtype_profile_window_and_device_count_for_both_stages(tmp_path):
    """`dtype`, `profile_steps` and `num_devices` are the pipeline's: the stages trained here take
    them (their sections have none, and the launcher names the key to use for the first two), a
    finished run keeps its own dtype, and a bad value is refused before any work."""
    from experiments.touchdown_full import train
    from experiments.touchdown_full.configs import default, paper
    from experiments.touchdown_nav.configs import default as nav_default
    from ttw_jax.core.train.launch import renamed_config_args
    from ttw_jax.core.train.workdir import check_common

    config = default.get_config()
    config.dtype, config.profile_steps, config.num_devices = "bfloat16", "3,4", 2
    for stage in ("nav", "sdr"):
        held = set(config[stage]) | set(paper.get_config()[stage])
        assert not {"dtype", "profile_steps", "num_devices"} & held
        c = train.stage_config(config, stage)
        assert (c.dtype, c.profile_steps, c.num_devices) == ("bfloat16", "3,4", 2)
        check_common(c)
    _, _, errors = renamed_config_args(["main", "--config.sdr.dtype=bfloat16"], default.RENAMED,
                                       config, default.RENAMED_IN)
    assert errors == ["--config.sdr.dtype: sdr.dtype is now dtype (one for both stages)"]
    with open(tmp_path / "config.json", "w") as f:          # a float32 run, finished
        json.dump(nav_default.get_config().to_dict(), f)
    assert train.stage_config(override(config, nav_workdir=str(tmp_path)), "nav").dtype == "float32"
    for key, bad, refused in (("dtype", "float16", "dtype must be one of"),
                              ("data.views", "both", "data.views must be one of")):
        bad_config = override(default.get_config(), **{key.replace(".", "__"): bad})
        with pytest.raises(ValueError, match=refused):
            train.train_and_evaluate(bad_config, str(tmp_path / "run"))
        assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_pipeline_trains_both_stages_then_reuses_them(tfds_dir, tmp_path):
    from experiments.touchdown_full import train
    from experiments.touchdown_full.configs import default
    from tests.experiments.trainers import TRAINERS

    config = default.get_config()
    config.nav = TRAINERS["touchdown_nav"].config(tfds_dir, data__eval_splits="test",
                                                  eval__baselines="", eval__num_figures=0)
    config.sdr = TRAINERS["touchdown_sdr"].config(tfds_dir)
    config.sdr.data.eval_splits = ""
    config.num_panels, config.num_devices = 3, 1
    workdir = str(tmp_path / "full")
    res = train.train_and_evaluate(config, workdir)

    with open(os.path.join(workdir, "nav", "results.json")) as f:
        nav = json.load(f)
    # the agent's navigation is the navigation run's own evaluation of its best parameters
    assert res["nav_best_step"] == nav["best_step"]
    for k in ("tc", "spd", "sed"):
        assert res["navigation"][k] == pytest.approx(nav["test"]["ga"][k], abs=1e-6)
    ft, gold = res["full_task"], res["gold_navigation"]
    # the scenes' views are the goal and its neighbours: finding Touchdown implies TC
    assert ft["found"] <= res["navigation"]["tc"] + 1e-9
    assert gold["found"] == 1.0   # every route has its main view at its goal
    for m in (ft, gold):
        assert 0 <= m["acc_40"] <= m["acc_80"] <= m["acc_120"] <= m["found"]
    assert res["episodes"] == nav["test"]["episodes"] == 200
    assert os.path.exists(os.path.join(workdir, "full_task.png")) == (ft["found"] > 0)
    prov = res["provenance"]   # synthetic routes and scenes (both stages' perception recorded)
    assert prov["data"]["kind"] == "synthetic" and prov["perception"]["kind"] == "synthetic"
    assert prov["perception"]["sdr"] == {"kind": "synthetic", "seed": config.data.scene_seed,
                                         "width": 12}

    # the finished stages reused from another workdir: the same numbers, nothing retrained
    config.nav_workdir = os.path.join(workdir, "nav")
    config.sdr_workdir = os.path.join(workdir, "sdr")
    again = train.train_and_evaluate(config, str(tmp_path / "reuse"))
    for key in ("navigation", "full_task", "gold_navigation"):
        assert again[key] == res[key]
    assert not os.path.exists(tmp_path / "reuse" / "nav")

    config.nav_workdir = str(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="config.json"):
        train.train_and_evaluate(config, str(tmp_path / "missing"))
