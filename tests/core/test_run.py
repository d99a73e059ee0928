"""The trainer helper: the optimizer factory (worked against optax's own chains), its schedules,
the seeds of repeated baseline runs and their summary, and the config checks."""
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from ttw_jax.core.train.run import (check_eval, learning_rate_schedule, make_optimizer,
                                    mean_over_seeds, optim_config, seed_keys, splits)


def _updates(tx, steps=3):
    params = {"w": jnp.array([1.0, -2.0, 3.0])}
    grads = {"w": jnp.array([30.0, -40.0, 0.5])}     # global norm 50: clipping at 5 matters
    state, out = tx.init(params), []
    for _ in range(steps):
        upd, state = tx.update(grads, state, params)
        params = optax.apply_updates(params, upd)
        out.append(params["w"])
    return np.stack(out)


@pytest.mark.parametrize("optim, reference", [
    (optim_config(1e-3, grad_clip=5.0),
     optax.chain(optax.clip_by_global_norm(5.0), optax.adam(1e-3))),
    (optim_config(5e-4, grad_clip=5.0, schedule="cosine", end_fraction=0.05),
     optax.chain(optax.clip_by_global_norm(5.0),
                 optax.adam(optax.cosine_decay_schedule(5e-4, 10, alpha=0.05)))),
    (optim_config(3e-3, schedule="cosine", warmup_steps=2, end_fraction=0.01),
     optax.adam(optax.warmup_cosine_decay_schedule(0.0, 3e-3, 2, 10, end_value=3e-5))),
    (optim_config(3e-3, weight_decay=1e-4), optax.adamw(3e-3, weight_decay=1e-4)),
])
def test_make_optimizer_is_the_chain_each_trainer_used(optim, reference):
    np.testing.assert_allclose(_updates(make_optimizer(optim, num_steps=10)), _updates(reference),
                               rtol=1e-6)


def test_schedules_by_hand():
    cosine = learning_rate_schedule(optim_config(1.0, schedule="cosine", end_fraction=0.1), 10)
    assert float(cosine(0)) == pytest.approx(1.0)
    assert float(cosine(5)) == pytest.approx(0.1 + 0.9 * 0.5)      # half-way down the cosine
    assert float(cosine(10)) == pytest.approx(0.1)
    warm = learning_rate_schedule(optim_config(1.0, schedule="cosine", warmup_steps=4), 10)
    assert [float(warm(t)) for t in (0, 2, 4)] == pytest.approx([0.0, 0.5, 1.0])
    assert learning_rate_schedule(optim_config(0.3), 10) == 0.3
    with pytest.raises(ValueError, match="optim.schedule"):
        learning_rate_schedule(optim_config(1.0, schedule="step"), 10)
    with pytest.raises(ValueError, match="optim.learning_rate must be > 0"):
        make_optimizer(optim_config(-1.0), 10)


def test_seed_keys_and_their_summary():
    key = jax.random.key(3)
    one = seed_keys(key, 1)
    assert len(one) == 1 and (jax.random.key_data(one[0]) == jax.random.key_data(key)).all()
    three = [jax.random.key_data(k).tolist() for k in seed_keys(key, 3)]
    assert three == [jax.random.key_data(jax.random.fold_in(key, i)).tolist() for i in range(3)]
    assert len({tuple(k) for k in three}) == 3
    assert mean_over_seeds([{"tc": 0.1, "spd": 3.0}], ["tc", "spd"]) == {"tc": 0.1, "spd": 3.0}
    out = mean_over_seeds([{"tc": 0.0}, {"tc": 0.5}, {"tc": 1.0}], ["tc"])
    assert out["tc"] == pytest.approx(0.5) and out["tc_std"] == pytest.approx(np.sqrt(1 / 6))


def test_config_checks_and_splits():
    config = ml_collections.ConfigDict({"eval": {"metric": "spd", "mode": "min"}})
    check_eval(config, ("tc", "spd"))
    config.eval.metric = "bleu"
    with pytest.raises(ValueError, match=r"eval.metric must be one of \('tc', 'spd'\)"):
        check_eval(config, ("tc", "spd"))
    config.eval.metric, config.eval.mode = "spd", "lowest"
    with pytest.raises(ValueError, match="eval.mode must be one of"):
        check_eval(config, ("tc", "spd"))
    assert splits("dev,,test,") == ["dev", "test"] and splits("") == []


def test_sizing_keys_are_checked_before_the_config_is_recorded(tmp_path):
    import json

    from ttw_jax.core.train.workdir import check_workdir_config
    c = ml_collections.ConfigDict({"batch_size": 0, "num_steps": -1, "eval_every": 5,
                                   "guide": {"log_every": 0, "num_steps": 0},
                                   "eval": {"batch_size": True},
                                   "model": {"features": 0, "hidden": 8, "name": "x"}})
    with pytest.raises(ValueError) as e:
        check_workdir_config(c, tmp_path / "run")
    msg = str(e.value)
    assert "\n" not in msg
    for key in ("batch_size=0", "num_steps=-1", "guide.log_every=0", "eval.batch_size=True",
                "model.features=0"):
        assert key in msg
    assert "guide.num_steps" not in msg and not (tmp_path / "run" / "config.json").exists()


def test_a_workdir_without_work_takes_a_corrected_config(tmp_path):
    from ttw_jax.core.train.workdir import check_workdir_config
    c = ml_collections.ConfigDict({"batch_size": 8, "num_steps": 10})
    check_workdir_config(c, tmp_path)           # a run that then stopped at a later check
    (tmp_path / "metrics.jsonl").write_text("")
    c.batch_size = 16
    check_workdir_config(c, tmp_path)           # no work done: the corrected config is taken
    assert '"batch_size": 16' in (tmp_path / "config.json").read_text()
    (tmp_path / "stage" / "checkpoints" / "10").mkdir(parents=True)
    c.batch_size = 32
    with pytest.raises(ValueError, match=r"another config \(batch_size: 16 -> 32\)"):
        check_workdir_config(c, tmp_path)
