"""A stride-1 'SAME' 2-D convolution with a faster weight gradient on XLA:CPU.

`same_conv(x, kernel)` equals `lax.conv_general_dilated(x, kernel, (1, 1), 'SAME')` (NHWC, HWIO,
odd square kernels). Its forward pass and input gradient are XLA's own convolutions (the input
gradient is the forward convolution of the output gradient with the flipped, transposed kernel);
the kernel gradient, which XLA:CPU computes at a fraction of the machine's matmul rate for large
feature maps (35 GFLOP/s at [10, 100, 464, 128] on a 2-core machine whose matmuls reach 290), is a
`lax.scan` over chunks of `rows` output rows. With the image rows flattened at their padded width
and the input channels-first, every tap of a chunk is a column range of the chunk's input window
[C, (rows + k - 1) * (W + k - 1) + k], and the tap's kernel gradient is one row-major GEMM of that
range with the chunk's output gradient: [C, n] @ [n, D], n = rows * (W + k - 1); the window stays
in cache across the k * k taps (the padding columns of the output gradient are zero, so the
wrap-around terms vanish). Row-major operands on both sides run at XLA:CPU's full GEMM rate; the
im2col form before (one [D, n] x [n, k * k * C] GEMM contracting the output gradient's first axis)
ran about 20% slower at the paper's shape. That kernel gradient is for XLA:CPU: on other
backends (`lax.platform_dependent`) it is XLA's own, since on one H200 the per-tap form made the
LingUNet step at the paper's shape about 2.7x slower than cuDNN's (benchmarks README).

`conv_general_dilated` has `lax.conv_general_dilated`'s signature and uses `same_conv` where it
applies (stride 1, no dilation, one group, 'SAME' or its explicit padding, odd kernel), else
XLA's: pass it to `flax.linen.Conv(conv_general_dilated=...)`; parameters are unchanged.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

_DN = ("NHWC", "HWIO", "NHWC")


def _conv(x: jax.Array, kernel: jax.Array) -> jax.Array:
    return lax.conv_general_dilated(x, kernel, (1, 1), "SAME", dimension_numbers=_DN)


def kernel_grad(x: jax.Array, g: jax.Array, k: int, rows: int = 4) -> jax.Array:
    """d/dkernel of sum(g * same_conv(x, kernel)): x [B, H, W, C], g [B, H, W, D] -> [k, k, C, D]."""
    b, h, w, c = x.shape
    d = g.shape[-1]
    p = (k - 1) // 2
    wp = w + 2 * p
    chunks = -(-h // rows)
    hh = chunks * rows
    # Rows flattened at the padded width, channels first; one extra zero row keeps the last
    # tap's slice in range.
    xp = jnp.pad(x, ((0, 0), (p, p + 1 + hh - h), (p, p), (0, 0))).reshape(b, -1, c)
    xp = xp.transpose(0, 2, 1)
    gp = jnp.pad(g, ((0, 0), (0, hh - h), (0, wp - w), (0, 0))).reshape(b, hh * wp, d)
    n = rows * wp
    window = (rows + k - 1) * wp + k
    taps = [dy * wp + dx for dy in range(k) for dx in range(k)]

    def body(acc, i):
        img, r = i // chunks, (i % chunks) * rows * wp
        xs = lax.dynamic_slice(xp, (img, 0, r), (1, c, window))[0]       # [C, window]
        gs = lax.dynamic_slice(gp, (img, r, 0), (1, n, d))[0]            # [n, D]
        return acc + jnp.stack([xs[:, t:t + n] @ gs for t in taps]), None

    acc, _ = lax.scan(body, jnp.zeros((k * k, c, d), x.dtype), jnp.arange(b * chunks))
    return acc.reshape(k, k, c, d)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _same_conv(x, kernel, rows):
    return _conv(x, kernel)


def _fwd(x, kernel, rows):
    return _conv(x, kernel), (x, kernel)


def xla_kernel_grad(x: jax.Array, g: jax.Array, k: int) -> jax.Array:
    """`kernel_grad` as XLA computes it (its own backward convolution, cuDNN's on a GPU)."""
    kernel = jnp.zeros((k, k, x.shape[-1], g.shape[-1]), x.dtype)
    return jax.vjp(lambda w: _conv(x, w), kernel)[1](g)[0]


def _bwd(rows, res, g):
    x, kernel = res
    k = kernel.shape[0]
    dx = _conv(g, jnp.flip(kernel, (0, 1)).transpose(0, 1, 3, 2))
    # The per-tap GEMMs on XLA:CPU; on a GPU or TPU XLA's own kernel gradient is the faster one.
    dk = lax.platform_dependent(x, g, cpu=lambda a, b: kernel_grad(a, b, k, rows),
                                default=lambda a, b: xla_kernel_grad(a, b, k))
    return dx, dk.astype(kernel.dtype)


_same_conv.defvjp(_fwd, _bwd)


def same_conv(x: jax.Array, kernel: jax.Array, rows: int = 4) -> jax.Array:
    """'SAME' stride-1 convolution, x [B, H, W, C], kernel [k, k, C, D] (k odd) -> [B, H, W, D]."""
    k = kernel.shape[0]
    if kernel.shape[1] != k or k % 2 == 0:
        raise ValueError(f"same_conv takes odd square kernels, got {kernel.shape[:2]}")
    return _same_conv(x, kernel, rows)


def _is_nhwc(dimension_numbers) -> bool:
    if dimension_numbers is None:
        return False
    if isinstance(dimension_numbers, lax.ConvDimensionNumbers):
        return dimension_numbers == lax.conv_dimension_numbers((1, 1, 1, 1), (1, 1, 1, 1), _DN)
    return tuple(dimension_numbers) == _DN


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None):
    """`lax.conv_general_dilated`, through `same_conv` where it applies."""
    k = rhs.shape[0]
    p = (k - 1) // 2
    applies = (lhs.ndim == 4 and _is_nhwc(dimension_numbers)
               and tuple(window_strides) == (1, 1) and feature_group_count == 1
               and batch_group_count == 1 and precision is None
               and preferred_element_type is None
               and all(d in (None, 1) for d in (lhs_dilation or (1,)) + (rhs_dilation or (1,)))
               and rhs.shape[1] == k and k % 2 == 1
               and (padding == "SAME" or (not isinstance(padding, str)
                                          and [tuple(q) for q in padding] == [(p, p)] * 2)))
    if applies:
        return same_conv(lhs, rhs)
    return lax.conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                    dimension_numbers, feature_group_count, batch_group_count,
                                    precision, preferred_element_type)
