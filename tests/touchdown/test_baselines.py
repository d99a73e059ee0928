"""The navigation README's baseline table on the 800 real records (horizon 50), pinned: the
launcher's `baselines` mode replays the gold actions through the simulator and runs Stop and
Frequent (deterministic)."""
import pytest

from experiments.touchdown_nav import train
from experiments.touchdown_nav.configs import baselines
from tests.conftest import shared_path


@pytest.mark.slow
def test_gold_stop_and_frequent_on_the_800_records(tfds_dir, tmp_path):
    c = baselines.get_config()
    c.data.manual_dir = shared_path("touchdown")
    c.data.graph_dir = shared_path("touchdown", "graph")
    c.data.tfds_dir = tfds_dir
    c.eval.baselines = "stop,frequent"
    out = train.train_and_evaluate(c, str(tmp_path))["dev_sample"]
    assert out["episodes"] == 800
    assert out["gold"]["tc_count"] == 799
    assert out["stop"]["tc"] == pytest.approx(4 / 800)
    assert out["stop"]["spd"] == pytest.approx(23.07, abs=0.005)
    assert out["stop"]["sed"] == pytest.approx(0.0007, abs=0.00005)
    assert out["frequent"]["tc"] == pytest.approx(1 / 800)
    assert out["frequent"]["spd"] == pytest.approx(48.81, abs=0.005)
    assert out["frequent"]["sed"] == pytest.approx(0.0001, abs=0.00005)
