"""`config.dtype=bfloat16` in every trainer: its train step, traced (nothing trains), does its
dense work on bfloat16 operands and every softmax (every `exp`) in float32 (`experiments.benchmarks.precision_check --trace_only`; the
losses and a short run of each trainer in both dtypes are that script's full mode)."""
import pytest

from experiments.benchmarks.precision_check import NAMES, bf16_share


@pytest.mark.parametrize("name", NAMES)
def test_every_trainer_steps_in_bfloat16(name, tfds_dir, tmp_path):
    by, exps = bf16_share(name, str(tmp_path), tfds_dir)
    total = sum(by.values())
    assert total > 0 and by.get("bfloat16", 0) >= 0.99 * total, by
    assert exps.get("float32", 0) > 0 and set(exps) == {"float32"}, exps
