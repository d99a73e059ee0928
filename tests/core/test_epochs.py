"""Budgets counted in epochs (`ttw_jax.core.train.epochs`): worked examples."""
import ml_collections
import pytest

from ttw_jax.core.train.epochs import in_steps, steps_per_epoch


def test_steps_per_epoch_rounds_up_and_needs_a_training_set():
    assert steps_per_epoch(50, 16) == 4          # 16 + 16 + 16 + 2 (the last batch wraps)
    assert steps_per_epoch(48, 16) == 3
    assert steps_per_epoch(1, 16) == 1
    for empty in (0, None):
        with pytest.raises(ValueError, match="needs the size of its training set"):
            steps_per_epoch(empty, 16)


def test_in_steps_sets_the_named_keys_on_a_copy():
    c = ml_collections.ConfigDict({"num_steps": 100, "eval_every": 10, "batch_size": 16})
    out = in_steps(c, 12, num_steps=3, eval_every=1)
    assert (out.num_steps, out.eval_every, out.batch_size) == (36, 12, 16)
    assert (c.num_steps, c.eval_every) == (100, 10)      # the config itself is unchanged
