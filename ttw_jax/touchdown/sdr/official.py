"""The official LingUNet, exactly as lil-lab/touchdown `sdr/model.py` builds it, and an importer of
its PyTorch checkpoints.

Where it differs from the project's `LingUNet` (which follows the paper's text):
- no nonlinearity after any convolution or transposed convolution;
- the text kernels' linear maps have a bias;
- the per-pixel MLP has `mlp_layers` (the official `--num_linear_hidden_layers`, 1) hidden layers
  of `mlp_hidden` units after the first, each with a ReLU, then a bias-free score;
- dropout on the word embeddings (`dropout`, the official `--embed_dropout`, 0.1) and on the
  bottom map before the first transposed convolution (`deconv_dropout`, 0.0);
- the BiLSTM is PyTorch's (two biases per gate: `bias_ih` and `bias_hh`).
The forward pass: F_0 = images, F_k = Conv_k(F_{k-1}) (5 x 5, 'SAME', stride 1); the text vector
(mean of the BiLSTM states over the real tokens) in `levels` slices, slice k -> Linear -> a
[C, C] kernel, G_k = F_k K_k; H = DeConv_1(G_m), then H = DeConv_k([H; G_{m+1-k}]); scores =
MLP(H); log-softmax over all pixels. A stride-1 `ConvTranspose2d` with padding p is the
convolution with its kernel flipped and transposed and the same padding, which is how it is
computed here (`importer` converts the weights). At V = 4,000 words and the paper's sizes it has
14,589,632 parameters, the official count (`num_params`).

Inputs are the project's: `images` [B, H, W, C] (channels last), `tokens` [B, L], `lengths` [B].
The first convolution maps the input's channels to `channels` (the official code's are both 128).

Initialisation is the official code's: PyTorch's default initialisers (`torch_uniform`,
N(0, 1) word embeddings) and, with `identical_levels` (the default), its levels' convolutions
and text-kernel maps starting from one draw: the official `LingUNet` builds one `Conv2d` and one
`Linear` and deep-copies each `m` times (its `clones`), so every level starts from the same
weights and biases (the transposed convolutions and the MLP are built one by one and drawn
separately). A level whose input width differs from the others' (the first convolution, when
the feature maps do not have `channels` channels, as on the synthetic scenes) cannot share them
and is drawn on its own. `identical_levels=False` draws every level separately.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.core.state_dict import read_state_dict
from ttw_jax.core.vocab import report_truncation
from ttw_jax.touchdown.sdr.conv import conv_general_dilated as fast_conv


def torch_uniform(fan_in: int):
    """PyTorch's default initialiser of Linear / Conv weights and biases: U(+-1 / sqrt(fan_in))."""
    bound = 1.0 / math.sqrt(max(fan_in, 1))

    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)
    return init


def tied(init, shared: jax.Array | None, layer: tuple[int, ...] | None, part: int):
    """`init` as it is, or, with a `shared` key and a `layer` id, drawn from a key of `shared`,
    `layer` and `part` (0 weight, 1 bias) whatever key it is given: every level that passes the
    same (`shared`, `layer`, `part`) and shape starts from the same array."""
    if shared is None or layer is None:
        return init
    key = shared
    for salt in (*layer, part):
        key = jax.random.fold_in(key, salt)
    return lambda _key, shape, dtype=jnp.float32: init(key, shape, dtype)


class TorchLSTMCell(nn.RNNCellBase):
    """An LSTM cell with PyTorch's parameters: weight_ih [4H, E], weight_hh [4H, H], bias_ih and
    bias_hh [4H], gates in the order input, forget, cell, output; initialised U(+-1/sqrt(H))."""
    features: int

    @nn.compact
    def __call__(self, carry, x):
        c, h = carry
        init = torch_uniform(self.features)
        g4 = 4 * self.features
        w_ih = self.param("weight_ih", init, (g4, x.shape[-1]))
        w_hh = self.param("weight_hh", init, (g4, self.features))
        b_ih = self.param("bias_ih", init, (g4,))
        b_hh = self.param("bias_hh", init, (g4,))
        gates = x @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        i, f, g, o = jnp.split(gates, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (c, h), h

    @nn.nowrap
    def initialize_carry(self, rng, input_shape):
        zeros = jnp.zeros((*input_shape[:-1], self.features))
        return zeros, zeros

    @property
    def num_feature_axes(self) -> int:
        return 1


class OfficialLingUNet(nn.Module):
    """See the module docstring; returns log-probabilities [B, H, W]."""
    vocab_size: int
    levels: int = 2
    channels: int = 128
    mlp_hidden: int = 128
    mlp_layers: int = 1
    embed_dim: int = 300
    hidden: int = 300
    dropout: float = 0.1
    deconv_dropout: float = 0.0
    kernel_size: int = 5
    identical_levels: bool = True

    @nn.compact
    def __call__(self, tokens: jax.Array, lengths: jax.Array, images: jax.Array,
                 deterministic: bool = True) -> jax.Array:
        if (2 * self.hidden) % self.levels:
            raise ValueError(f"the text vector (2 x {self.hidden}) is not divisible by "
                             f"levels={self.levels}")
        c, k = self.channels, self.kernel_size
        emb = nn.Embed(self.vocab_size, self.embed_dim, embedding_init=nn.initializers.normal(1.0),
                       name="embedding")(tokens)
        emb = nn.Dropout(self.dropout)(emb, deterministic=deterministic)
        states = nn.Bidirectional(nn.RNN(TorchLSTMCell(self.hidden, name="lstm_forward")),
                                  nn.RNN(TorchLSTMCell(self.hidden, name="lstm_backward")))(
            emb, seq_lengths=lengths)                                  # [B, L, 2 * hidden]
        mask = jnp.arange(tokens.shape[1])[None, :] < lengths[:, None]
        text = jnp.sum(jnp.where(mask[..., None], states, 0.0), 1) / jnp.maximum(
            lengths, 1)[:, None].astype(states.dtype)
        slices = jnp.split(text, self.levels, axis=-1)
        # identical_levels: one key for every level's copy of a layer (the official clones)
        shared = self.make_rng("params") if self.identical_levels and self.is_initializing() \
            else None

        def conv(x, name, fan_in, tie=None):
            return nn.Conv(c, (k, k), padding="SAME", name=name, conv_general_dilated=fast_conv,
                           kernel_init=tied(torch_uniform(fan_in), shared, tie, 0),
                           bias_init=tied(torch_uniform(fan_in), shared, tie, 1))(x)
        feats, gs = images, []
        for i in range(self.levels):
            # the levels' convolutions tie where their input widths agree
            feats = conv(feats, f"conv_{i}", feats.shape[-1] * k * k, (0, feats.shape[-1]))
            sl = slices[i]
            kernel = nn.Dense(c * c, name=f"text2conv_{i}",
                              kernel_init=tied(torch_uniform(sl.shape[-1]), shared, (1,), 0),
                              bias_init=tied(torch_uniform(sl.shape[-1]), shared, (1,), 1)
                              )(sl).reshape(-1, c, c)
            gs.append(jnp.einsum("bhwi,boi->bhwo", feats, kernel))   # kernel[b, out, in]
        h = nn.Dropout(self.deconv_dropout)(gs.pop(), deterministic=deterministic)
        for i in range(self.levels):
            if i:
                h = jnp.concatenate([h, gs.pop()], -1)
            # ConvTranspose2d(in, out): PyTorch's fan_in is its weight's dim 1 (out) x k x k
            h = conv(h, f"deconv_{i}", c * k * k)
        for i in range(1 + self.mlp_layers):
            h = nn.relu(nn.Dense(self.mlp_hidden, name=f"mlp_{i}",
                                 kernel_init=torch_uniform(h.shape[-1]),
                                 bias_init=torch_uniform(h.shape[-1]))(h))
        scores = nn.Dense(1, use_bias=False, name="score",
                          kernel_init=torch_uniform(self.mlp_hidden))(h)[..., 0]
        b, hh, ww = scores.shape
        return jax.nn.log_softmax(scores.reshape(b, hh * ww), -1).reshape(b, hh, ww)


def num_params(params) -> int:
    return int(sum(np.size(x) for x in jax.tree_util.tree_leaves(params)))


def import_state_dict(state: Mapping[str, Any], levels: int | None = None,
                      mlp_layers: int | None = None) -> dict:
    """Flax parameters of `OfficialLingUNet` from an official LingUNet state dict (its PyTorch
    key names: `rnn.embedding.weight`, `rnn.lstm.weight_ih_l0[_reverse]`, `text2convs.i.*`,
    `conv_layers.i.*`, `deconv_layers.i.*`, `out_layers.out_layers.j.*`; numpy arrays or
    tensors). KeyError naming a missing key; the sizes follow from the arrays."""
    a = {k: np.asarray(v.detach().cpu().numpy() if hasattr(v, "detach") else v, np.float32)
         for k, v in state.items()}
    levels = levels if levels is not None else len({k.split(".")[1] for k in a
                                                    if k.startswith("conv_layers.")})
    linears = sorted(int(k.split(".")[2]) for k in a if k.startswith("out_layers.out_layers.")
                     and k.endswith(".weight"))
    mlp_layers = mlp_layers if mlp_layers is not None else len(linears) - 2

    def get(key):
        if key not in a:
            raise KeyError(f"the official LingUNet state dict has no {key!r} (keys: "
                           f"{sorted(a)[:6]} ...)")
        return a[key]
    p: dict = {"embedding": {"embedding": get("rnn.embedding.weight")}}
    for direction, suffix in (("forward", ""), ("backward", "_reverse")):
        p[f"lstm_{direction}"] = {n: get(f"rnn.lstm.{n}_l0{suffix}")
                                  for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
    for i in range(levels):
        p[f"conv_{i}"] = {"kernel": get(f"conv_layers.{i}.weight").transpose(2, 3, 1, 0),
                          "bias": get(f"conv_layers.{i}.bias")}
        p[f"text2conv_{i}"] = {"kernel": get(f"text2convs.{i}.weight").T,
                               "bias": get(f"text2convs.{i}.bias")}
        # ConvTranspose2d weight [in, out, kh, kw] -> the convolution's [kh, kw, in, out],
        # flipped in both spatial axes
        w = get(f"deconv_layers.{i}.weight")
        p[f"deconv_{i}"] = {"kernel": w[:, :, ::-1, ::-1].transpose(2, 3, 0, 1),
                            "bias": get(f"deconv_layers.{i}.bias")}
    for j in range(1 + mlp_layers):
        n = 2 * j   # Sequential: Linear, ReLU, Linear, ReLU, ..., Linear (no bias)
        p[f"mlp_{j}"] = {"kernel": get(f"out_layers.out_layers.{n}.weight").T,
                         "bias": get(f"out_layers.out_layers.{n}.bias")}
    p["score"] = {"kernel": get(f"out_layers.out_layers.{2 * (1 + mlp_layers)}.weight").T}
    return {"params": jax.tree_util.tree_map(np.ascontiguousarray, p)}


def read_checkpoint(path: str) -> dict[str, np.ndarray]:
    """The state dict of an official checkpoint: a `.pt` of the official `train.py` (a dict
    with `state_dict`, or a bare state dict), or the same keys in a `.safetensors` or `.npz`
    file (`ttw_jax.core.state_dict`: nothing is unpickled)."""
    return read_state_dict(path, "official LingUNet checkpoint")


def export_state_dict(params) -> dict[str, np.ndarray]:
    """The official state dict (PyTorch key names and layouts) of `OfficialLingUNet` parameters:
    the inverse of `import_state_dict`."""
    p = params["params"] if "params" in params else params
    out = {"rnn.embedding.weight": p["embedding"]["embedding"]}
    for direction, suffix in (("forward", ""), ("backward", "_reverse")):
        for n, v in p[f"lstm_{direction}"].items():
            out[f"rnn.lstm.{n}_l0{suffix}"] = v
    levels = sum(1 for k in p if k.startswith("conv_"))
    for i in range(levels):
        out[f"conv_layers.{i}.weight"] = np.asarray(p[f"conv_{i}"]["kernel"]).transpose(3, 2, 0, 1)
        out[f"conv_layers.{i}.bias"] = p[f"conv_{i}"]["bias"]
        out[f"text2convs.{i}.weight"] = np.asarray(p[f"text2conv_{i}"]["kernel"]).T
        out[f"text2convs.{i}.bias"] = p[f"text2conv_{i}"]["bias"]
        k = np.asarray(p[f"deconv_{i}"]["kernel"])          # [kh, kw, in, out], flipped
        out[f"deconv_layers.{i}.weight"] = k.transpose(2, 3, 0, 1)[:, :, ::-1, ::-1]
        out[f"deconv_layers.{i}.bias"] = p[f"deconv_{i}"]["bias"]
    j = 0
    while f"mlp_{j}" in p:
        out[f"out_layers.out_layers.{2 * j}.weight"] = np.asarray(p[f"mlp_{j}"]["kernel"]).T
        out[f"out_layers.out_layers.{2 * j}.bias"] = p[f"mlp_{j}"]["bias"]
        j += 1
    out[f"out_layers.out_layers.{2 * j}.weight"] = np.asarray(p["score"]["kernel"]).T
    return {k: np.ascontiguousarray(np.asarray(v, np.float32)) for k, v in out.items()}


class OfficialVocabulary:
    """The official loader's vocabulary (`sdr/loader.py`), which an official checkpoint's
    embedding rows follow: 0 `<pad>`, 1 `<unk>`, then every word of the train and dev
    descriptions in order of first appearance (the views of each file in order; words are the
    lower-cased text split on whitespace, punctuation kept). `encode` tokenizes the same way
    (an unseen word is `<unk>`), with `Vocabulary.encode`'s signature."""

    def __init__(self, texts_in_order):
        self.words = ["<pad>", "<unk>"]
        self.index = {"<pad>": 0, "<unk>": 1}
        for text in texts_in_order:
            for w in text.lower().split():
                if w not in self.index:
                    self.index[w] = len(self.words)
                    self.words.append(w)

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, texts, max_len: int, what: str = "texts", truncate: str = "warn"):
        ids = np.zeros((len(texts), max_len), np.int32)
        lengths = np.zeros(len(texts), np.int32)
        full = []
        for i, t in enumerate(texts):
            toks = [self.index.get(w, 1) for w in t.lower().split()]
            full.append(len(toks))
            toks = toks[:max_len]
            ids[i, :len(toks)] = toks
            lengths[i] = max(len(toks), 1)
        report_truncation(full, max_len, what, "words", truncate)
        return ids, lengths
