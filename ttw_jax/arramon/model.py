"""The ArraMon vision-and-language baseline (Kim et al. 2020, section 6 and App. D) and its
vision-only / language-only ablations.

One `PhaseAgent` per phase (navigation and assembly keep separate parameters):
- Instruction: 300-d word embeddings and an LSTM (hidden 128) give word states U [B, L, 128].
- Vision: each entity of the egocentric view (`ttw_jax.arramon.views`) is the sum of its
  pattern / colour / type embeddings and a projection of its geometry; a learned null entity is
  always present, so an empty view is still attendable. V [B, M + 1, 128].
- BiDAF (Seo et al. 2017) between V (context) and U (query): similarity
  S[m, l] = w . [v_m; u_l; v_m * u_l]; vision-to-language attention gives u~_m, language-to-vision
  attention (softmax over m of max_l S) gives h~; G_m = ReLU(W [v_m; u~_m; v_m * u~_m; v_m * h~]).
- Action LSTM (hidden 128) fed the previous action's 64-d embedding and the general attention
  (score g_m^T W h_{t-1}) of its state over G; logits = linear([h_t; context]).
- `kind`: 'vl' (the above), 'lo' (attention over U only), 'vo' (attention over V only).
Dropout 0.3 on embeddings and the attended context while training. `step` runs once per
simulator step, so the agent lives inside the simulator's `lax.scan`: `navigation_policy` /
`assembly_policy` are the policies (`ttw_jax.core.env`) that run it in each phase's environment.
"""
from __future__ import annotations

from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from ttw_jax.arramon.views import assembly_view, navigation_view
from ttw_jax.core.env import choose_action

NUM_ACTIONS = 4
START = NUM_ACTIONS          # previous-action id at t = 0
KINDS = ("vl", "vo", "lo")


def _masked_softmax(scores: jax.Array, mask: jax.Array) -> jax.Array:
    scores = jnp.where(mask, scores, -1e9)
    return jax.nn.softmax(scores, -1) * mask


class PhaseAgent(nn.Module):
    vocab_size: int
    num_attrs: tuple[int, int, int]        # pattern, colour, type id counts (0 = unknown)
    kind: str = "vl"
    embed_dim: int = 300
    action_dim: int = 64
    hidden: int = 128
    dropout: float = 0.3

    def setup(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown agent kind {self.kind!r}; choose from {KINDS}")
        self.words = nn.Embed(self.vocab_size, self.embed_dim)
        self.encoder = nn.RNN(nn.OptimizedLSTMCell(self.hidden))
        self.attr_embeds = [nn.Embed(n, self.hidden) for n in self.num_attrs]
        self.geo = nn.Dense(self.hidden)
        self.null = self.param("null", nn.initializers.normal(0.1), (self.hidden,))
        self.sim_w = self.param("sim_w", nn.initializers.normal(0.1), (3, self.hidden))
        self.fuse = nn.Dense(self.hidden)
        self.attend = nn.Dense(self.hidden, use_bias=False)
        self.action_embed = nn.Embed(NUM_ACTIONS + 1, self.action_dim)
        self.cell = nn.OptimizedLSTMCell(self.hidden)
        self.head = nn.Dense(NUM_ACTIONS)
        self.drop = nn.Dropout(self.dropout)

    def encode(self, tokens: jax.Array, lengths: jax.Array, train: bool = False):
        """(U [B, L, hidden] word states, mask [B, L])."""
        mask = jnp.arange(tokens.shape[1])[None] < lengths[:, None]
        emb = self.drop(self.words(tokens), deterministic=not train)
        return self.encoder(emb, seq_lengths=lengths), mask

    def entities(self, attrs: jax.Array, geo: jax.Array, visible: jax.Array, train: bool):
        """(V [B, M + 1, hidden] with the null entity first, mask [B, M + 1])."""
        v = self.geo(geo)
        for i, embed in enumerate(self.attr_embeds):
            v = v + embed(attrs[..., i])
        v = self.drop(nn.relu(v), deterministic=not train)
        null = jnp.broadcast_to(self.null, (v.shape[0], 1, self.hidden))
        mask = jnp.concatenate([jnp.ones((v.shape[0], 1), bool), visible], 1)
        return jnp.concatenate([null, v], 1), mask

    def bidaf(self, v, vmask, u, umask):
        """G [B, M, hidden]: language-aware entity features."""
        w = self.sim_w
        s = ((v @ w[0])[:, :, None] + (u @ w[1])[:, None, :]
             + jnp.einsum("bmh,h,blh->bml", v, w[2], u))
        a = _masked_softmax(s, umask[:, None, :])                       # entity -> words
        u_att = jnp.einsum("bml,blh->bmh", a, u)
        best = jnp.max(jnp.where(umask[:, None, :], s, -1e9), -1)
        b = _masked_softmax(best, vmask)                                  # words -> entities
        h_att = jnp.einsum("bm,bmh->bh", b, v)[:, None, :]
        return nn.relu(self.fuse(jnp.concatenate([v, u_att, v * u_att, v * h_att], -1)))

    def initial_carry(self, batch_size: int):
        zeros = jnp.zeros((batch_size, self.hidden))
        return zeros, zeros

    def step(self, carry, u, umask, attrs, geo, visible, prev_action, train: bool = False):
        """One decision: returns (carry, logits [B, 4])."""
        if self.kind == "lo":
            g, gmask = u, umask
        else:
            v, vmask = self.entities(attrs, geo, visible, train)
            g, gmask = (v, vmask) if self.kind == "vo" else (self.bidaf(v, vmask, u, umask), vmask)
        h_prev = carry[1]
        alpha = _masked_softmax(jnp.einsum("bmh,bh->bm", self.attend(g), h_prev), gmask)
        context = self.drop(jnp.einsum("bm,bmh->bh", alpha, g), deterministic=not train)
        x = jnp.concatenate([self.action_embed(prev_action), context], -1)
        carry, h = self.cell(carry, x)
        return carry, self.head(jnp.concatenate([self.drop(h, deterministic=not train),
                                                 context], -1))

    def __call__(self, tokens, lengths, attrs, geo, visible, prev_actions, train: bool = False):
        """Teacher-forced logits [B, T, 4] for views [B, T, M, ...] (used to initialise)."""
        u, umask = self.encode(tokens, lengths, train)
        carry = self.initial_carry(tokens.shape[0])
        outs = []
        for t in range(prev_actions.shape[1]):
            carry, out = self.step(carry, u, umask, attrs[:, t], geo[:, t], visible[:, t],
                                   prev_actions[:, t], train)
            outs.append(out)
        return jnp.stack(outs, 1)


def encode_words(model: PhaseAgent, params, tokens: jax.Array, token_len: jax.Array,
                 key: jax.Array | None = None):
    """(U, mask) of the instruction; dropout is on when `key` is given (training)."""
    return model.apply(params, tokens, token_len, key is not None, method=PhaseAgent.encode,
                       rngs=None if key is None else {"dropout": key})


def phase_policy(model: PhaseAgent, params, words, view: Callable,
                 gold: jax.Array | None = None, greedy: bool = True, train: bool = False):
    """A simulator policy driven by `model` (the policy of `ttw_jax.core.env`).

    words: (U, mask) from `encode_words`; `view(state)` gives the (attrs, geo, visible) the agent
    sees in the batched `state`. Returns (policy, initial carry). With `gold` [B, T] the
    demonstrated action is executed (teacher forcing); otherwise the argmax (greedy) or a sample.
    The policy's output is the logits [B, 4]; with `train`, dropout draws from the step's key.
    """
    u, umask = words

    def policy(carry, state, t, key):
        lstm, prev = carry
        k_drop, k_act = jax.random.split(key)
        attrs, geo, visible = view(state)
        lstm, logits = model.apply(params, lstm, u, umask, attrs, geo, visible, prev, train,
                                   method=PhaseAgent.step,
                                   rngs={"dropout": k_drop} if train else None)
        action = choose_action(logits, t, k_act, gold, greedy)
        return (lstm, action), action, logits

    zeros = jnp.zeros((u.shape[0], model.hidden), jnp.float32)
    return policy, ((zeros, zeros), jnp.full((u.shape[0],), START, jnp.int32))


def navigation_policy(model: PhaseAgent, params, batch: dict, gold: jax.Array | None = None,
                      dropout_key: jax.Array | None = None):
    """(policy, initial carry) of `model` in the navigation environment for a turn-level
    `batch` (the keys of `episodes.turn_examples`): greedy, or the demonstrated `gold` [B, T]
    (teacher forcing); `dropout_key` turns dropout on (training)."""
    words = encode_words(model, params, batch["navi_tokens"], batch["navi_token_len"],
                         dropout_key)
    view = jax.vmap(navigation_view)
    return phase_policy(model, params, words,
                        lambda s: view(s, batch["object_attrs"], batch["object_mask"]),
                        gold=gold, train=dropout_key is not None)


def assembly_policy(model: PhaseAgent, params, batch: dict, num_types: int,
                    gold: jax.Array | None = None, dropout_key: jax.Array | None = None):
    """The assembly twin of `navigation_policy` (object type ids 1..num_types)."""
    words = encode_words(model, params, batch["assem_tokens"], batch["assem_token_len"],
                         dropout_key)
    view = jax.vmap(assembly_view, in_axes=(0, 0, None))
    return phase_policy(model, params, words, lambda s: view(s, batch["grid_attrs"], num_types),
                        gold=gold, train=dropout_key is not None)
