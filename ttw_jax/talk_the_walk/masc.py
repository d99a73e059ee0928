"""MASC: Masked Attention for Spatial Convolutions (de Vries et al. 2018, section 4.2).

A map embedding U (B, X, Y, N) is transformed by a 3x3 convolution whose kernel is a shared
learned W (9, N, N) scaled per example by a 3x3 mask (a softmax over 9 logits predicted from an
action): `U' = conv(U, mask * W)`, zero padding. The batched form is one GEMM: the im2col patches
(B*X*Y, 9, N) are scaled by each example's mask and multiplied by W reshaped to (9N, N).
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from ttw_jax.core.train.precision import softmax

# Patch index k = 3 * (dx + 1) + (dy + 1) reads the neighbour at (x + dx, y + dy).
OFFSETS = tuple((dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1))


def im2col3x3(u: jax.Array) -> jax.Array:
    """(B, X, Y, N) -> (B, X, Y, 9, N) zero-padded 3x3 neighbourhoods in `OFFSETS` order."""
    _, nx, ny, _ = u.shape
    p = jnp.pad(u, ((0, 0), (1, 1), (1, 1), (0, 0)))
    return jnp.stack([p[:, 1 + dx:1 + dx + nx, 1 + dy:1 + dy + ny] for dx, dy in OFFSETS], axis=3)


def masked_conv3x3(u: jax.Array, mask: jax.Array, kernel: jax.Array) -> jax.Array:
    """conv(u, mask * kernel) for a per-example mask.

    u: (B, X, Y, N); mask: (B, 9) or (9,); kernel: (9, N, M). Returns (B, X, Y, M).
    """
    b, nx, ny, n = u.shape
    patches = im2col3x3(u) * jnp.broadcast_to(mask, (b, 9))[:, None, None, :, None]
    out = patches.reshape(b * nx * ny, 9 * n) @ kernel.reshape(9 * n, -1)
    return out.reshape(b, nx, ny, -1)


def normal_kernel_init(key, shape, dtype=jnp.float32):
    """W_k ~ N(0, 1/N) for each of the 9 offsets."""
    return jax.random.normal(key, shape, dtype) * (1.0 / jnp.sqrt(shape[1])).astype(dtype)


def identity_kernel_init(key, shape, dtype=jnp.float32, noise: float = 0.01):
    """W_k = I + N(0, noise^2): a one-hot mask then starts as an exact shift of the map."""
    eye = jnp.eye(shape[1], shape[2], dtype=dtype)
    return eye[None] + noise * jax.random.normal(key, shape, dtype)


def uniform_kernel_init(key, shape, dtype=jnp.float32):
    """W ~ U(-1/(9N), 1/(9N)): the released code's MASC initialisation (N input features)."""
    bound = 1.0 / (9 * shape[1])
    return jax.random.uniform(key, shape, dtype, -bound, bound)


KERNEL_INITS = {"normal": normal_kernel_init, "identity": identity_kernel_init,
                "uniform": uniform_kernel_init}


class MASC(nn.Module):
    """Action-masked 3x3 convolution; `mask_logits` (B, 9) are turned into a softmax mask."""
    features: int
    kernel_init: str = "normal"

    @nn.compact
    def __call__(self, u: jax.Array, mask_logits: jax.Array) -> jax.Array:
        kernel = self.param("kernel", KERNEL_INITS[self.kernel_init], (9, u.shape[-1], self.features))
        mask = softmax(mask_logits, axis=-1)
        return masked_conv3x3(u, mask, kernel.astype(u.dtype))


class NoMASC(nn.Module):
    """The baseline: an ordinary 3x3 convolution without bias (the mask is all ones)."""
    features: int
    kernel_init: str = "normal"

    @nn.compact
    def __call__(self, u: jax.Array) -> jax.Array:
        kernel = self.param("kernel", KERNEL_INITS[self.kernel_init], (9, u.shape[-1], self.features))
        return masked_conv3x3(u, jnp.ones((9,), u.dtype), kernel.astype(u.dtype))
