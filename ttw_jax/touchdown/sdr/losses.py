"""SDR targets and loss: a Gaussian around Touchdown's pixel, KL(target || prediction)."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ttw_jax.touchdown.sdr.metrics import center_to_pixel


def gaussian_target(center, height: int, width: int, sigma: float) -> jax.Array:
    """[B, H, W] distributions proportional to exp(-d^2 / (2 sigma^2)), d the distance in feature
    pixels from each pixel centre to the gold centre (x, y in [0, 1]); no horizontal wrap."""
    gold = center_to_pixel(center, height, width)                     # [B, 2] (row, col)
    rows = jnp.arange(height, dtype=jnp.float32)[None, :, None]
    cols = jnp.arange(width, dtype=jnp.float32)[None, None, :]
    d2 = (rows - gold[:, 0, None, None]) ** 2 + (cols - gold[:, 1, None, None]) ** 2
    logits = -d2 / (2.0 * sigma ** 2)
    return jax.nn.softmax(logits.reshape(len(gold), -1), -1).reshape(d2.shape)


def kl_loss(target: jax.Array, log_probs: jax.Array) -> jax.Array:
    """KL(target || prediction) per example [B]; 0 log 0 = 0."""
    b = target.shape[0]
    t, lp = target.reshape(b, -1), log_probs.reshape(b, -1)
    return jnp.sum(jax.scipy.special.xlogy(t, t) - t * lp, -1)


def make_loss(model, sigma: float):
    """loss_fn(params, batch, rng) -> (mean KL, {"loss"}) for the data-parallel step; `batch`
    holds features [B, H, W, C], tokens [B, L], token_len [B] and center [B, 2]."""
    def loss_fn(params, batch, rng):
        images = batch["features"].astype(jnp.float32)
        log_probs = model.apply(params, batch["tokens"], batch["token_len"], images,
                                deterministic=False, rngs={"dropout": rng})
        _, h, w = log_probs.shape
        loss = jnp.mean(kl_loss(gaussian_target(batch["center"], h, w, sigma), log_probs))
        return loss, {"loss": loss}
    return loss_fn
