"""A VALAN-style R2R / RxR agent (Lansing et al. 2019's framework, in which Ku et al. 2020 implement
their RxR agents), with the interface of `ttw_jax.rxr.rcm.RCMAgent` (`encode`, `initial_carry`,
`step`, `__call__`), so `rcm_policy`, `mixed_loss` and the trainer drive either.

- Instruction encoder: word embeddings (or a dense projection of per-token text features, e.g.
  mBERT's) into `encoder_layers` stacked bidirectional LSTMs of `encoder` units per direction
  (padded tokens skipped: each direction runs over the instruction's own length). The final
  (h, c) of every layer, forward and backward concatenated, go through one dense layer to the
  decoder's initial (h, c) of each of its layers.
- Decoder, once per step: attention pooling of the 36 views (query: a projection of the top
  layer's previous h; keys = values: a projection of the view features; scaled dot product with
  a learned scalar scale starting at 1, Keras' `Attention(use_scale=True)`) -> v_t; with
  `embed_action` the previous action's encoding is concatenated to v_t; `decoder_layers` stacked
  LSTMs of `decoder` units; the output is the top h, or with `embed_action` tanh(W [v_t; h]).
- Text attention from the output over a projection of the instruction (padded tokens masked)
  -> c_text; visual attention from c_text over another projection of the views -> c_visual.
- Action logits: a projection of [output; c_text; c_visual] dotted with each navigable
  direction's encoding (a dense projection of its features) and with a learned STOP encoding
  (action 0, as `RCMAgent`); absent directions masked. The chosen action's encoding is the next
  step's previous-action input (a learned start vector before the first action).
- Value head: Dense(value_hidden) -> ReLU -> Dense(1) on c_text (the actor-critic learner,
  `ttw_jax.rxr.losses.mixed_loss` with `pg="actor_critic"`).

The defaults are VALAN's R2R sizes. `encode`'s context is a pair (the instruction's projection
for the text attention, [B, L, text_attention], computed once instead of every step; the
decoder's initial state [B, decoder_layers * 2 * decoder]), which `initial_carry` unpacks. The
returned visual attention logits (for the attention-grounding loss) are the visual attention's,
whose query reads the text, as `RCMAgent`'s.
"""
from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from ttw_jax.core.train.precision import softmax
from ttw_jax.rxr.rcm import NEG
from ttw_jax.rxr.views import STRUCTURE_DIM


class BiLSTMEncoder(nn.Module):
    """(outputs [B, L, 2 * hidden] (zero at padding), mask [B, L], final states [B, layers * 4 *
    hidden]: per layer the (h, c) of the forward and the backward direction, as
    [h_fwd; h_bwd; c_fwd; c_bwd])."""
    vocab_size: int
    embed_dim: int = 128
    hidden: int = 256
    layers: int = 2

    @nn.compact
    def __call__(self, tokens, lengths, text_features=None):
        mask = jnp.arange(tokens.shape[1])[None] < lengths[:, None]
        if text_features is None:
            x = nn.Embed(self.vocab_size, self.embed_dim)(tokens)
        else:   # stored as bfloat16: computed in float32
            x = nn.Dense(self.hidden)(text_features.astype(jnp.float32))
        n = jnp.maximum(lengths, 1)
        finals = []
        for i in range(self.layers):
            rnn = nn.Bidirectional(
                nn.RNN(nn.OptimizedLSTMCell(self.hidden, name=f"forward_{i}")),
                nn.RNN(nn.OptimizedLSTMCell(self.hidden, name=f"backward_{i}")))
            ((c_f, h_f), (c_b, h_b)), x = rnn(x, seq_lengths=n, return_carry=True)
            x = x * mask[..., None]
            finals += [h_f, h_b, c_f, c_b]
        return x, mask, jnp.concatenate(finals, -1)


class ScaledDotAttention(nn.Module):
    """Keras `Attention(use_scale=True)`: scores s * q.k with a learned scalar s (starting at 1),
    softmax over the keys (`mask` False: excluded); returns (scores [B, N], weighted values
    [B, H]). keys = values [B, N, H], query [B, H]."""

    @nn.compact
    def __call__(self, query, keys, mask=None):
        scale = self.param("scale", nn.initializers.ones, ())
        z = jnp.einsum("bnh,bh->bn", keys, query) * scale.astype(keys.dtype)
        if mask is not None:
            z = jnp.where(mask, z, NEG)
        return z, jnp.einsum("bn,bnh->bh", softmax(z), keys)


class ValanAgent(nn.Module):
    """`use_language=False`: the vision-only ablation (a zero instruction context and initial
    state); `use_structure=False` drops the directions' structural features (`RCMAgent`'s);
    `embed_action`: the previous action's encoding is a decoder input."""
    vocab_size: int
    embed_dim: int = 128
    encoder: int = 256            # units per direction of each encoder layer
    encoder_layers: int = 2
    decoder: int = 512
    decoder_layers: int = 2
    text_attention: int = 512
    visual_attention: int = 256
    action: int = 256
    value_hidden: int = 64
    embed_action: bool = True
    use_language: bool = True
    use_structure: bool = True
    angle_dim: int = 4            # the observations' angle encoding (`env.angle_encoding`)

    def setup(self):
        self.instruction = BiLSTMEncoder(self.vocab_size, self.embed_dim, self.encoder,
                                         self.encoder_layers)
        self.initial_state = nn.Dense(self.decoder_layers * 2 * self.decoder)
        self.text_keys = nn.Dense(self.text_attention)
        self.pool_query = nn.Dense(self.visual_attention)
        self.pool_keys = nn.Dense(self.visual_attention)
        self.pool = ScaledDotAttention()
        self.cells = [nn.OptimizedLSTMCell(self.decoder) for _ in range(self.decoder_layers)]
        if self.embed_action:
            self.output_proj = nn.Dense(self.decoder)
        self.text_query = nn.Dense(self.text_attention)
        self.text = ScaledDotAttention()
        self.visual_query = nn.Dense(self.visual_attention)
        self.visual_keys = nn.Dense(self.visual_attention)
        self.visual = ScaledDotAttention()
        self.act_query = nn.Dense(self.action)
        self.cand_proj = nn.Dense(self.action)
        init = nn.initializers.normal(0.1)
        self.stop = self.param("stop", init, (self.action,))
        self.start = self.param("start", init, (self.action,))
        self.value_mid = nn.Dense(self.value_hidden)
        self.value_out = nn.Dense(1)

    def encode(self, tokens, lengths, text_features=None):
        """((instruction keys [B, L, text_attention], decoder initial state [B, decoder_layers
        * 2 * decoder]), mask [B, L]); the vision-only agent gets zeros and an all-True mask."""
        seq, mask, finals = self.instruction(tokens, lengths, text_features)
        keys, state = self.text_keys(seq), self.initial_state(finals)
        if not self.use_language:
            keys, state, mask = jnp.zeros_like(keys), jnp.zeros_like(state), jnp.ones_like(mask)
        return (keys, state), mask

    def initial_carry(self, batch_size: int, ctx=None):
        """(per decoder layer its (c, h) [B, decoder], ..., previous action encoding [B, action]):
        the state `encode` computed (zeros without `ctx`) and the learned start vector."""
        if ctx is None:
            state = jnp.zeros((batch_size, self.decoder_layers * 2 * self.decoder))
        else:
            state = ctx[1]
        parts = jnp.split(state, 2 * self.decoder_layers, -1)     # h, c of each layer
        layers = tuple((parts[2 * i + 1], parts[2 * i]) for i in range(self.decoder_layers))
        return (*layers, jnp.broadcast_to(self.start, (batch_size, self.action)))

    def step(self, carry, ctx, ctx_mask, views, cands, cand_mask, t=0):
        """One decision. views [B, 36, F], cands [B, K, F'], cand_mask [B, K]. Returns (the
        decoder layers' (c, h), dict with logits [B, K + 1], vis_logits [B, 36], txt_logits
        [B, L] (masked), action_features [B, K + 1, action] (STOP first), value [B])."""
        del t
        *layers, prev = carry
        keys = ctx[0]
        if not self.use_structure:   # edge length and neighbour degree come last (`observe`)
            cands = cands[..., :cands.shape[-1] - STRUCTURE_DIM]
        _, v = self.pool(self.pool_query(layers[-1][1]), self.pool_keys(views))
        x = jnp.concatenate([v, prev], -1) if self.embed_action else v
        new = []
        for cell, state in zip(self.cells, layers):
            state, x = cell(state, x)
            new.append(state)
        out = jnp.tanh(self.output_proj(jnp.concatenate([v, x], -1))) if self.embed_action else x
        zt, text = self.text(self.text_query(out), keys, ctx_mask)
        zv, visual = self.visual(self.visual_query(text), self.visual_keys(views))
        acts = jnp.concatenate([jnp.broadcast_to(self.stop, (out.shape[0], 1, self.action)),
                                self.cand_proj(cands)], 1)
        query = self.act_query(jnp.concatenate([out, text, visual], -1))
        logits = jnp.einsum("bkh,bh->bk", acts, query)
        mask = jnp.concatenate([jnp.ones_like(cand_mask[:, :1]), cand_mask], 1)
        value = self.value_out(nn.relu(self.value_mid(text)))[:, 0]
        return tuple(new), dict(logits=jnp.where(mask, logits, NEG), vis_logits=zv,
                                txt_logits=zt, action_features=acts, value=value)

    def __call__(self, tokens, lengths, views, cands, cand_mask, text_features=None):
        """Logits [B, K + 1] of a first step (used to initialise)."""
        ctx, mask = self.encode(tokens, lengths, text_features)
        _, out = self.step(self.initial_carry(tokens.shape[0], ctx), ctx, mask, views, cands,
                           cand_mask)
        return out["logits"]
