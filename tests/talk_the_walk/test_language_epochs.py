"""Language stages measured in epochs as the released scripts train them (`<stage>.num_epochs`):
the steps, validations and patience they resolve to, an epoch of random walks, the epoch sampler
of the fixed training sets, and the stage summary. The whole trainer runs `configs/paper.py`'s
epochs on a release-format folder in `test_release_e2e.py`."""
import types

import jax
import ml_collections
import numpy as np
import pytest

from experiments.ttw_language import train as nl_train
from experiments.ttw_language.configs import default as nl_default
from ttw_jax.core.train import data_parallel as dp
from ttw_jax.talk_the_walk.language import training_data as nl_data


def test_epochs_resolve_to_steps_one_validation_an_epoch_and_no_early_stop():
    c = nl_default.get_config()
    c.tourist.batch_size, c.tourist.num_epochs = 16, 3
    fit = nl_train.stage_config(c, c.tourist, epoch_size=50)
    assert fit.steps_per_epoch == 4                            # ceil(50 / 16)
    assert (fit.num_steps, fit.eval_every) == (12, 4)
    assert fit.patience == 4 > 3                               # 3 validations: never stops early
    c.tourist.num_epochs = 0                                   # a budget in steps, as before
    fit = nl_train.stage_config(c, c.tourist, epoch_size=50)
    assert (fit.num_steps, fit.eval_every, fit.patience, fit.steps_per_epoch) == (
        c.tourist.num_steps, c.tourist.eval_every, c.patience, 0)
    c.guide.num_epochs = 1
    with pytest.raises(ValueError, match="needs the size of its training set"):
        nl_train.stage_config(c, c.guide)


def test_an_epoch_of_random_walks_is_the_2018_enumeration():
    c = nl_default.get_config()
    table = np.zeros((5, 4, 4, 2), np.int32)
    assert nl_data.walk_epoch_size(c, table, 2) == 5 * 16 * 4 ** 2
    assert nl_data.walk_epoch_size(c, table, 0) == 5 * 16
    c.data.orientation_aware = True                            # 4 orientations, 3 actions
    assert nl_data.walk_epoch_size(c, table, 1) == 5 * 16 * 4 * 3


def test_fixed_sets_are_visited_once_an_epoch_when_counted_in_epochs():
    mesh = dp.make_mesh()
    run = types.SimpleNamespace(mesh=mesh, replicate=lambda t: dp.replicate(t, mesh))
    arrays = {"target": np.arange(40, dtype=np.int32), "obs": np.arange(80).reshape(40, 2)}
    stage = ml_collections.ConfigDict({"batch_size": 8, "num_epochs": 2})
    seed_keys = [jax.random.key(0), jax.random.key(5)]         # two seeds' shuffles
    kw = nl_train.fixed_sampler(run, stage, arrays, seed_keys)
    assert kw["pass_step"] and kw["epoch_size"] == 40 and len(kw["sample"]) == 2
    key = jax.random.key(1)                                   # the step key: unused
    firsts = []
    for sample in kw["sample"]:
        epochs = [np.concatenate([np.asarray(sample(key, e * 5 + j)["target"])
                                  for j in range(1, 6)]) for e in range(2)]   # fit's steps 1..10
        for seen in epochs:
            assert sorted(seen.tolist()) == list(range(40))
        assert not np.array_equal(epochs[0], epochs[1])
        firsts.append(epochs[0])
    assert not np.array_equal(*firsts)                        # each seed its own order
    one = nl_train.fixed_sampler(run, stage, arrays, seed_keys[:1])["sample"][0]
    np.testing.assert_array_equal(np.asarray(one(key, 1)["target"]), firsts[0][:8])
    stage.num_epochs = 0                # with replacement, from each seed's step key: one sampler
    kw = nl_train.fixed_sampler(run, stage, arrays, seed_keys)
    assert set(kw) == {"sample"} and isinstance(kw["sample"], dp.EpisodeSampler)


def test_stage_summary_names_the_best_epoch():
    meta = {"best_step": 9, "step": 12, "steps_per_epoch": 4}
    assert nl_train.stage_summary(meta) == {"best_step": 9, "last_step": 12,
                                            "steps_per_epoch": 4, "best_epoch": 3}
    assert nl_train.stage_summary({**meta, "steps_per_epoch": 0}) == {"best_step": 9,
                                                                      "last_step": 12}
