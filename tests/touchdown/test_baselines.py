"""The README's baseline table on the 800 real records (horizon 50), pinned: gold actions replayed
through the simulator, Stop and Frequent (deterministic)."""
import pytest

from experiments.touchdown_nav.baselines import run_baselines
from tests.conftest import shared_path


@pytest.mark.slow
def test_gold_stop_and_frequent_on_the_800_records(tmp_path):
    out = run_baselines("navigation", "dev_sample", shared_path("touchdown"),
                        shared_path("touchdown", "graph"), str(tmp_path), horizon=50, seeds=1)
    assert out["episodes"] == 800
    assert out["gold"]["tc_count"] == 799
    assert out["stop"]["tc"] == pytest.approx(4 / 800)
    assert out["stop"]["spd"] == pytest.approx(23.07, abs=0.005)
    assert out["stop"]["sed"] == pytest.approx(0.0007, abs=0.00005)
    assert out["frequent"]["tc"] == pytest.approx(1 / 800)
    assert out["frequent"]["spd"] == pytest.approx(48.81, abs=0.005)
    assert out["frequent"]["sed"] == pytest.approx(0.0001, abs=0.00005)
