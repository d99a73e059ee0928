"""The jit-over-mesh train step equals a literal `jax.pmap` step and a single-device step (8 fake
CPU devices), on a small system-agnostic regression model."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
import pytest
from flax.training import train_state

from tests.helpers import assert_jit_step_equals_pmap_step
from ttw_jax.core.train import data_parallel as dp

pytestmark = pytest.mark.usefixtures("fast_compile_unless_slow")  # tiny models


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(1)(nn.tanh(nn.Dense(16)(x)))[..., 0]


def setup(batch_size=32):
    model = MLP()
    keys = jax.random.split(jax.random.key(1), 3)
    batches = [{"x": jax.random.normal(k, (batch_size, 5)),
                "y": jax.random.normal(jax.random.fold_in(k, 1), (batch_size,))} for k in keys]
    params = model.init(jax.random.key(0), batches[0]["x"])

    def loss_fn(params, batch, rng):
        del rng
        loss = jnp.mean((model.apply(params, batch["x"]) - batch["y"]) ** 2)
        return loss, {"loss": loss}

    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-2))
    return state, batches, loss_fn


def test_jit_mesh_step_equals_pmap_step_and_single_device():
    assert_jit_step_equals_pmap_step(*setup())


def test_batch_must_divide_over_devices():
    with pytest.raises(ValueError, match="not divisible"):
        dp.check_batch_size(12, dp.make_mesh())
