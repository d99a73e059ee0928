"""`config.dtype=bfloat16` in every trainer: its train step, traced (nothing trains), does its
dense work on bfloat16 operands (`experiments.benchmarks.precision_check --trace_only`; the
losses and a short run of each trainer in both dtypes are that script's full mode)."""
import pytest

from experiments.benchmarks.precision_check import NAMES, bf16_share


@pytest.mark.parametrize("name", NAMES)
def test_every_trainer_steps_in_bfloat16(name, tfds_dir, tmp_path):
    by = bf16_share(name, str(tmp_path), tfds_dir)
    total = sum(by.values())
    assert total > 0 and by.get("bfloat16", 0) >= 0.99 * total, by
