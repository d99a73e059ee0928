"""Each launcher's default config (`configs/default.py`) runs a few steps on the real data of
`../shared/data` with only its data flags set (`DATA`: where the files are, which of their
splits to use, and the documented opt-in to synthetic perception where the perception files are
not shipped); the tests set nothing else but the step counts, smaller evaluations and one
device. Token
limits are sized from the data by default (`data.max_tokens=0`) and the value used is in
results.json's `provenance.token_limits`.

Not here, for want of files that `../shared/data` does not hold: touchdown_sdr (the panoramas'
feature maps, `features/<panoid>.npy`: only its refusal is tested) and touchdown_full (the same
maps for its SDR stage, `data.views=release`)."""
import pytest

from experiments.arramon import train as arramon_train
from experiments.arramon.configs import default as arramon_default
from experiments.rxr import train as rxr_train
from experiments.rxr.configs import default as rxr_default
from experiments.touchdown_nav import train as nav_train
from experiments.touchdown_nav.configs import default as nav_default
from experiments.touchdown_sdr import train as sdr_train
from experiments.touchdown_sdr.configs import default as sdr_default
from experiments.ttw_emergent import train as emergent_train
from experiments.ttw_emergent.configs import default as emergent_default
from experiments.ttw_landmarks import train as landmarks_train
from experiments.ttw_landmarks.configs import default as landmarks_default
from experiments.ttw_language import train as language_train
from experiments.ttw_language.configs import default as language_default
from tests.conftest import shared_path
from tests.helpers import override
from ttw_jax.core.train import provenance as prov

# The data flags of each launcher on ../shared/data (paths relative to it; "" the folder itself).
DATA = {
    "touchdown_nav": dict(tfds_config="navigation", manual_dir="touchdown",
                          graph_dir="touchdown/graph", train_split="dev_sample",
                          dev_split="dev_sample", eval_splits="dev_sample",
                          allow_synthetic_perception=True),
    "rxr": dict(tfds_config="r2r", manual_dir="r2r", connectivity_dir="matterport/connectivity",
                dev_split="train_holdout", eval_splits="val_seen",
                allow_synthetic_perception=True),
    "arramon": dict(tfds_config="english", manual_dir="arramon", partition_split="val_seen",
                    train_split="partition_train", dev_split="partition_dev",
                    eval_splits="partition_test", allow_synthetic_perception=True),
    "ttw_emergent": dict(maps_dir="ttw/maps"),
    "ttw_landmarks": dict(maps_dir="ttw/maps", allow_synthetic_perception=True),
    "ttw_language": dict(tfds_config="synthetic_real_maps", manual_dir="ttw/maps"),
}
PATH_KEYS = ("manual_dir", "graph_dir", "connectivity_dir", "maps_dir")
# A few steps of full-sized models, then an evaluation, with XLA's optimisations off (the suite's
# default; `fast_compile` keeps them off where the session turns them on): compiling is most of
# the time in ArraMon and Talk The Walk, and the real-data emergent test took 86 s off against
# 87 s on (experiments/benchmarks/README.md#test-suite-time).
fast_compile = pytest.mark.usefixtures("fast_compile")


def real_config(name: str, default, tfds_dir: str | None = None, **steps):
    """`default.get_config()` with the data flags `DATA[name]` (paths under ../shared/data), the
    TFDS folder `tfds_dir`, one device and `steps` (step counts and evaluation sizes,
    `override`'s keys)."""
    c = default.get_config()
    for key, value in DATA[name].items():
        c.data[key] = shared_path(*value.split("/")) if key in PATH_KEYS else value
    if tfds_dir is not None:
        c.data.tfds_dir = tfds_dir
    c.num_devices = 1    # one of the 8 fake devices (tests/experiments/trainers.py says why)
    return override(c, **steps)


class TestTouchdownNav:
    """One scope of its own: pytest-xdist runs it beside the others."""

    @pytest.mark.slow
    def test_touchdown_nav(self, tmp_path, tfds_dir):
        # eval.batch_size=200: the 800 routes in 4 full chunks rather than 4 of 256 (55 s
        # against 61 s, alone)
        c = real_config("touchdown_nav", nav_default, tfds_dir, num_steps=2, eval_every=2,
                        log_every=1, eval__batch_size=200, eval__baselines="",
                        eval__write_predictions=False)
        res = nav_train.train_and_evaluate(c, str(tmp_path))
        # the longest of the 800 instructions: none is cut (64, the old default, refused 597 of them)
        assert res["provenance"]["token_limits"] == {"data.max_tokens": 456}
        assert "synthetic perception" in prov.tags(res["provenance"])
        assert res["dev_sample"]["episodes"] == 800 and 0 <= res["dev_sample"]["ga"]["tc"] <= 1


@fast_compile
def test_touchdown_sdr_names_the_feature_files_it_lacks(tmp_path, tfds_dir):
    c = sdr_default.get_config()
    c.data.tfds_config, c.data.manual_dir = "sdr", shared_path("touchdown")
    c.data.tfds_dir, c.data.eval_splits = tfds_dir, "dev_sample"
    with pytest.raises(FileNotFoundError, match=r"1808 of 1808 panorama feature files missing.*"
                                                r"features/<panoid>\.npy"):
        sdr_train.train_and_evaluate(c, str(tmp_path))


class TestRxr:
    """One scope of its own: pytest-xdist runs it beside the others."""

    @pytest.mark.slow
    def test_rxr_on_r2r(self, tmp_path, tfds_dir):
        c = real_config("rxr", rxr_default, tfds_dir, num_steps=2, eval_every=2, log_every=1,
                        eval__baselines="", eval__write_predictions=False)
        res = rxr_train.train_and_evaluate(c, str(tmp_path))
        assert res["provenance"]["token_limits"] == {"data.max_tokens": 156}
        assert 0 <= res["val_seen"]["full"]["sr"] <= 1


@fast_compile
class TestArramon:
    """One scope of its own: pytest-xdist runs it beside the others."""

    @pytest.mark.slow
    def test_arramon_on_val_seen(self, tmp_path, tfds_dir):
        # One training step and a smaller evaluation: 10 steps a phase, and the dev and test
        # parts (10% and 20% of 1,065 instances) in chunks of 64 rather than one chunk padded to
        # 256 each (alone: 88 s; 110 s at 20 steps a phase; 124 s at 20 steps and chunks of 256;
        # beside a twin at two training steps: 47 s against 54 s)
        c = real_config("arramon", arramon_default, tfds_dir, num_steps=1, eval_every=1, log_every=1,
                        eval__horizon=10, eval__batch_size=64, eval__baselines="",
                        eval__num_figures=0,
                        eval__perfect_navigation=False)
        res = arramon_train.train_and_evaluate(c, str(tmp_path))
        assert res["provenance"]["token_limits"] == {"data.max_tokens": 108}
        assert 0 <= res["partition_test"]["vl"]["navi_ndtw"] <= 1


@pytest.mark.slow
@fast_compile
def test_ttw_emergent_on_the_real_maps(tmp_path):
    # all 8 devices: its evaluation over every walk of the real maps splits over them (in the
    # suite 46 s on 8, 75 s on 1)
    c = real_config("ttw_emergent", emergent_default, num_steps=2, eval_every=2, log_every=1,
                    full_task__repeats=1, full_task__max_steps=10, write_plots=False,
                    num_devices=0)
    res = emergent_train.train_and_evaluate(c, str(tmp_path))
    assert res["provenance"]["data"]["kind"] == "release"
    assert 0 <= res["test"]["accuracy"] <= 1


@fast_compile
def test_ttw_landmarks_on_the_real_maps(tmp_path):
    c = real_config("ttw_landmarks", landmarks_default, num_epochs=1)
    res = landmarks_train.train_and_evaluate(c, str(tmp_path))
    assert "synthetic perception" in prov.tags(res["provenance"])


@fast_compile
class TestTtwLanguage:
    """One scope of its own: pytest-xdist runs it beside the others."""

    @pytest.mark.slow
    def test_ttw_language_on_the_real_maps(self, tmp_path, tfds_dir):
        stages = {f"{s}__{k}": 1 for s in ("tourist", "guide", "generated", "pg")
                  for k in ("num_steps", "eval_every")}
        # one guide per kind (the default trains 3 contexts x MASC / no MASC and 4 generated Ts, each
        # its own program: 6 minutes of compiling on 2 cores for nothing the data changes)
        c = real_config("ttw_language", language_default, tfds_dir, log_every=1,
                        eval__num_walks=64, eval__num_samples=1, eval__beam_sizes="1",
                        full_task__repeats=1, full_task__max_steps=10, full_task__splits="test",
                        contexts="1", compare_masc=False, generated__Ts="1", **stages)
        res = language_train.train_and_evaluate(c, str(tmp_path))
        # the dialogues of synthetic_real_maps are generated (the release's are not shipped here)
        assert res["provenance"]["data"]["kind"] == "synthetic"