"""The RCM-style R2R / RxR agent (Wang et al. 2019, as used by Ku et al. 2020 for RxR).

- Instruction encoder: word embeddings (or projected per-token text features, e.g. mBERT) then
  `conv_layers` 1-D convolutions with ReLU and residual connections -> context [B, L, H].
- Decoder, once per step: dot-product attention from the previous hidden state over the 36 view
  features -> visual context; an LSTM whose input is [previous action's direction feature; visual
  context]; dot-product attention from the new hidden state over the instruction -> text context;
  h~ = tanh(W [h; text; visual]).
- Action logits: similarity of h~ (through a linear map) with each navigable direction's feature
  and with a learned STOP vector; padded directions are masked out. Action 0 = STOP, action i =
  the i-th neighbour (the simulator's panoramic action space).
The visual / text attention logits are returned for the attention-grounding loss; with
`value_hidden` > 0 so is a value of the state (VALAN's head on the text context, for the
actor-critic learner). `ttw_jax.rxr.valan.ValanAgent` is VALAN's R2R agent with this interface.
"""
from __future__ import annotations

import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from ttw_jax.core.train.precision import softmax
from ttw_jax.rxr import env as mp
from ttw_jax.rxr.views import STRUCTURE_DIM

NEG = -1e9


class InstructionCNN(nn.Module):
    """Returns (context [B, L, hidden], mask [B, L] bool)."""
    vocab_size: int
    embed_dim: int = 128
    hidden: int = 256
    layers: int = 2
    kernel: int = 3

    @nn.compact
    def __call__(self, tokens: jax.Array, lengths: jax.Array,
                 text_features: jax.Array | None = None):
        mask = jnp.arange(tokens.shape[1])[None] < lengths[:, None]
        if text_features is None:
            x = nn.Embed(self.vocab_size, self.embed_dim)(tokens)
        else:   # stored as bfloat16: computed in float32
            x = text_features.astype(jnp.float32)
        x = nn.Dense(self.hidden)(x) * mask[..., None]
        for _ in range(self.layers):
            x = (x + nn.relu(nn.Conv(self.hidden, (self.kernel,), padding="SAME")(x))
                 ) * mask[..., None]
        return x, mask


class RCMAgent(nn.Module):
    """`use_language=False` is the vision-only ablation (the instruction is never read); the
    language-only ablation is the same agent given an empty view-feature table (angles only).
    `use_structure=False` leaves out the two structural features of each navigable direction
    (edge length, the neighbour's degree), which the paper's agent does not have."""
    vocab_size: int
    embed_dim: int = 128
    hidden: int = 256
    conv_layers: int = 2
    kernel: int = 3
    use_language: bool = True
    step_embedding: int = 0
    use_structure: bool = True   # False: drop the directions' structural features (the paper's)
    # Both attentions run `chunk` batch rows at a time (`lax.map`'s batch_size; a remainder in
    # one more block), so that a block's [chunk, 36, H] view projections and [chunk, L, H]
    # instruction context stay in cache from the logits to the weighted sum instead of two or
    # more passes over [B, ., H] in memory (a rollout step at batch 1,024: ~33 -> ~28 ms); the
    # same function (equal to float rounding, tests/rxr/test_rcm.py). 0: the whole batch.
    chunk: int = 64
    angle_dim: int = 4    # the observations' angle encoding (`env.angle_encoding`): 4 | 128
    # > 0: a value head, Dense(value_hidden) -> ReLU -> Dense(1) on the text context (VALAN's,
    # for the actor-critic learner: `losses.mixed_loss` with pg="actor_critic"); 0: none
    value_hidden: int = 0

    def setup(self):
        self.encoder = InstructionCNN(self.vocab_size, self.embed_dim, self.hidden,
                                      self.conv_layers, self.kernel)
        self.view_proj = nn.Dense(self.hidden)
        self.cand_proj = nn.Dense(self.hidden)
        init = nn.initializers.normal(0.1)
        self.stop = self.param("stop", init, (self.hidden,))
        self.start = self.param("start", init, (self.hidden,))
        self.vis_query = nn.Dense(self.hidden, use_bias=False)
        self.txt_query = nn.Dense(self.hidden, use_bias=False)
        self.cell = nn.OptimizedLSTMCell(self.hidden)
        self.mix = nn.Dense(self.hidden)
        self.act_query = nn.Dense(self.hidden, use_bias=False)
        if self.step_embedding:
            self.step_embed = nn.Embed(self.step_embedding, self.hidden)
        if self.value_hidden:
            self.value_mid = nn.Dense(self.value_hidden)
            self.value_out = nn.Dense(1)

    def encode(self, tokens, lengths, text_features=None):
        """(context [B, L, H], mask [B, L]); the vision-only agent gets a zero context."""
        ctx, mask = self.encoder(tokens, lengths, text_features)
        if not self.use_language:
            ctx, mask = jnp.zeros_like(ctx), jnp.ones_like(mask)
        return ctx, mask

    def initial_carry(self, batch_size: int, ctx=None):
        """(c, h, previous action feature), each [B, H]; `ctx` (`encode`'s, which `ValanAgent`
        starts its decoder from) is not read."""
        del ctx
        zeros = jnp.zeros((batch_size, self.hidden))
        return zeros, zeros, jnp.broadcast_to(self.start, (batch_size, self.hidden))

    def step(self, carry, ctx, ctx_mask, views, cands, cand_mask, t=0):
        """One decision at step `t`. views [B, 36, F], cands [B, K, F'], cand_mask [B, K].

        Returns (lstm carry (c, h), dict with logits [B, K + 1], vis_logits [B, 36], txt_logits
        [B, L] (masked), action_features [B, K + 1, H] (STOP first, for the next step's input),
        and with a value head the state's value [B]).
        """
        c, h, prev = carry
        if not self.use_structure:   # edge length and neighbour degree come last (`observe`)
            cands = cands[..., :cands.shape[-1] - STRUCTURE_DIM]
        scale = 1.0 / math.sqrt(self.hidden)    # a Python float: keeps the scores' dtype
        if self.is_initializing():     # creates view_proj's parameters
            self.view_proj(views[:, :1])
        proj = self.view_proj.variables["params"]   # used inside lax.map

        def view_attention(inputs):      # one episode: [36, F], [H] -> [36], [H]
            views, query = inputs
            v = jnp.tanh(views @ proj["kernel"] + proj["bias"])
            zv = v @ query * scale
            return zv, softmax(zv) @ v

        zv, vbar = jax.lax.map(view_attention, (views, self.vis_query(h)), batch_size=self.chunk)
        x = jnp.concatenate([prev, vbar], -1)
        if self.step_embedding:
            t = jnp.minimum(jnp.broadcast_to(t, h.shape[:1]), self.step_embedding - 1)
            x = jnp.concatenate([x, self.step_embed(t)], -1)
        (c, h), _ = self.cell((c, h), x)

        def text_attention(inputs):      # one episode: [L, H], [L], [H] -> [L], [H]
            ctx, ctx_mask, query = inputs
            zt = jnp.where(ctx_mask, ctx @ query * scale, NEG)
            return zt, softmax(zt) @ ctx

        zt, tbar = jax.lax.map(text_attention, (ctx, ctx_mask, self.txt_query(h)),
                               batch_size=self.chunk)
        ht = jnp.tanh(self.mix(jnp.concatenate([h, tbar, vbar], -1)))
        acts = jnp.concatenate([jnp.broadcast_to(self.stop, (h.shape[0], 1, self.hidden)),
                                jnp.tanh(self.cand_proj(cands))], 1)
        logits = jnp.einsum("bkh,bh->bk", acts, self.act_query(ht))
        mask = jnp.concatenate([jnp.ones_like(cand_mask[:, :1]), cand_mask], 1)
        out = dict(logits=jnp.where(mask, logits, NEG), vis_logits=zv, txt_logits=zt,
                   action_features=acts)
        if self.value_hidden:
            out["value"] = self.value_out(nn.relu(self.value_mid(tbar)))[:, 0]
        return (c, h), out

    def __call__(self, tokens, lengths, views, cands, cand_mask, text_features=None):
        """Logits [B, K + 1] of a first step (used to initialise; pass `text_features` [B, L, D]
        for an agent that reads text features instead of word embeddings)."""
        ctx, mask = self.encode(tokens, lengths, text_features)
        _, out = self.step(self.initial_carry(tokens.shape[0]), ctx, mask, views, cands,
                           cand_mask)
        return out["logits"]


OUTPUTS = ("logits", "vis_logits", "txt_logits", "value")   # kept per step when present


def rcm_policy(model: RCMAgent, params, graph, view_features: jax.Array, ctx,
               ctx_mask: jax.Array, mode: str = "greedy", gold: jax.Array | None = None,
               forced: jax.Array | None = None):
    """A Matterport simulator policy (`ttw_jax.core.env`) driven by `model`: an `RCMAgent` or
    any module with its interface (`ttw_jax.rxr.valan.ValanAgent`; methods called by name, the
    observations' angle encoding of the model's `angle_dim`). `ctx`, `ctx_mask`: its `encode`.

    mode 'greedy' takes the argmax, 'sample' samples from the softmax. With `gold` [B, T] and
    `forced` [B] bool, forced rows execute the gold action instead (teacher forcing). Returns
    (policy, initial carry); the per-step output is {logits, vis_logits, txt_logits} and the
    `value` of a model with a value head.
    """
    if mode not in ("greedy", "sample"):
        raise ValueError(f"mode must be 'greedy' or 'sample', got {mode!r}")
    angle_dim = getattr(model, "angle_dim", 4)

    def policy(carry, state, t, key):
        obs = jax.vmap(functools.partial(mp.observe, angle_dim=angle_dim),
                       in_axes=(None, 0, None))(graph, state, view_features)
        lstm, out = model.apply(params, carry, ctx, ctx_mask, obs["views"], obs["cands"],
                                obs["cand_mask"], t, method="step")
        logits = out["logits"]
        if mode == "greedy":
            action = jnp.argmax(logits, -1)
        else:
            action = jax.random.categorical(key, logits)
        if gold is not None:
            action = jnp.where(forced, gold[:, t], action)
        action = action.astype(jnp.int32)
        prev = jnp.take_along_axis(out["action_features"], action[:, None, None], 1)[:, 0]
        return (*lstm, prev), action, {k: out[k] for k in OUTPUTS if k in out}

    carry = model.apply(params, ctx_mask.shape[0], ctx, method="initial_carry")
    return policy, carry
