"""Touchdown spatial description resolution (SDR) models (Chen et al. 2019, section 6, App. C/D).

Every model maps a description (`tokens` [B, L] int32, 0 = padding, `lengths` [B]) and a feature
map (`images` [B, H, W, C], any H, W, C) to log-probabilities over all pixels, [B, H, W] (a
log_softmax over the H*W positions), through the common call
`model.apply(params, tokens, lengths, images, deterministic=True)`.

- LingUNet: a convolutional encoder F_1..F_m, text-derived 1x1 kernels G_k = F_k K_k, and a
  transposed-convolution decoder back to H x W, then a per-pixel MLP.
- UNet: LingUNet without language (G_k = F_k); accepts and ignores tokens/lengths.
- Concat: the text vector next to every pixel's features, a 2-layer per-pixel MLP.
- ConcatConv: as Concat, with a 5x5 convolution over the concatenation before the MLP.
- Text2Conv: a per-example 5x5 kernel predicted from the text (no bias), then a per-pixel MLP.
- OfficialLingUNet (`lingunet_official`, `ttw_jax.touchdown.sdr.official`): the network of the
  official `sdr/model.py`, which differs from the paper's text; an importer reads its checkpoints.

The text vector is the mean over real tokens of a BiLSTM's states (`TextEncoder`), with dropout
on the word embeddings (rng stream 'dropout', active for `deterministic=False`).
`init_scale=0.1` draws every parameter (embeddings, kernels, biases) from U[-0.1, 0.1], as App.
D.2 says ("We initialize parameters by sampling uniformly from [-0.1, 0.1]"; `configs/paper.py`);
`None` keeps flax's default initialisers (biases zero).
The final per-pixel score layer has no bias: a constant shift cancels in the log_softmax.
"""
from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from ttw_jax.touchdown.sdr.conv import conv_general_dilated as fast_conv
from ttw_jax.touchdown.sdr.official import OfficialLingUNet


def _uniform(scale: float):
    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -scale, scale)
    return init


def uniform_inits(scale: float | None, *names: str) -> dict:
    """Keyword arguments setting the initialisers `names` to U[-scale, scale] (none if None)."""
    return {} if scale is None else {n: _uniform(scale) for n in names}


def kernel_init(scale: float | None):
    """The kernel initialiser: U[-scale, scale], or flax's LeCun normal when scale is None."""
    return nn.initializers.lecun_normal() if scale is None else _uniform(scale)


def bias_init(scale: float | None):
    """The bias initialiser: U[-scale, scale], or zeros (flax's default) when scale is None."""
    return nn.initializers.zeros if scale is None else _uniform(scale)


def pixel_log_softmax(scores: jax.Array) -> jax.Array:
    """Log-softmax of scores [B, H, W] over all H*W pixels: returns [B, H, W]."""
    b, h, w = scores.shape
    # in float32 whatever the scores' dtype (a bfloat16 log-softmax over H * W pixels ties)
    scores = scores.astype(jnp.promote_types(scores.dtype, jnp.float32))
    return jax.nn.log_softmax(scores.reshape(b, h * w), axis=-1).reshape(b, h, w)


def apply_text_kernels(features: jax.Array, kernels: jax.Array) -> jax.Array:
    """Per-example 1x1 convolution: features [B, H, W, C], kernels [B, C, D] -> [B, H, W, D]."""
    return jnp.einsum("bhwc,bcd->bhwd", features, kernels)


def per_example_conv(images: jax.Array, kernels: jax.Array) -> jax.Array:
    """Each example convolved ('SAME', stride 1) with its own kernel: images [B, H, W, C],
    kernels [B, kh, kw, C, D] -> [B, H, W, D].

    One batched GEMM per kernel tap, summed: the tap's shifted view of the zero-padded images
    [B, H*W, C] times the examples' tap kernels [B, C, D] (a vmapped `lax.conv` lowers to a
    grouped convolution that XLA:CPU runs an order of magnitude slower)."""
    _, h, w, _ = images.shape
    kh, kw = kernels.shape[1:3]
    top, left = (kh - 1) // 2, (kw - 1) // 2   # 'SAME': the extra row / column goes after
    x = jnp.pad(images, ((0, 0), (top, kh - 1 - top), (left, kw - 1 - left), (0, 0)))
    out = None
    for dy in range(kh):
        for dx in range(kw):
            tap = jnp.einsum("bhwc,bcd->bhwd", x[:, dy:dy + h, dx:dx + w], kernels[:, dy, dx])
            out = tap if out is None else out + tap
    return out


def _fit(x: jax.Array, h: int, w: int) -> jax.Array:
    """Crops (trailing rows/columns) or zero-pads x [B, h', w', C] to [B, h, w, C]."""
    x = x[:, :h, :w]
    return jnp.pad(x, ((0, 0), (0, h - x.shape[1]), (0, w - x.shape[2]), (0, 0)))


class TextEncoder(nn.Module):
    """Word embeddings, dropout, one-layer BiLSTM; returns the mean over the real tokens of the
    concatenated forward/backward states, [B, 2*hidden]."""
    vocab_size: int
    embed_dim: int = 300
    hidden: int = 300
    dropout: float = 0.5
    init_scale: float | None = None

    @nn.compact
    def __call__(self, tokens: jax.Array, lengths: jax.Array, deterministic: bool = True
                 ) -> jax.Array:
        emb = nn.Embed(self.vocab_size, self.embed_dim,
                       **uniform_inits(self.init_scale, "embedding_init"))(tokens)
        emb = nn.Dropout(self.dropout)(emb, deterministic=deterministic)
        cell_init = uniform_inits(self.init_scale, "kernel_init", "recurrent_kernel_init",
                                  "bias_init")
        states = nn.Bidirectional(nn.RNN(nn.OptimizedLSTMCell(self.hidden, **cell_init)),
                                  nn.RNN(nn.OptimizedLSTMCell(self.hidden, **cell_init)))(
            emb, seq_lengths=lengths)  # [B, L, 2*hidden]
        mask = jnp.arange(tokens.shape[1])[None, :] < lengths[:, None]
        total = jnp.sum(jnp.where(mask[..., None], states, 0.0), axis=1)
        return total / jnp.maximum(lengths, 1)[:, None].astype(total.dtype)


class UNetCore(nn.Module):
    """The (Ling)UNet image path: returns log-probabilities [B, H, W].

    F_0 = images; F_k = ReLU(Conv_kxk(F_{k-1})) (`channels` C', `stride`, 'SAME'), k = 1..levels.
    With `text` [B, T] (T divisible by `levels`), slice k is mapped by a bias-free linear layer to
    a 1x1 kernel K_k [B, C', C'] and G_k = F_k K_k; without text G_k = F_k. Decoder:
    H_m = ReLU(ConvT(G_m)), H_k = ReLU(ConvT([H_{k+1}; G_k])), each cropped to F_{k-1}'s size (with
    stride 2 ConvT doubles the size, ceil(n/2)*2 >= n). Scores: Dense(mlp_hidden) -> ReLU ->
    Dense(1, no bias) on H_1.
    """
    levels: int = 2
    channels: int = 128
    stride: int = 1
    mlp_hidden: int = 128
    kernel_size: int = 5
    init_scale: float | None = None

    @nn.compact
    def __call__(self, images: jax.Array, text: jax.Array | None = None) -> jax.Array:
        if self.levels < 1:
            raise ValueError(f"levels must be >= 1, got {self.levels}")
        c, ks, s = self.channels, (self.kernel_size,) * 2, (self.stride,) * 2
        kinit = uniform_inits(self.init_scale, "kernel_init", "bias_init")
        feats = [images]
        for k in range(1, self.levels + 1):
            feats.append(nn.relu(nn.Conv(c, ks, strides=s, padding="SAME", name=f"conv_{k}",
                                         conv_general_dilated=fast_conv, **kinit)(feats[-1])))
        if text is None:
            gs = feats[1:]
        else:
            if text.shape[-1] % self.levels:
                raise ValueError(f"text vector size {text.shape[-1]} is not divisible by "
                                 f"levels={self.levels}")
            slices = jnp.split(text, self.levels, axis=-1)
            gs = [apply_text_kernels(f, nn.Dense(c * c, use_bias=False, name=f"text_kernel_{k}",
                                                 **kinit)(t).reshape(-1, c, c))
                  for k, (f, t) in enumerate(zip(feats[1:], slices), 1)]
        h = None
        for k in range(self.levels, 0, -1):
            x = gs[k - 1] if h is None else jnp.concatenate([h, gs[k - 1]], axis=-1)
            if self.stride == 1 and self.kernel_size % 2:   # = the ConvTranspose, same params
                h = nn.Conv(c, ks, padding="SAME", name=f"deconv_{k}",
                            conv_general_dilated=fast_conv, **kinit)(x)
            else:
                h = nn.ConvTranspose(c, ks, strides=s, padding="SAME", name=f"deconv_{k}",
                                     **kinit)(x)
            h = nn.relu(_fit(h, *feats[k - 1].shape[1:3]))
        h = nn.relu(nn.Dense(self.mlp_hidden, name="mlp_hidden", **kinit)(h))
        scores = nn.Dense(1, use_bias=False, name="mlp_out", **kinit)(h)[..., 0]
        return pixel_log_softmax(scores)


class LingUNet(nn.Module):
    """LingUNet (see `UNetCore`) with a `TextEncoder`; returns log-probabilities [B, H, W].

    2*hidden must be divisible by `levels`. Defaults: channels=128, mlp_hidden=128 (our choice),
    text as in the paper (300-d embeddings, 300-unit BiLSTM, dropout 0.5), 5x5 kernels.
    """
    vocab_size: int
    levels: int = 2
    channels: int = 128
    stride: int = 1
    mlp_hidden: int = 128
    embed_dim: int = 300
    hidden: int = 300
    dropout: float = 0.5
    kernel_size: int = 5
    init_scale: float | None = None

    @nn.compact
    def __call__(self, tokens: jax.Array, lengths: jax.Array, images: jax.Array,
                 deterministic: bool = True) -> jax.Array:
        text = TextEncoder(self.vocab_size, self.embed_dim, self.hidden, self.dropout,
                           self.init_scale, name="text")(tokens, lengths, deterministic)
        return UNetCore(self.levels, self.channels, self.stride, self.mlp_hidden,
                        self.kernel_size, self.init_scale, name="unet")(images, text)


class UNet(nn.Module):
    """LingUNet without language (G_k = F_k): tokens, lengths and vocab_size are ignored.
    Returns log-probabilities [B, H, W]."""
    vocab_size: int = 0
    levels: int = 2
    channels: int = 128
    stride: int = 1
    mlp_hidden: int = 128
    kernel_size: int = 5
    init_scale: float | None = None

    @nn.compact
    def __call__(self, tokens: jax.Array, lengths: jax.Array, images: jax.Array,
                 deterministic: bool = True) -> jax.Array:
        del tokens, lengths, deterministic
        return UNetCore(self.levels, self.channels, self.stride, self.mlp_hidden,
                        self.kernel_size, self.init_scale, name="unet")(images)


class TiledConcatDense(nn.Module):
    """Dense(features) of [x; tile(text)] per pixel, computed without materialising the tiling:
    x [B, H, W, C], text [B, T] -> [B, H, W, features]. Kernel [C+T, features], bias [features]."""
    features: int
    init_scale: float | None = None

    @nn.compact
    def __call__(self, x: jax.Array, text: jax.Array) -> jax.Array:
        c = x.shape[-1]
        init = kernel_init(self.init_scale)
        kernel = self.param("kernel", init, (c + text.shape[-1], self.features))
        bias = self.param("bias", bias_init(self.init_scale), (self.features,))
        return (jnp.einsum("bhwc,cf->bhwf", x, kernel[:c])
                + (text @ kernel[c:])[:, None, None, :] + bias)


class PixelTextMLP(nn.Module):
    """Per-pixel 2-layer MLP over [features; text]: returns log-probabilities [B, H, W]."""
    mlp_hidden: int = 128
    init_scale: float | None = None

    @nn.compact
    def __call__(self, x: jax.Array, text: jax.Array) -> jax.Array:
        h = nn.relu(TiledConcatDense(self.mlp_hidden, self.init_scale, name="hidden")(x, text))
        scores = nn.Dense(1, use_bias=False, name="out",
                          **uniform_inits(self.init_scale, "kernel_init"))(h)[..., 0]
        return pixel_log_softmax(scores)


class Concat(nn.Module):
    """Text vector concatenated to every pixel's features, then a 2-layer per-pixel MLP.
    Returns log-probabilities [B, H, W]."""
    vocab_size: int
    mlp_hidden: int = 128
    embed_dim: int = 300
    hidden: int = 300
    dropout: float = 0.5
    init_scale: float | None = None

    @nn.compact
    def __call__(self, tokens: jax.Array, lengths: jax.Array, images: jax.Array,
                 deterministic: bool = True) -> jax.Array:
        text = TextEncoder(self.vocab_size, self.embed_dim, self.hidden, self.dropout,
                           self.init_scale, name="text")(tokens, lengths, deterministic)
        return PixelTextMLP(self.mlp_hidden, self.init_scale, name="mlp")(images, text)


def tiled_conv_taps(h: int, w: int, k: int) -> jax.Array:
    """[h, w, k, k] float32: 1 where the kernel tap (dy, dx) of a 'SAME' k x k convolution at
    pixel (y, x) reads a pixel inside the h x w map, else 0 (it reads the zero padding)."""
    pad = (k - 1) // 2
    ys = jnp.arange(h)[:, None] + jnp.arange(k)[None] - pad                   # [h, k]
    xs = jnp.arange(w)[:, None] + jnp.arange(k)[None] - pad                   # [w, k]
    inside_y = (ys >= 0) & (ys < h)
    inside_x = (xs >= 0) & (xs < w)
    return (inside_y[:, None, :, None] & inside_x[None, :, None, :]).astype(jnp.float32)


class TiledConcatConv(nn.Module):
    """A k x k 'SAME' convolution (with bias) of [x; tile(text)] per pixel, x [B, H, W, C],
    text [B, T] -> [B, H, W, features], computed without materialising the tiling: the text
    part of the kernel sees the same vector at every tap inside the map, so it is the text's
    projection through each tap, summed over the taps that fall inside (`tiled_conv_taps`).
    Kernel [k, k, C + T, features] (the tiled convolution's own layout), bias [features]."""
    features: int
    kernel_size: int = 5
    init_scale: float | None = None

    @nn.compact
    def __call__(self, x: jax.Array, text: jax.Array) -> jax.Array:
        k, c = self.kernel_size, x.shape[-1]
        init = kernel_init(self.init_scale)
        kernel = self.param("kernel", init, (k, k, c + text.shape[-1], self.features))
        bias = self.param("bias", bias_init(self.init_scale), (self.features,))
        image = fast_conv(x, kernel[:, :, :c], (1, 1), "SAME",
                          dimension_numbers=("NHWC", "HWIO", "NHWC"))
        per_tap = jnp.einsum("bt,yxtf->byxf", text, kernel[:, :, c:])           # [B, k, k, F]
        taps = tiled_conv_taps(x.shape[1], x.shape[2], k)
        return image + jnp.einsum("hwyx,byxf->bhwf", taps, per_tap) + bias


class PixelMLP(nn.Module):
    """Per-pixel 2-layer MLP (Dense(mlp_hidden) with bias -> ReLU -> Dense(1) without bias):
    features [B, H, W, D] -> log-probabilities [B, H, W]."""
    mlp_hidden: int = 128
    init_scale: float | None = None

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        kinit = uniform_inits(self.init_scale, "kernel_init", "bias_init")
        h = nn.relu(nn.Dense(self.mlp_hidden, name="hidden", **kinit)(x))
        return pixel_log_softmax(nn.Dense(1, use_bias=False, name="out", **kinit)(h)[..., 0])


class ConcatConv(nn.Module):
    """The text vector tiled next to every pixel's features, one k x k convolution over the
    concatenation that keeps its C + T channels (no activation, as the official
    `VisualConvNetwork`), then the per-pixel MLP of `Concat` on the convolution's output (App.
    D: "after concatenating the text and image features and before applying the MLP, we mix the
    features across the feature map by applying a single convolution"). Returns
    log-probabilities [B, H, W]."""
    vocab_size: int
    mlp_hidden: int = 128
    embed_dim: int = 300
    hidden: int = 300
    dropout: float = 0.5
    kernel_size: int = 5
    init_scale: float | None = None

    @nn.compact
    def __call__(self, tokens: jax.Array, lengths: jax.Array, images: jax.Array,
                 deterministic: bool = True) -> jax.Array:
        text = TextEncoder(self.vocab_size, self.embed_dim, self.hidden, self.dropout,
                           self.init_scale, name="text")(tokens, lengths, deterministic)
        x = TiledConcatConv(images.shape[-1] + text.shape[-1], self.kernel_size,
                            self.init_scale, name="conv")(images, text)
        return PixelMLP(self.mlp_hidden, self.init_scale, name="mlp")(x)


class Text2Conv(nn.Module):
    """A Dense without bias maps the text vector to a per-example kernel [k, k, C, channels]
    (App. D: "a single learned layer without biases or non-linearities"); the image is
    convolved with it ('SAME'), and the per-pixel MLP of `Concat` runs on the convolution's
    output (Dense -> ReLU -> Dense(1)). Returns log-probabilities [B, H, W].

    The kernel predictor has 2*hidden * k*k*C*channels weights: 409,600 per text unit at the
    paper's C = channels = 128 (`configs/paper.py`), 245.8M with its 600-d text vector; the CPU
    default keeps `channels` small.
    """
    vocab_size: int
    channels: int = 32
    mlp_hidden: int = 128
    embed_dim: int = 300
    hidden: int = 300
    dropout: float = 0.5
    kernel_size: int = 5
    init_scale: float | None = None

    @nn.compact
    def __call__(self, tokens: jax.Array, lengths: jax.Array, images: jax.Array,
                 deterministic: bool = True) -> jax.Array:
        text = TextEncoder(self.vocab_size, self.embed_dim, self.hidden, self.dropout,
                           self.init_scale, name="text")(tokens, lengths, deterministic)
        k, c = self.kernel_size, images.shape[-1]
        kernels = nn.Dense(k * k * c * self.channels, use_bias=False, name="kernel_predictor",
                           **uniform_inits(self.init_scale, "kernel_init"))(text)
        x = per_example_conv(images, kernels.reshape(-1, k, k, c, self.channels))
        return PixelMLP(self.mlp_hidden, self.init_scale, name="mlp")(x)


SDR_MODELS = {"lingunet": LingUNet, "lingunet_official": OfficialLingUNet, "concat": Concat,
              "concatconv": ConcatConv, "text2conv": Text2Conv, "unet": UNet}


def _fields(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)} - {"parent", "name"}


def build_sdr_model(name: str, vocab_size: int, uniform_init: bool = False, **kwargs
                    ) -> nn.Module:
    """The SDR model `name` (lingunet | lingunet_official | concat | concatconv | text2conv |
    unet).

    `kwargs` are model fields; a field of some other SDR model that this one lacks (e.g. `levels`
    for 'concat', `hidden` for 'unet') is ignored, so one config can build every model, while a
    name no SDR model has raises TypeError. `uniform_init=True` is shorthand for init_scale=0.1.
    """
    if name not in SDR_MODELS:
        raise ValueError(f"unknown SDR model {name!r} (expected one of {', '.join(SDR_MODELS)})")
    known = set().union(*map(_fields, SDR_MODELS.values()))
    if unknown := sorted(set(kwargs) - known):
        raise TypeError(f"unknown SDR model fields {unknown}")
    if uniform_init:
        kwargs.setdefault("init_scale", 0.1)
    cls = SDR_MODELS[name]
    own = _fields(cls)
    return cls(vocab_size=vocab_size, **{k: v for k, v in kwargs.items() if k in own})


def lingunet_num_params(vocab_size: int, in_channels: int, channels: int = 128, levels: int = 2,
                        embed_dim: int = 300, hidden: int = 300, mlp_hidden: int = 128,
                        kernel_size: int = 5) -> int:
    """Number of parameters of `LingUNet` with these sizes, counted from the architecture."""
    kk = kernel_size * kernel_size
    embed = vocab_size * embed_dim
    lstm = 2 * 4 * hidden * (embed_dim + hidden + 1)  # two directions, 4 gates, one bias each
    convs = (kk * in_channels * channels + channels) + \
        (levels - 1) * (kk * channels * channels + channels)
    text_kernels = 2 * hidden * channels * channels  # `levels` slices of 2*hidden/levels each
    deconvs = (kk * channels * channels + channels) + \
        (levels - 1) * (kk * 2 * channels * channels + channels)
    mlp = channels * mlp_hidden + mlp_hidden + mlp_hidden
    return embed + lstm + convs + text_kernels + deconvs + mlp
