"""The paper configs of the Touchdown experiments run end to end: a short run at the paper's
model sizes, on the synthetic data (the real data need the release's files). The navigation
paper config runs through its launcher as `configs/rgb.py` (the paper's settings, the official
CNN, RGB views) in `tests/touchdown/test_extraction.py`."""
import importlib

import pytest

from tests.helpers import override


@pytest.mark.slow
@pytest.mark.parametrize("name, changes", [
    # Concat at the paper's text sizes (the cheapest model: the test is of the config and the
    # pipeline; the models' own tests cover their layers), evaluated on the tune split only
    ("touchdown_sdr", dict(data__tfds_config="synthetic_sdr", data__eval_splits="",
                           model__name="concat", batch_size=8)),
])
def test_paper_config_runs_end_to_end(name, changes, tfds_dir, tmp_path):
    paper = importlib.import_module(f"experiments.{name}.configs.paper").get_config()
    config = override(paper, num_steps=2, eval_every=2, log_every=1, data__tfds_dir=tfds_dir,
                      **changes)
    results = importlib.import_module(f"experiments.{name}.train").train_and_evaluate(
        config, str(tmp_path))
    assert results["best_step"] == 2
    assert "test" in results if name == "touchdown_nav" else "tune" in results
