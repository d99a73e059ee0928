"""Natural-language guide for Talk The Walk: localizes the tourist from a (multi-utterance) message.

A BiLSTM reads the message into states h_k (section 4.2, eq. 2). Observation embeddings come from
a chain of T_max+1 attention hops (eq. 3): a learned control vector c_0, scores s_k = h_k . c_t
over the valid tokens, e_t = sum_k softmax(s)_k h_k, c_{t+1} = Linear([c_t; e_t]). Action
embeddings come "by the same mechanism" from a second chain of T_max hops with its own initial
control and its own update, and one shared linear map turns each into the 9 MASC mask logits
(eq. 4), as in the released code. The guide's map (bags of landmark embeddings) is transformed
by one shared MASC or by the no-MASC convolution, t = 1..T_max times. With positional gates g_t,
g'_t and steps t > T masked out, the location logits are
  logits[c] = < sum_{t<=T} g_t * M_t[c], sum_{t<=T} g'_t * proj(obs_t) >.
T is given, or predicted (`T_logits`, softmax over 0..T_max) from the BiLSTM's final states
(forward at the last token, backward at the first; `T_input="final_states"`) or from both
directions' states at the last token (`"last_token"`, the released `T_prediction_fn` over
`hidden_states[last_state_indices]`). `proj(obs_t)` is a linear map of the 2*hidden extraction
to the map's `features` (`obs_projection=True`), or the extraction itself
(`obs_projection=False`, the released GuideLanguage, whose map has 2*hidden channels: then
`features` must be 2*hidden).

Options restoring this module's earlier design: `key_projection=True` scores s_k = c_t . W h_k
with a learned key map `att_key`; `action_chain="shared"` extracts observations and actions with
one chain of 2*T_max+1 hops (the first T_max+1 observations, the rest actions);
`mask_head="per_step"` gives each MASC step its own Dense (`mask_{t}`).
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from ttw_jax.core.train.precision import softmax
from ttw_jax.talk_the_walk.emergent.model import BagOfLandmarks
from ttw_jax.talk_the_walk.maps import NUM_LANDMARK_IDS
from ttw_jax.talk_the_walk.masc import MASC, NoMASC

_gate_init = nn.initializers.normal(0.1)
ACTION_CHAINS = ("separate", "shared")
MASK_HEADS = ("shared", "per_step")
T_INPUTS = ("final_states", "last_token")


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
    key_projection: bool = False     # True: scores c . W h (a learned key map), not h . c
    action_chain: str = "separate"   # separate | shared (one chain of 2*T_max+1 hops)
    mask_head: str = "shared"        # shared | per_step (one Dense per MASC step)
    T_input: str = "final_states"    # final_states | last_token (the T head's input)
    obs_projection: bool = True      # False: no map from the extractions to `features`

    def setup(self):
        for value, allowed, name in ((self.action_chain, ACTION_CHAINS, "action_chain"),
                                     (self.mask_head, MASK_HEADS, "mask_head"),
                                     (self.T_input, T_INPUTS, "T_input")):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        if not self.obs_projection and self.features != 2 * self.hidden:
            raise ValueError(f"obs_projection=False scores the map with the 2*hidden = "
                             f"{2 * self.hidden} extractions themselves: features must be "
                             f"{2 * self.hidden}, got {self.features}")
        self.word_emb = nn.Embed(self.vocab_size, self.embed)
        self.encoder = nn.Bidirectional(nn.RNN(nn.OptimizedLSTMCell(self.hidden)),
                                        nn.RNN(nn.OptimizedLSTMCell(self.hidden)),
                                        return_carry=True)
        self.T_head = nn.Dense(self.T_max + 1)
        self.control0 = self.param("control0", nn.initializers.normal(0.1), (2 * self.hidden,))
        if self.key_projection:
            self.att_key = nn.Dense(2 * self.hidden, use_bias=False)
        self.control_next = nn.Dense(2 * self.hidden)
        if self.masc and self.action_chain == "separate":
            self.act_control0 = self.param("act_control0", nn.initializers.normal(0.1),
                                           (2 * self.hidden,))
            self.act_control_next = nn.Dense(2 * self.hidden)
        if self.obs_projection:
            self.obs_proj = nn.Dense(self.features)
        self.map_emb = BagOfLandmarks(self.num_landmark_ids, self.features)
        self.map_gates = self.param("map_gates", _gate_init, (self.T_max + 1, self.features))
        self.obs_gates = self.param("obs_gates", _gate_init, (self.T_max + 1, self.features))
        conv = MASC if self.masc else NoMASC
        self.conv = conv(self.features, kernel_init=self.kernel_init)
        if self.masc:
            if self.mask_head == "shared":
                self.mask_linear = nn.Dense(9)
            else:
                self.mask_heads = [nn.Dense(9, name=f"mask_{t}") for t in range(self.T_max)]

    def extract(self, h: jax.Array, valid: jax.Array, steps: int, control0: jax.Array,
                control_next):
        """One chain of attention hops from `control0` updated by `control_next`:
        (B, steps, 2H) extractions and (B, steps, L) attention weights."""
        keys = self.att_key(h) if self.key_projection else h  # (B, L, 2H)
        c = jnp.broadcast_to(control0, (h.shape[0], control0.shape[0]))
        out, weights = [], []
        for _ in range(steps):
            scores = jnp.where(valid, jnp.einsum("bd,bld->bl", c, keys), -1e9)
            alpha = softmax(scores, axis=-1)
            e = jnp.einsum("bl,bld->bd", alpha, h)
            c = control_next(jnp.concatenate([c, e], axis=-1))
            out.append(e)
            weights.append(alpha)
        return jnp.stack(out, axis=1), jnp.stack(weights, axis=1)

    def mask_logits(self, action: jax.Array, t: int) -> jax.Array:
        """(B, 9) MASC mask logits of action extraction `action` (B, 2H) at step t."""
        return self.mask_linear(action) if self.mask_head == "shared" else self.mask_heads[t](action)

    def __call__(self, message: jax.Array, message_len: jax.Array, landmarks: jax.Array,
                 T: jax.Array | None = None) -> dict:
        """message (B, L) ids, message_len (B,) >= 1, landmarks (B, 4, 4, K), T (B,) int or None
        (T_max). Returns logits (B, 16) at T; logits_all (B, T_max+1, 16), the logits for every
        T; T_logits (B, T_max+1); attention (B, 2*T_max+1, L): the observation hops, then
        the action hops (none without MASC: (B, T_max+1, L))."""
        b, length = message.shape
        message_len = jnp.asarray(message_len, jnp.int32)
        (c_fwd, c_bwd), h = self.encoder(self.word_emb(message), seq_lengths=message_len)
        if self.T_input == "last_token":
            T_in = jnp.take_along_axis(h, (message_len - 1)[:, None, None], axis=1)[:, 0]
        else:
            T_in = jnp.concatenate([c_fwd[1], c_bwd[1]], axis=-1)
        T_logits = self.T_head(T_in)
        valid = jnp.arange(length)[None] < message_len[:, None]
        n_obs = self.T_max + 1
        if self.masc and self.action_chain == "separate":
            obs_ext, obs_att = self.extract(h, valid, n_obs, self.control0, self.control_next)
            act_ext, act_att = self.extract(h, valid, self.T_max, self.act_control0,
                                            self.act_control_next)
            ext = jnp.concatenate([obs_ext, act_ext], axis=1)
            attention = jnp.concatenate([obs_att, act_att], axis=1)
        else:
            steps = n_obs + (self.T_max if self.masc else 0)
            ext, attention = self.extract(h, valid, steps, self.control0, self.control_next)

        maps = [self.map_emb(landmarks)]  # (B, 4, 4, F)
        for t in range(self.T_max):
            if self.masc:
                maps.append(self.conv(maps[-1], self.mask_logits(ext[:, n_obs + t], t)))
            else:
                maps.append(self.conv(maps[-1]))
        maps = jnp.stack(maps, axis=1).reshape(b, n_obs, -1, self.features)  # (B, T+1, 16, F)
        cum_maps = jnp.cumsum(maps * jax.nn.sigmoid(self.map_gates)[None, :, None], axis=1)
        obs = ext[:, :n_obs]
        obs = (self.obs_proj(obs) if self.obs_projection else obs) * jax.nn.sigmoid(
            self.obs_gates)  # (B, T+1, F)
        logits_all = jnp.einsum("btcf,btf->btc", cum_maps, jnp.cumsum(obs, axis=1))
        T = jnp.full((b,), self.T_max, jnp.int32) if T is None else jnp.asarray(T, jnp.int32)
        T = jnp.clip(T, 0, self.T_max)
        logits = jnp.take_along_axis(logits_all, T[:, None, None], axis=1)[:, 0]
        return {"logits": logits, "logits_all": logits_all, "T_logits": T_logits,
                "attention": attention}
