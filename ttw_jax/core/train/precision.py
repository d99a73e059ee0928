"""Mixed precision for any Flax model: `config.dtype` = "float32" (default) or "bfloat16".

`with_dtype(model, dtype)` returns the model with its `apply` computing in `dtype`: the float
leaves of the parameters and of the inputs are cast to `dtype` on the way in, and so are those of
the inputs of every submodule call (`flax.linen.intercept_methods`), so every layer's matmul or
convolution runs on bfloat16 operands even where a float32 value (a recurrent cell's initial
carry, a float32 constant) would promote it; a recurrent cell's new carry (and output) goes back
to the dtype its carry came in with, which its scan keeps. The float leaves of the model's outputs are cast back to float32
on the way out, so the losses and the softmaxes the losses take over the outputs are float32;
softmaxes inside a model (attention, MASC's mask) go through `softmax`, which computes them in
float32 and hands the weights back in the scores' dtype. The parameters and the optimizer state
stay float32: the cast is inside the differentiated function, so the gradients arrive in
float32 (the usual "float32 master weights" recipe). Everything else about the model (`init`,
its attributes and methods) is the model's own.
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

DTYPES = ("float32", "bfloat16")


def check_dtype(dtype: str) -> None:
    """ValueError unless `dtype` is one of `DTYPES`."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")


def cast_floats(tree: Any, dtype) -> Any:
    """`tree` with every floating-point array leaf cast to `dtype` (integers, booleans, keys
    and anything that is not an array, e.g. a module passed to a method, unchanged)."""
    def cast(x):
        if (isinstance(x, (jax.Array, np.ndarray, np.generic))
                and jnp.issubdtype(x.dtype, jnp.floating) and x.dtype != dtype):
            return x.astype(dtype)
        return x
    return jax.tree_util.tree_map(cast, tree)


def softmax(x: jax.Array, axis: int = -1) -> jax.Array:
    """`jax.nn.softmax(x, axis)` computed in float32 whatever `x`'s dtype (its exp and sum do not
    lose the small weights to bfloat16 rounding), returned in `x`'s dtype for the product that
    follows; for float32 `x` it is `jax.nn.softmax` itself."""
    return jax.nn.softmax(x.astype(jnp.float32), axis=axis).astype(x.dtype)


def cast_variables(variables: Any, dtype, keep: tuple[str, ...] = ()) -> Any:
    """`cast_floats(variables, dtype)` except below a submodule named in `keep`."""
    def cast(path, x):
        names = {getattr(k, "key", None) for k in path}
        return x if names & set(keep) else cast_floats(x, dtype)
    return jax.tree_util.tree_map_with_path(cast, variables)


class MixedPrecision:
    """`module` whose `apply` computes in `dtype` (see the module docstring), except the
    submodules named in `float32_modules` (e.g. a dense prediction head whose many outputs would
    tie once rounded to bfloat16), which compute in float32 on float32 parameters; every other
    attribute is the module's."""

    def __init__(self, module, dtype: str, float32_modules: tuple[str, ...] = ()):
        check_dtype(dtype)
        self.module, self.dtype = module, jnp.dtype(dtype)
        self.float32_modules = tuple(float32_modules)

    def _intercept(self, next_fun, args, kwargs, context):
        cell = isinstance(context.module, nn.RNNCellBase)
        if cell and context.method_name != "__call__":
            return next_fun(*args, **kwargs)      # a cell's lifted scan: its steps are cast
        if context.module.name in self.float32_modules:
            args32, kwargs32 = cast_floats((args, kwargs), jnp.float32)
            return next_fun(*args32, **kwargs32)
        cast_args, kwargs = cast_floats((args, kwargs), self.dtype)
        out = next_fun(*cast_args, **kwargs)
        if cell and args:
            # (carry, y) of a cell step: the carry keeps the dtypes it came in with (its scan's),
            # and y takes the carry's
            carry = args[0]
            new_carry = jax.tree_util.tree_map(lambda n, o: n.astype(o.dtype), out[0], carry)
            y_dtype = jax.tree_util.tree_leaves(carry)[0].dtype
            out = (new_carry, cast_floats(out[1], y_dtype))
        return out

    def apply(self, variables, *args, **kwargs):
        args, kwargs = cast_floats((args, kwargs), self.dtype)
        with nn.intercept_methods(self._intercept):
            out = self.module.apply(cast_variables(variables, self.dtype, self.float32_modules),
                                    *args, **kwargs)
        return cast_floats(out, jnp.float32)

    def __getattr__(self, name):
        return getattr(self.module, name)


def with_dtype(module, dtype: str = "float32", float32_modules: tuple[str, ...] = ()):
    """`module` itself for float32, else a `MixedPrecision` wrapper of it."""
    check_dtype(dtype)
    return module if dtype == "float32" else MixedPrecision(module, dtype, float32_modules)
