"""The landmark classifiers of Appendix F: bags of embeddings, a linear map and a sigmoid per class.

Each feature kind present in the batch adds its logits (the released `LandmarkClassifier`):

* `resnet` (B, 4, D): `W_r (x / resnet_scale_div)` per relevant view, pooled over the views;
* `text` (B, L) int ids (0 pads): a learned look-up table `E` (`text_embed` wide), `W_t E[id]`
  per recognised string, pooled over the strings;
* `fasttext` (B, L) int ids with `word_table` (V + 1, F) fixed vectors: `W_f table[id]` per
  string, pooled over the strings.

`pool='sum'` is the bag of embeddings (with no bias, `W sum_v x_v = sum_v W x_v`); `'max'` takes
the element-wise maximum over the non-padding items (0 when there are none). The released layers
have no bias; `bias=True` adds the paper's `+ b`. A class is predicted when its logit is >= 0
(sigmoid >= 0.5).

`write_params` / `read_params`: the parameters as a `.safetensors` file, one float32 tensor per
parameter named by its path in the tree (`resnet_linear/kernel` (D, C), `text_embed/embedding`
(V + 1, 50), `text_linear/kernel`, `fasttext_linear/kernel`, `bias`), with string metadata.
"""
from __future__ import annotations

from typing import Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util
from safetensors.numpy import load as load_tensors, save as save_tensors

from ttw_jax.core import paths
from ttw_jax.talk_the_walk.landmarks.features import NUM_CLASSES


def _pool(logits: jax.Array, mask: jax.Array, pool: str) -> jax.Array:
    """logits (B, M, C), mask (B, M) -> (B, C)."""
    if pool == "sum":
        return jnp.sum(logits * mask[..., None], axis=1)
    if pool == "max":
        masked = jnp.where(mask[..., None] > 0, logits, -jnp.inf)
        return jnp.where(mask.any(1)[:, None], jnp.max(masked, axis=1), 0.0)
    raise ValueError(f"pool must be 'sum' or 'max', got {pool!r}")


class BagOfEmbeddings(nn.Module):
    """__call__(batch) -> logits (B, num_classes); batch holds any of `resnet`, `text`,
    `fasttext` (shapes in the module docstring); `word_table` is needed for `fasttext`."""
    num_classes: int = NUM_CLASSES
    text_vocab: int = 0          # V + 1 ids of the learned look-up table (text)
    text_embed: int = 50
    resnet_scale_div: float = 10.0
    pool: str = "sum"
    bias: bool = False

    @nn.compact
    def __call__(self, batch: dict, word_table: jax.Array | None = None) -> jax.Array:
        parts = []
        if "resnet" in batch:
            x = batch["resnet"] / self.resnet_scale_div
            z = nn.Dense(self.num_classes, use_bias=False, name="resnet_linear")(x)
            parts.append(_pool(z, jnp.ones(x.shape[:2], z.dtype), self.pool))
        if "text" in batch:
            ids = batch["text"]
            e = nn.Embed(self.text_vocab, self.text_embed, name="text_embed")(ids)
            z = nn.Dense(self.num_classes, use_bias=False, name="text_linear")(e)
            parts.append(_pool(z, (ids > 0).astype(z.dtype), self.pool))
        if "fasttext" in batch:
            ids = batch["fasttext"]
            z = nn.Dense(self.num_classes, use_bias=False, name="fasttext_linear")(word_table[ids])
            parts.append(_pool(z, (ids > 0).astype(z.dtype), self.pool))
        if not parts:
            raise ValueError("the batch holds none of 'resnet', 'text', 'fasttext'")
        logits = sum(parts)
        if self.bias:
            logits = logits + self.param("bias", nn.initializers.zeros, (self.num_classes,))
        return logits


def write_params(path: paths.PathLike, params, metadata: Mapping[str, str] | None = None) -> None:
    """`params` (a tree of arrays) as a `.safetensors` file (module docstring)."""
    flat = {k: np.ascontiguousarray(np.asarray(v, np.float32))
            for k, v in traverse_util.flatten_dict(params, sep="/").items()}
    paths.write_bytes(path, save_tensors(flat, metadata=dict(metadata or {})))


def read_params(path: paths.PathLike) -> dict:
    """The parameter tree of a `write_params` file, for `BagOfEmbeddings.apply`."""
    with paths.open_binary(path) as f:
        return traverse_util.unflatten_dict(load_tensors(f.read()), sep="/")
