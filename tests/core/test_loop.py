"""The shared training loop: early stopping in both directions, best parameters and their
evaluation, and resuming from checkpoints written before the loop was shared."""
import os

import jax
import jax.numpy as jnp
import ml_collections
import optax
import pytest
from flax.training import train_state

from ttw_jax.core.train.checkpoint import Checkpointer
from ttw_jax.core.train.logging import MetricWriter
from ttw_jax.core.train.loop import fit
from ttw_jax.core.train.run import evaluate_best


def config(**kw):
    c = ml_collections.ConfigDict(dict(num_steps=30, eval_every=5, log_every=5, patience=2,
                                       max_checkpoints=2))
    c.update(kw)
    return c


def start():
    return train_state.TrainState.create(apply_fn=None, params={"w": jnp.zeros(())},
                                         tx=optax.sgd(0.1))


@jax.jit
def step_fn(state, step):
    loss, g = jax.value_and_grad(lambda p: (p["w"] - 3.0) ** 2)(state.params)
    return state.apply_gradients(grads=g), {"loss": loss}


def run(tmp_path, evaluate, mode="min", **kw):
    writer = MetricWriter(str(tmp_path))
    out = fit(start(), config=config(**kw), workdir=str(tmp_path), writer=writer,
              place=lambda t: t, step_fn=step_fn, evaluate=evaluate, metric="err", mode=mode)
    writer.close()
    return out


def test_minimises_and_keeps_the_best_parameters(tmp_path):
    state, best, meta = run(tmp_path, lambda p: {"err": float(abs(p["w"] - 3.0))})
    assert meta["step"] == 30 and meta["best_step"] == 30 and not meta["stopped"]
    assert float(best["w"]) == pytest.approx(3.0, abs=1e-2)


def test_stops_after_patience_without_improvement(tmp_path):
    # Maximising |w - 3| (it shrinks every step): the first evaluation stays best.
    state, best, meta = run(tmp_path, lambda p: {"err": float(abs(p["w"] - 3.0))}, mode="max")
    assert meta["best_step"] == 5 and meta["stopped"] and meta["step"] == 15
    assert float(best["w"]) != float(state.params["w"])
    with pytest.raises(ValueError, match="mode must be"):
        fit(start(), config=config(), workdir=str(tmp_path), writer=None, place=None,
            step_fn=None, evaluate=None, metric="err", mode="best")


def test_resumes_with_the_checkpoint_bookkeeping(tmp_path):
    ckpt = Checkpointer(os.path.join(tmp_path, "checkpoints"))
    state = start()
    for s in range(1, 6):
        state, _ = step_fn(state, s)
    ckpt.save(5, {"state": state, "best_params": state.params},
              {"step": 5, "best": 0.1, "best_step": 5, "bad_evals": 0, "stopped": False})
    ckpt.close()
    _, _, meta = run(tmp_path, lambda p: {"err": float(abs(p["w"] - 3.0))}, num_steps=10)
    assert meta["step"] == 10 and meta["best"] == 0.1
    assert meta["best_step"] == 5   # |w - 3| at step 10 is not below the recorded 0.1


def test_best_eval_is_the_evaluation_at_the_best_step_also_after_a_resume(tmp_path):
    evals = []

    def evaluate(p):
        evals.append(float(p["w"]))
        return {"err": abs(float(p["w"]) - 3.0), "w": float(p["w"])}

    # Maximising |w - 3|: step 5 stays best while later evaluations run.
    _, best, meta = run(tmp_path, evaluate, mode="max", num_steps=10)
    assert meta["best_step"] == 5 and meta["best_eval"] == {"err": abs(evals[0] - 3.0),
                                                            "w": evals[0]}
    assert meta["best_eval"]["w"] == float(best["w"]) != evals[-1]
    _, _, resumed = run(tmp_path, evaluate, mode="max", num_steps=15)   # from step 10's checkpoint
    assert resumed["best_step"] == 5 and resumed["best_eval"] == meta["best_eval"]

    calls = []
    again = lambda: calls.append(1) or {"err": -1.0}
    assert evaluate_best(meta, "dev", "dev", again) == meta["best_eval"] and not calls
    assert evaluate_best(meta, "test", "dev", again) == {"err": -1.0} and calls == [1]
    assert evaluate_best({"best_eval": None}, "dev", "dev", again) == {"err": -1.0}
