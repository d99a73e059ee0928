"""Natural-language tourist for Talk The Walk: an LSTM encoder of the walk and an LSTM decoder.

The tourist's observations (bags of landmark ids, one per visited corner) and its absolute moves
are each read by an LSTM; the context [h_obs; h_act] is fed, with the previous word's embedding,
to the decoder LSTM at every step. PAD, BOS and the speaker tokens are never produced: their
logits are fixed to a large negative number, so every decoder below and `sequence_log_prob` use the same distribution.

Decoding is written as `lax.scan` loops over `NLTourist.decode_step` (module-level, jitted
functions with static `model`, `max_len`, `beam_size`, `length_penalty`). Each returns `tokens` (B, max_len)
int32 (words, EOS, then PAD; truncated without EOS at max_len) and `lengths` (B,) int32 (the
number of tokens including EOS).
"""
from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from ttw_jax.talk_the_walk.emergent.model import BagOfLandmarks
from ttw_jax.talk_the_walk.maps import NUM_LANDMARK_IDS

PAD, UNK, BOS, EOS, TOURIST, GUIDE = 0, 1, 2, 3, 4, 5
# Ids an utterance never contains: padding, the start token and the speaker tokens.
NEVER_EMITTED = (PAD, BOS, TOURIST, GUIDE)
NEG = -1e9  # logit of tokens that are never produced, and score of absent beams


class NLTourist(nn.Module):
    """Utterance decoder conditioned on the walk.

    obs: (B, S+1, K) landmark ids (rows beyond num_moves+1 are ignored); actions: (B, S) agnostic
    moves 0..3, or 4 for a FORWARD blocked by the window edge (`dialogues.STAY`; the default
    num_actions=5 has an embedding for it, num_actions=4 is the earlier table without it), or the
    environment's ids 4..6 (TURNLEFT / TURNRIGHT / FORWARD) of an orientation-aware tourist
    (num_actions=7); beyond num_moves ignored; num_moves: (B,) int. The context is (B,
    2*hidden), or (B, context_features) through a linear map (the released `context_linear`).
    The word embeddings, the observation and action encoders (`hidden` units) and the decoder
    (`decoder_hidden` units, `hidden` when 0) are sized apart, as in the released TouristLanguage.
    """
    vocab_size: int
    num_landmark_ids: int = NUM_LANDMARK_IDS
    embed: int = 128
    hidden: int = 256
    num_actions: int = 5  # UP, RIGHT, DOWN, LEFT, STAY
    decoder_hidden: int = 0      # 0: `hidden`
    context_features: int = 0    # 0: the encoders' states as they are; > 0: a linear map to this

    @property
    def decoder_size(self) -> int:
        return self.decoder_hidden or self.hidden

    def setup(self):
        self.obs_emb = BagOfLandmarks(self.num_landmark_ids, self.embed)
        self.obs_rnn = nn.RNN(nn.OptimizedLSTMCell(self.hidden), return_carry=True)
        self.act_emb = nn.Embed(self.num_actions, self.embed)
        self.act_rnn = nn.RNN(nn.OptimizedLSTMCell(self.hidden), return_carry=True)
        if self.context_features:
            self.context_proj = nn.Dense(self.context_features)
        self.word_emb = nn.Embed(self.vocab_size, self.embed)
        self.decoder = nn.RNN(nn.OptimizedLSTMCell(self.decoder_size))
        self.out = nn.Dense(self.vocab_size)

    def context(self, obs: jax.Array, actions: jax.Array, num_moves: jax.Array) -> jax.Array:
        """(B, 2*hidden): last valid hidden states of the observation and action LSTMs
        (the action part is zero for walks without moves); (B, context_features) through
        `context_proj` when that is set."""
        num_moves = jnp.asarray(num_moves, jnp.int32)
        (_, h_obs), _ = self.obs_rnn(self.obs_emb(obs), seq_lengths=num_moves + 1)
        if actions.shape[1] == 0:  # S = 0: one dummy move, so the parameters do not depend on S
            actions = jnp.zeros((actions.shape[0], 1), actions.dtype)
        (_, h_act), _ = self.act_rnn(self.act_emb(actions), seq_lengths=jnp.maximum(num_moves, 1))
        h_act = jnp.where((num_moves > 0)[:, None], h_act, 0.0)
        context = jnp.concatenate([h_obs, h_act], axis=-1)
        return self.context_proj(context) if self.context_features else context

    def init_carry(self, context: jax.Array):
        """The decoder's initial LSTM carry (c, h), zeros of shape (B, decoder_size)."""
        z = jnp.zeros((context.shape[0], self.decoder_size), context.dtype)
        return z, z

    def _logits(self, h: jax.Array) -> jax.Array:
        logits = self.out(h)
        never = jnp.isin(jnp.arange(self.vocab_size), jnp.array(NEVER_EMITTED))
        return jnp.where(never, NEG, logits)

    def _decoder_inputs(self, tokens: jax.Array, context: jax.Array) -> jax.Array:
        emb = self.word_emb(tokens)
        ctx = jnp.broadcast_to(context[:, None], emb.shape[:2] + context.shape[-1:])
        return jnp.concatenate([emb, ctx], axis=-1)

    def decode_step(self, carry, token: jax.Array, context: jax.Array):
        """One decoder step: token (B,) previous word -> (carry, logits (B, V))."""
        x = self._decoder_inputs(token[:, None], context)
        carry, h = self.decoder(x, initial_carry=carry, return_carry=True)
        return carry, self._logits(h[:, 0])

    def __call__(self, obs, actions, num_moves, inputs):
        """Teacher forcing: inputs (B, L) = BOS + target[:, :-1] -> logits (B, L, V)."""
        ctx = self.context(obs, actions, num_moves)
        h = self.decoder(self._decoder_inputs(inputs, ctx), initial_carry=self.init_carry(ctx))
        return self._logits(h)


def _prepare(model: NLTourist, params, obs, actions, num_moves):
    variables = {"params": params}
    ctx = model.apply(variables, obs, actions, num_moves, method=NLTourist.context)
    step = lambda carry, tok, c: model.apply(variables, carry, tok, c, method=NLTourist.decode_step)
    return ctx, step


def _sequential_decode(model, params, obs, actions, num_moves, max_len, choose):
    """Shared loop of greedy and sampling: choose(t, log_probs (B, V)) -> tokens (B,)."""
    ctx, step = _prepare(model, params, obs, actions, num_moves)
    b = ctx.shape[0]

    def body(state, t):
        carry, prev, done = state
        carry, logits = step(carry, prev, ctx)
        tok = jnp.where(done, PAD, choose(t, jax.nn.log_softmax(logits, axis=-1)).astype(jnp.int32))
        return (carry, tok, done | (tok == EOS)), (tok, ~done)

    init = (model.apply({"params": params}, ctx, method=NLTourist.init_carry),
            jnp.full((b,), BOS, jnp.int32), jnp.zeros((b,), bool))
    _, (tokens, alive) = jax.lax.scan(body, init, jnp.arange(max_len))
    return tokens.T, jnp.sum(alive, axis=0).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("model", "max_len"))
def greedy_decode(model: NLTourist, params, obs, actions, num_moves, max_len: int):
    """Argmax decoding -> tokens (B, max_len) int32, lengths (B,) int32 (incl. EOS)."""
    return _sequential_decode(model, params, obs, actions, num_moves, max_len,
                              lambda t, logp: jnp.argmax(logp, axis=-1))


def _per_row(key: jax.Array) -> bool:
    """True for a batch of keys, one per row: (B,) typed keys or (B, 2) raw ones."""
    typed = jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    return key.ndim == (1 if typed else 2)


@functools.partial(jax.jit, static_argnames=("model", "max_len"))
def sample_decode(model: NLTourist, params, obs, actions, num_moves, key, max_len: int,
                  temperature=1.0):
    """Ancestral sampling from softmax(logits / temperature) (a float or traced scalar)
    -> tokens (B, max_len), lengths (B,). `key`: one PRNG key for the batch, or one per row
    ((B,) keys: row b's words depend on its own key alone, e.g. one key per full-task episode
    and step)."""
    if _per_row(key):
        draw = jax.vmap(lambda k, t, logp: jax.random.categorical(jax.random.fold_in(k, t), logp),
                        in_axes=(0, None, 0))
        choose = lambda t, logp: draw(key, t, logp / temperature)
    else:
        choose = lambda t, logp: jax.random.categorical(jax.random.fold_in(key, t),
                                                        logp / temperature)
    return _sequential_decode(model, params, obs, actions, num_moves, max_len, choose)


@functools.partial(jax.jit, static_argnames=("model", "max_len", "beam_size", "length_penalty"))
def beam_search(model: NLTourist, params, obs, actions, num_moves, max_len: int, beam_size: int,
                length_penalty: float = 0.0):
    """Beam search -> the best hypothesis per row: tokens (B, max_len) int32, lengths (B,) int32.

    Each step scores the top `beam_size` words of every live beam by cumulative log-probability
    and keeps the best `beam_size` of these candidates; a finished beam (EOS emitted) competes
    with its frozen score. At the end the best beam by score / length**length_penalty is returned
    (unnormalised for 0). Beams still alive at `max_len` are truncated.
    """
    k, v = beam_size, model.vocab_size
    if not 1 <= k <= v - 2:
        raise ValueError(f"beam_size must be in [1, vocab_size - 2], got {k}")
    ctx, step = _prepare(model, params, obs, actions, num_moves)
    b = ctx.shape[0]
    ctx_k = jnp.repeat(ctx, k, axis=0)  # row b * k + j is beam j of example b
    first = jnp.arange(k) == 0
    keep = jnp.where(first, 0.0, NEG)  # a finished beam's single candidate: itself, unchanged

    def gather(x, src):  # x (B, K, ...) reordered by source beam src (B, K)
        return jnp.take_along_axis(x, src.reshape(src.shape + (1,) * (x.ndim - 2)), axis=1)

    def body(state, t):
        carry, prev, scores, tokens, finished, lengths = state
        carry, logits = step(carry, prev.reshape(-1), ctx_k)
        top_lp, top_tok = jax.lax.top_k(jax.nn.log_softmax(logits, axis=-1).reshape(b, k, v), k)
        cand_lp = jnp.where(finished[..., None], keep, top_lp)
        cand_tok = jnp.where(finished[..., None], PAD, top_tok).reshape(b, k * k)
        scores, idx = jax.lax.top_k((scores[..., None] + cand_lp).reshape(b, k * k), k)
        src = idx // k
        tok = jnp.take_along_axis(cand_tok, idx, axis=1).astype(jnp.int32)
        was_finished = gather(finished, src)
        tokens = gather(tokens, src).at[:, :, t].set(tok)
        lengths = gather(lengths, src) + (~was_finished).astype(jnp.int32)
        carry = jax.tree_util.tree_map(
            lambda c: gather(c.reshape(b, k, -1), src).reshape(b * k, -1), carry)
        return (carry, tok, scores, tokens, was_finished | (tok == EOS), lengths), None

    init = (model.apply({"params": params}, ctx_k, method=NLTourist.init_carry),
            jnp.full((b, k), BOS, jnp.int32), jnp.broadcast_to(keep, (b, k)),
            jnp.zeros((b, k, max_len), jnp.int32), jnp.zeros((b, k), bool),
            jnp.zeros((b, k), jnp.int32))
    (_, _, scores, tokens, _, lengths), _ = jax.lax.scan(body, init, jnp.arange(max_len))
    if length_penalty:
        scores = scores / jnp.maximum(lengths, 1).astype(scores.dtype) ** length_penalty
    best = jnp.argmax(scores, axis=1)[:, None]
    return gather(tokens, best)[:, 0], jnp.take_along_axis(lengths, best, axis=1)[:, 0]


def token_log_probs(model: NLTourist, params, obs, actions, num_moves, tokens):
    """(B, L, V) log-probabilities of the next token at every position of `tokens` (B, L), the
    decoder reading BOS + tokens[:, :-1] (teacher forcing); differentiable in params."""
    inputs = jnp.concatenate([jnp.full_like(tokens[:, :1], BOS), tokens[:, :-1]], axis=1)
    return jax.nn.log_softmax(model.apply({"params": params}, obs, actions, num_moves, inputs), axis=-1)


def masked_token_sum(values: jax.Array, lengths: jax.Array) -> jax.Array:
    """(B,) sum of values (B, L) over the first `lengths` positions of each row."""
    valid = jnp.arange(values.shape[1])[None] < lengths[:, None]
    return jnp.sum(jnp.where(valid, values, 0.0), axis=1)


@functools.partial(jax.jit, static_argnames=("model",))
def sequence_log_prob(model: NLTourist, params, obs, actions, num_moves, tokens, lengths):
    """(B,) sum over the first `lengths` tokens of log p(token | prefix); differentiable in params."""
    logp = token_log_probs(model, params, obs, actions, num_moves, tokens)
    return masked_token_sum(jnp.take_along_axis(logp, tokens[..., None], axis=-1)[..., 0], lengths)
