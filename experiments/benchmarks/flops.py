"""FLOPs of a program counted from its traced jaxpr, the same whichever backend runs it.

XLA's own cost analysis depends on the backend: on a GPU it does not count the convolutions it
hands to cuDNN (a LingUNet step counted at 79 GFLOP instead of 5.39 TFLOP), and everywhere it
counts a `scan` body once. `program_flops(fn, *args)` traces `fn` (nothing runs) and counts the
dense work, as the usual model-FLOPs convention does: 2 FLOPs per multiply-add of every
`dot_general` (matmuls, einsums) and `conv_general_dilated`, forward and backward alike (a train
step's gradients are in its jaxpr), after dead code is removed as XLA would. Elementwise work, reductions and gathers are not counted.
Control flow: a `scan` body counts `length` times, a `cond` its costliest branch (but a
`lax.platform_dependent` choice, alternative lowerings of the same math, its cheapest: the work
the model needs, not the padding a backend's formulation adds), a `while` body
once per iteration given in `while_trips` (default 1: a lower bound), a `shard_map` body once per
device of its mesh; calls (`pjit`, `remat`, custom derivatives) count their bodies.

A fraction of peak names its peak: `peak_dtype(x)` says which matmul throughput a program's
inputs call for (float32 at JAX's default precision is TF32 on NVIDIA tensor cores and bfloat16
passes on TPUs; bfloat16 is bfloat16).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import jax
import numpy as np
from jax._src.interpreters import partial_eval as pe
from jax.extend import core as jex_core


def _prod(xs) -> int:
    return int(math.prod(int(x) for x in xs))


def dot_flops(lhs_shape, rhs_shape, dimension_numbers) -> int:
    """2 * batch * contracted * lhs-free * rhs-free of a `dot_general`."""
    (lc, rc), (lb, rb) = dimension_numbers
    batch = _prod(lhs_shape[d] for d in lb)
    contract = _prod(lhs_shape[d] for d in lc)
    lhs_free = _prod(s for d, s in enumerate(lhs_shape) if d not in (*lc, *lb))
    rhs_free = _prod(s for d, s in enumerate(rhs_shape) if d not in (*rc, *rb))
    return 2 * batch * contract * lhs_free * rhs_free


def conv_flops(out_shape, rhs_shape, dimension_numbers) -> int:
    """2 * output elements * (kernel elements per output feature) of a `conv_general_dilated`:
    each output value sums the kernel's input features (per group) times its window."""
    out_feature_dim = dimension_numbers.rhs_spec[0]
    per_output = _prod(rhs_shape) // int(rhs_shape[out_feature_dim])
    return 2 * _prod(out_shape) * per_output


def _sub_jaxprs(params: dict):
    for v in params.values():
        for item in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(item, jex_core.ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, jex_core.Jaxpr):
                yield item


def _live(jaxpr):
    """`jaxpr` without the equations none of its outputs needs (what XLA removes before it
    runs anything, e.g. the forward pass inside a `jax.vjp` used for its transpose only)."""
    try:
        return pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars), instantiate=True)[0]
    except Exception:          # an effect or primitive without a DCE rule: counted as traced
        return jaxpr


def _counts(jaxpr, while_trips: int) -> dict[str, int]:
    """{left operand dtype name: dense FLOPs} of a (closed or open) jaxpr, every sub-jaxpr
    weighted by how many times it runs (scan length, while trips, shard_map devices)."""
    jaxpr = _live(getattr(jaxpr, "jaxpr", jaxpr))
    out: dict[str, int] = {}
    platform = set()            # variables holding `platform_index` (platform_dependent's choice)

    def add(counts: dict, times: int = 1):
        for k, v in counts.items():
            out[k] = out.get(k, 0) + times * v

    sub = lambda j, times=1: add(_counts(j, while_trips), times)
    for eqn in jaxpr.eqns:
        name, p = eqn.primitive.name, eqn.params
        count = 0
        if name == "dot_general":
            count = dot_flops(eqn.invars[0].aval.shape, eqn.invars[1].aval.shape,
                              p["dimension_numbers"])
        elif name == "conv_general_dilated":
            count = conv_flops(eqn.outvars[0].aval.shape, eqn.invars[1].aval.shape,
                               p["dimension_numbers"])
        if count:
            add({np.dtype(eqn.invars[0].aval.dtype).name: count})
        elif name == "scan":
            sub(p["jaxpr"], int(p["length"]))
        elif name == "platform_index":
            platform.update(eqn.outvars)
        elif name == "cond":
            costs = [_counts(b, while_trips) for b in p["branches"]]
            pick = (min if eqn.invars[0] in platform else max)(
                range(len(costs)), key=lambda i: sum(costs[i].values()))
            add(costs[pick])
        elif name == "while":
            sub(p["body_jaxpr"], while_trips)
            sub(p["cond_jaxpr"], while_trips)
        elif name == "shard_map":
            mesh = p.get("mesh")
            devices = int(np.prod(list(mesh.shape.values()))) if mesh is not None else 1
            for j in _sub_jaxprs(p):
                sub(j, devices)
        else:
            for j in _sub_jaxprs(p):
                sub(j)
    return out


def jaxpr_flops(jaxpr, while_trips: int = 1, by_dtype: dict | None = None) -> int:
    """The dense FLOPs of a (closed or open) jaxpr (see the module docstring); with `by_dtype`,
    each operation's FLOPs are also added there under its left operand's dtype name, with the
    same multipliers (a scan body's matmul counts `length` times in its dtype too)."""
    counts = _counts(jaxpr, while_trips)
    if by_dtype is not None:
        for k, v in counts.items():
            by_dtype[k] = by_dtype.get(k, 0) + v
    return sum(counts.values())


def program_flops(fn: Callable, *args: Any, while_trips: int = 1) -> float:
    """The dense FLOPs of one call `fn(*args)` (a jitted function or a plain one), traced on
    abstract values: nothing runs, no backend's cost model is asked."""
    return float(jaxpr_flops(jax.make_jaxpr(fn)(*args), while_trips))


def flops_by_dtype(fn: Callable, *args: Any, while_trips: int = 1) -> dict[str, float]:
    """{operand dtype name: dense FLOPs} of one call `fn(*args)`: how much of the work a mixed-
    precision program does in bfloat16."""
    out: dict = {}
    jaxpr_flops(jax.make_jaxpr(fn)(*args), while_trips, out)
    return {k: float(v) for k, v in out.items()}


def primitive_dtypes(fn: Callable, *args: Any, names: tuple[str, ...] = ("exp",)
                     ) -> dict[str, int]:
    """{input dtype name: count} of the equations of primitives `names` in the traced jaxpr of
    `fn(*args)`, every sub-jaxpr included (each counted once, live or not): e.g. whether a
    mixed-precision step takes any softmax's `exp` in bfloat16."""
    out: dict[str, int] = {}

    def walk(jaxpr):
        for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
            if eqn.primitive.name in names:
                key = np.dtype(eqn.invars[0].aval.dtype).name
                out[key] = out.get(key, 0) + 1
            for j in _sub_jaxprs(eqn.params):
                walk(j)
    walk(jax.make_jaxpr(fn)(*args))
    return out


def peak_dtype(*args: Any) -> str:
    """'bfloat16' if any floating input leaf is bfloat16 (or float16), else 'float32'."""
    kinds = {np.dtype(x.dtype).name for x in jax.tree_util.tree_leaves(args)
             if hasattr(x, "dtype") and jax.numpy.issubdtype(x.dtype, jax.numpy.floating)}
    return "bfloat16" if kinds & {"bfloat16", "float16"} else "float32"
