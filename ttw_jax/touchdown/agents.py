"""Touchdown navigation agents (Chen et al. 2019, section 7 and App. E): RConcat and GA.

Both encode the instruction with 32-d word vectors and a 256-unit LSTM (its final state is the
text vector), see the image features cropped to the agent's heading through a small CNN, and keep
a 256-unit LSTM over time whose input also holds the previous action. `image_encoder` picks the
CNN (`IMAGE_ENCODERS`):
- "table": the crop of a feature table, [B, crop, C], through two 1-D convolutions (3 wide, the
  second of stride 2) and a ReLU projection; GA gates the first convolution's channels.
- "official": the crop of whole feature maps, [B, H, crop, C] (the official navigator's roll,
  `ttw_jax.touchdown.features`; the published reimplementations take 100 columns of the
  100 x 464 maps averaged over channels), through the 2-D CNNs those reimplementations give
  (the official model code is not public): RConcat 32 8x8 filters of stride 4, 64 4x4 of
  stride 4, flattened to a linear 256-d image vector; GA 128 8x8 of stride 4, 64 4x4 of stride
  2, flattened to a linear 64-d vector that the text gate multiplies, then a 256-d ReLU layer.
  All "VALID" (no padding), ReLU after each convolution.
- "rgb" (Table 7): the 60-degree perspective RGB image of crop x crop pixels (84: [B, 84, 84, 3]
  in [0, 1]) at the agent's heading, rendered on device from per-panorama RGB bands
  (`ttw_jax.touchdown.projection`), through the official CNNs above (the sizes of the Atari
  network the 84 x 84 input comes from).
- RConcat concatenates text vector, image vector and previous-action embedding.
- GA (gated attention) multiplies image channels by a sigmoid gate computed from the text vector;
  text enters only through the gate.
`ablation` (the paper's App. F, Table 8): 'no_text' replaces the text vector with zeros, and
'no_image' the image crop, so the agent keeps its architecture and loses one modality.
The model is called once per step (`step`), so it runs inside the simulator's `lax.scan`.
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from ttw_jax.core.env import choose_action
from ttw_jax.touchdown.features import agent_view
from ttw_jax.touchdown.sdr.models import uniform_inits

NUM_ACTIONS = 4
START = NUM_ACTIONS  # previous-action id at t = 0


class InstructionEncoder(nn.Module):
    """Word vectors + LSTM: returns the final hidden state [B, hidden]."""
    vocab_size: int
    embed_dim: int = 32
    hidden: int = 256
    init_scale: float | None = None

    @nn.compact
    def __call__(self, tokens: jax.Array, lengths: jax.Array) -> jax.Array:
        s = self.init_scale
        emb = nn.Embed(self.vocab_size, self.embed_dim,
                       **uniform_inits(s, "embedding_init"))(tokens)
        cell = nn.OptimizedLSTMCell(self.hidden,
                                    **uniform_inits(s, "kernel_init", "recurrent_kernel_init"))
        (_, h), _ = nn.RNN(cell, return_carry=True)(emb, seq_lengths=lengths)
        return h


ABLATIONS = ("none", "no_text", "no_image")
IMAGE_ENCODERS = ("table", "official", "rgb")
MAP_ENCODERS = ("official", "rgb")     # the 2-D CNNs over [B, H, W, C] views
# The official encoder's convolutions, (features, kernel, stride) per layer, and its image vector.
OFFICIAL_CNN = {"rconcat": (((32, 8, 4), (64, 4, 4)), 256), "ga": (((128, 8, 4), (64, 4, 2)), 64)}


def official_cnn_min_size(kind: str) -> int:
    """The smallest crop height and width the official CNN of `kind` accepts."""
    size = 1
    for _, kernel, stride in reversed(OFFICIAL_CNN[kind][0]):
        size = (size - 1) * stride + kernel
    return size


class Navigator(nn.Module):
    """`kind` is 'rconcat' or 'ga'; `ablation` one of ABLATIONS; `init_scale=0.1` draws every
    kernel and embedding from U[-0.1, 0.1] (the paper's App. E.2; biases stay zero), None keeps
    flax's initialisers."""
    vocab_size: int
    kind: str = "ga"
    embed_dim: int = 32
    text_hidden: int = 256
    hidden: int = 256
    conv_features: int = 64
    action_dim: int = 16
    ablation: str = "none"
    init_scale: float | None = None
    image_encoder: str = "table"

    def setup(self):
        if self.kind not in ("rconcat", "ga"):
            raise ValueError(f"unknown navigator kind {self.kind!r} (rconcat | ga)")
        if self.ablation not in ABLATIONS:
            raise ValueError(f"unknown ablation {self.ablation!r}; choose from {ABLATIONS}")
        if self.image_encoder not in IMAGE_ENCODERS:
            raise ValueError(f"unknown image_encoder {self.image_encoder!r}; choose from "
                             f"{IMAGE_ENCODERS}")
        s = self.init_scale
        kernel = uniform_inits(s, "kernel_init")
        self.text = InstructionEncoder(self.vocab_size, self.embed_dim, self.text_hidden, s)
        if self.image_encoder in MAP_ENCODERS:
            layers, out = OFFICIAL_CNN[self.kind]
            self.convs = [nn.Conv(f, (k, k), strides=(st, st), padding="VALID", **kernel)
                          for f, k, st in layers]
            self.image_vec = nn.Dense(out, **kernel)
            gate_size = out
        else:
            self.conv1 = nn.Conv(self.conv_features, (3,), padding="SAME", **kernel)
            self.conv2 = nn.Conv(self.conv_features, (3,), strides=(2,), padding="SAME",
                                 **kernel)
            gate_size = self.conv_features
        self.image_proj = nn.Dense(self.hidden, **kernel)
        self.gate = nn.Dense(gate_size, **kernel)
        self.action_embed = nn.Embed(NUM_ACTIONS + 1, self.action_dim,
                                     **uniform_inits(s, "embedding_init"))
        self.cell = nn.OptimizedLSTMCell(self.hidden,
                                         **uniform_inits(s, "kernel_init", "recurrent_kernel_init"))
        self.head = nn.Sequential([nn.Dense(self.hidden, **kernel), nn.relu,
                                   nn.Dense(NUM_ACTIONS, **kernel)])

    def encode(self, tokens: jax.Array, lengths: jax.Array) -> jax.Array:
        """Text vectors [B, text_hidden] (zeros under 'no_text')."""
        text = self.text(tokens, lengths)
        return jnp.zeros_like(text) if self.ablation == "no_text" else text

    def initial_carry(self, batch_size: int):
        """LSTM carry (c, h), each [B, hidden]."""
        zeros = jnp.zeros((batch_size, self.hidden))
        return zeros, zeros

    def image_vector(self, text: jax.Array, image: jax.Array) -> jax.Array:
        """[B, hidden] (table; official GA) or [B, 256] (official RConcat) from the crop."""
        if self.image_encoder in MAP_ENCODERS:
            if image.ndim != 4:
                raise ValueError(f"the {self.image_encoder} image encoder takes views "
                                 f"[B, H, W, C], got shape {image.shape}")
            x = image
            for conv in self.convs:
                x = nn.relu(conv(x))
            x = self.image_vec(x.reshape(x.shape[0], -1))
            if self.kind == "rconcat":
                return x
            return nn.relu(self.image_proj(x * nn.sigmoid(self.gate(text))))
        if image.ndim != 3:
            raise ValueError(f"the table image encoder takes crops [B, crop, C] of a feature "
                             f"table, got shape {image.shape}")
        x = nn.relu(self.conv1(image))
        if self.kind == "ga":
            x = x * nn.sigmoid(self.gate(text))[:, None, :]
        x = nn.relu(self.conv2(x))
        return nn.relu(self.image_proj(x.reshape(x.shape[0], -1)))

    def step(self, carry, text: jax.Array, image: jax.Array, prev_action: jax.Array):
        """One decision: returns (carry, action logits [B, 4])."""
        if self.ablation == "no_image":
            image = jnp.zeros_like(image)
        parts = [self.image_vector(text, image), self.action_embed(prev_action)]
        if self.kind == "rconcat":
            parts.insert(0, text)
        carry, h = self.cell(carry, jnp.concatenate(parts, -1))
        return carry, self.head(h)

    def __call__(self, tokens, lengths, images, prev_actions):
        """Teacher-forced logits [B, T, 4] for crops images [B, T, crop, C] (table),
        [B, T, H, crop, C] (official) or [B, T, crop, crop, 3] (rgb); used to initialise."""
        text = self.encode(tokens, lengths)
        carry = self.initial_carry(tokens.shape[0])
        logits = []
        for t in range(images.shape[1]):
            carry, out = self.step(carry, text, images[:, t], prev_actions[:, t])
            logits.append(out)
        return jnp.stack(logits, 1)


def navigator_policy(model: Navigator, params, features: jax.Array, yaw: jax.Array, crop: int,
                     text: jax.Array, gold: jax.Array | None = None, greedy: bool = True,
                     convention: str = "centred"):
    """A simulator policy (`ttw_jax.core.env`) driven by `model`; it sees the `crop` columns of
    the feature table around its heading (`convention`: the table's, `features.CONVENTIONS`),
    or with the "rgb" encoder the crop x crop perspective image there (`features.agent_view`).

    Returns (policy, initial carry). With `gold` [B, T] the demonstrated action is executed
    (teacher forcing); otherwise the argmax (greedy) or a sample. The policy's per-step output
    is the logits [B, 4].
    """
    def policy(carry, state, t, key):
        lstm, prev = carry
        image = agent_view(features, yaw, state.pano, state.heading, crop, convention,
                           model.image_encoder)
        lstm, logits = model.apply(params, lstm, text, image, prev, method=Navigator.step)
        action = choose_action(logits, t, key, gold, greedy)
        return (lstm, action), action, logits

    batch = text.shape[0]
    zeros = jnp.zeros((batch, model.hidden), jnp.float32)
    return policy, ((zeros, zeros), jnp.full((batch,), START, jnp.int32))
