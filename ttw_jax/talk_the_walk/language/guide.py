"""Natural-language guide for Talk The Walk: localizes the tourist from a (multi-utterance) message.

A BiLSTM reads the message; a learned control vector c_0 drives 2*T_max+1 attention steps over
the valid tokens: alpha = softmax_i(c . W h_i), e = sum_i alpha_i h_i, c_next = Linear([c; e]).
The first T_max+1 extractions are observation embeddings, the next T_max action embeddings. The
guide's map (bags of landmark embeddings) is transformed by one shared MASC (mask logits from
action extraction t by its own Dense) or by the no-MASC convolution, t = 1..T_max times. With
positional gates g_t, g'_t and steps t > T masked out, the location logits are
  logits[c] = < sum_{t<=T} g_t * M_t[c], sum_{t<=T} g'_t * proj(obs_t) >.
T is given, or predicted from the BiLSTM's final states (`T_logits`, softmax over 0..T_max).
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from ttw_jax.talk_the_walk.emergent.model import BagOfLandmarks
from ttw_jax.talk_the_walk.maps import NUM_LANDMARK_IDS
from ttw_jax.talk_the_walk.masc import MASC, NoMASC

_gate_init = nn.initializers.normal(0.1)


class NLGuide(nn.Module):
    """Location logits over the 16 corners of a 4x4 window from a tokenised message."""
    vocab_size: int
    num_landmark_ids: int = NUM_LANDMARK_IDS
    T_max: int = 3
    embed: int = 128
    hidden: int = 256  # per direction
    features: int = 128
    masc: bool = True
    kernel_init: str = "identity"

    def setup(self):
        self.word_emb = nn.Embed(self.vocab_size, self.embed)
        self.encoder = nn.Bidirectional(nn.RNN(nn.OptimizedLSTMCell(self.hidden)),
                                        nn.RNN(nn.OptimizedLSTMCell(self.hidden)),
                                        return_carry=True)
        self.T_head = nn.Dense(self.T_max + 1)
        self.control0 = self.param("control0", nn.initializers.normal(0.1), (2 * self.hidden,))
        self.att_key = nn.Dense(2 * self.hidden, use_bias=False)
        self.control_next = nn.Dense(2 * self.hidden)
        self.obs_proj = nn.Dense(self.features)
        self.map_emb = BagOfLandmarks(self.num_landmark_ids, self.features)
        self.map_gates = self.param("map_gates", _gate_init, (self.T_max + 1, self.features))
        self.obs_gates = self.param("obs_gates", _gate_init, (self.T_max + 1, self.features))
        conv = MASC if self.masc else NoMASC
        self.conv = conv(self.features, kernel_init=self.kernel_init)
        if self.masc:
            self.mask_heads = [nn.Dense(9, name=f"mask_{t}") for t in range(self.T_max)]

    def extract(self, h: jax.Array, valid: jax.Array, steps: int):
        """Control-vector attention: (B, steps, 2H) extractions and (B, steps, L) weights."""
        keys = self.att_key(h)  # (B, L, 2H)
        c = jnp.broadcast_to(self.control0, (h.shape[0], self.control0.shape[0]))
        out, weights = [], []
        for _ in range(steps):
            scores = jnp.where(valid, jnp.einsum("bd,bld->bl", c, keys), -1e9)
            alpha = jax.nn.softmax(scores, axis=-1)
            e = jnp.einsum("bl,bld->bd", alpha, h)
            c = self.control_next(jnp.concatenate([c, e], axis=-1))
            out.append(e)
            weights.append(alpha)
        return jnp.stack(out, axis=1), jnp.stack(weights, axis=1)

    def __call__(self, message: jax.Array, message_len: jax.Array, landmarks: jax.Array,
                 T: jax.Array | None = None) -> dict:
        """message (B, L) ids, message_len (B,) >= 1, landmarks (B, 4, 4, K), T (B,) int or None
        (T_max). Returns logits (B, 16) at T; logits_all (B, T_max+1, 16), the logits for every
        T; T_logits (B, T_max+1); attention (B, 2*T_max+1, L)."""
        b, length = message.shape
        message_len = jnp.asarray(message_len, jnp.int32)
        (c_fwd, c_bwd), h = self.encoder(self.word_emb(message), seq_lengths=message_len)
        T_logits = self.T_head(jnp.concatenate([c_fwd[1], c_bwd[1]], axis=-1))
        valid = jnp.arange(length)[None] < message_len[:, None]
        n_obs = self.T_max + 1
        steps = n_obs + (self.T_max if self.masc else 0)
        ext, attention = self.extract(h, valid, steps)

        maps = [self.map_emb(landmarks)]  # (B, 4, 4, F)
        for t in range(self.T_max):
            if self.masc:
                maps.append(self.conv(maps[-1], self.mask_heads[t](ext[:, n_obs + t])))
            else:
                maps.append(self.conv(maps[-1]))
        maps = jnp.stack(maps, axis=1).reshape(b, n_obs, -1, self.features)  # (B, T+1, 16, F)
        cum_maps = jnp.cumsum(maps * jax.nn.sigmoid(self.map_gates)[None, :, None], axis=1)
        obs = self.obs_proj(ext[:, :n_obs]) * jax.nn.sigmoid(self.obs_gates)  # (B, T+1, F)
        logits_all = jnp.einsum("btcf,btf->btc", cum_maps, jnp.cumsum(obs, axis=1))
        T = jnp.full((b,), self.T_max, jnp.int32) if T is None else jnp.asarray(T, jnp.int32)
        T = jnp.clip(T, 0, self.T_max)
        logits = jnp.take_along_axis(logits_all, T[:, None, None], axis=1)[:, 0]
        return {"logits": logits, "logits_all": logits_all, "T_logits": T_logits,
                "attention": attention}
