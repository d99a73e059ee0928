"""Mixed precision (`ttw_jax.core.train.precision`): bfloat16 matmuls on bfloat16 operands,
float32 parameters, gradients, optimizer state and outputs; float32 is the model itself."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training import train_state

from ttw_jax.core.train.precision import MixedPrecision, cast_floats, with_dtype


class Net(nn.Module):
    @nn.compact
    def __call__(self, x, ids):
        h = nn.relu(nn.Dense(64)(x)) + nn.Embed(10, 64)(ids)
        return nn.Dense(5)(h)


def setup():
    x = jax.random.normal(jax.random.key(0), (16, 32))
    ids = jnp.arange(16) % 10
    model = Net()
    return model, model.init(jax.random.key(1), x, ids), x, ids


def test_float32_is_the_model_itself_and_bad_names_are_refused():
    model = Net()
    assert with_dtype(model, "float32") is model
    with pytest.raises(ValueError, match="dtype must be one of"):
        with_dtype(model, "float16")


def test_bfloat16_computes_on_bfloat16_and_returns_float32():
    model, params, x, ids = setup()
    mixed = with_dtype(model, "bfloat16")
    assert isinstance(mixed, MixedPrecision) and mixed.init is not None
    out32, out16 = model.apply(params, x, ids), mixed.apply(params, x, ids)
    assert out16.dtype == jnp.float32
    assert float(jnp.max(jnp.abs(out16 - out32))) < 0.05 * float(jnp.max(jnp.abs(out32)))
    assert not np.array_equal(np.asarray(out16), np.asarray(out32))   # it did round
    text = str(jax.make_jaxpr(mixed.apply)(params, x, ids))   # the matmuls' operands
    assert "dot_general" in text and "bf16[16,32]" in text and "bf16[32,64]" in text
    # integer inputs are left alone
    assert cast_floats({"i": ids}, jnp.bfloat16)["i"].dtype == ids.dtype


def test_gradients_and_optimizer_state_stay_float32_and_the_loss_is_close():
    model, params, x, ids = setup()
    y = jax.random.normal(jax.random.key(2), (16, 5))

    def loss(apply):
        return lambda p: jnp.mean((apply(p, x, ids) - y) ** 2)
    l32, g32 = jax.value_and_grad(loss(model.apply))(params)
    mixed = with_dtype(model, "bfloat16")
    l16, g16 = jax.value_and_grad(loss(mixed.apply))(params)
    assert l16.dtype == jnp.float32 and abs(float(l16 - l32)) < 0.02 * float(l32)
    assert all(g.dtype == jnp.float32 for g in jax.tree_util.tree_leaves(g16))
    state = train_state.TrainState.create(apply_fn=mixed.apply, params=params,
                                          tx=optax.adam(1e-2))
    state = state.apply_gradients(grads=g16)
    assert all(a.dtype == jnp.float32 for a in jax.tree_util.tree_leaves(
        (state.params, state.opt_state)) if hasattr(a, "dtype") and
        jnp.issubdtype(a.dtype, jnp.floating))
    # it learns: 200 steps in bfloat16 bring the loss far below the start
    step = jax.jit(lambda s: s.apply_gradients(grads=jax.grad(loss(mixed.apply))(s.params)))
    for _ in range(200):
        state = step(state)
    assert float(loss(mixed.apply)(state.params)) < 0.2 * float(l32)


def test_named_submodules_stay_float32():
    """`float32_modules`: a head named there computes on float32 inputs and parameters."""
    model, params, x, ids = setup()
    mixed = with_dtype(model, "bfloat16", float32_modules=("Dense_1",))
    text = str(jax.make_jaxpr(mixed.apply)(params, x, ids))
    assert "bf16[32,64]" in text and "f32[64,5]" in text and "bf16[64,5]" not in text
    assert float(jnp.max(jnp.abs(mixed.apply(params, x, ids) - model.apply(params, x, ids)))) < 0.1


def test_a_module_passed_to_a_method_is_left_alone():
    """A method that takes submodules as arguments (the language guide's `extract`) runs."""
    class Outer(nn.Module):
        def setup(self):
            self.a, self.b = nn.Dense(4), nn.Dense(4)

        def pick(self, x, layer):
            return layer(x)

        def __call__(self, x):
            return self.pick(x, self.a) + self.pick(x, self.b)
    x = jnp.ones((2, 3))
    params = Outer().init(jax.random.key(0), x)
    out = with_dtype(Outer(), "bfloat16").apply(params, x)
    assert out.dtype == jnp.float32 and out.shape == (2, 4)
