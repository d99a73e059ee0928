"""The ArraMon vision-and-language baseline (Kim et al. 2020, section 6 and App. D, equations 1-14)
and its vision-only / language-only ablations.

One `PhaseAgent` per phase (navigation and assembly keep separate parameters); per step t:
- Words: 300-d embeddings and an LSTM (hidden 128): L [B, l, 128] (eqs. 1-2).
- Vision (`visual`): "symbolic", each entity of the simulator's egocentric view
  (`ttw_jax.arramon.views`) is the sum of its pattern / colour / type embeddings and a
  projection of its geometry, with a learned null entity always present so that an empty view
  is still attendable: V_t [B, M + 1, 128]; or "features", the paper's and the official code's:
  the 7 x 7 cells of the release's ResNet feature map of the agent's view, each projected
  linearly 2048 -> 128 (the official `projection_vfeat`): V_t [B, 49, 128]
  (`ttw_jax.arramon.features` reads them).
- Action state: h_t = LSTM(Emb_A(a_{t-1}), h_{t-1}), 64-d action embeddings (eq. 3).
- Cross-Attn (eqs. 4, 7-11, BiDAF): S_ij = W_s^T (V_i * L_j) (+ a bias, as the official
  `attention_cross`); V-bar = softmax_i(S)^T V, L-hat = W_L^T [L; V-bar; L * V-bar];
  L-bar = softmax_j(S) L, V-hat = W_V^T [V; L-bar; V * L-bar].
- Attn (eqs. 5, 12-14): v_t = softmax(V-hat h_t)^T V-hat and l_t = softmax(L-hat h_t)^T L-hat.
- logits = Linear([v_t; l_t; h_t]) (eq. 6 writes Linear(v_t, l_t); the official decoder also
  feeds h_t; `logits_from_state=False` gives eq. 6 as written).
- `kind`: 'vl' (the above), 'vo' / 'lo' the same without Cross-Attn (section 6): v_t = Attn(h_t,
  V_t) or l_t = Attn(h_t, L) alone; 'vo' has no instruction encoder, 'lo' no vision encoder.
Dropout 0.3 while training (`dropout_placement`): "inputs" on the word, entity and action
embeddings and on the logits' input (configs/paper.py); "action_and_logits" on the action
embedding and on the logits themselves, the official `decoders_nosim.py`'s `func` (which drops
`a_emb(it)` and `projection(...)`'s output, and nothing of the words or the views).
`step` runs once per simulator step, so the agent lives inside the simulator's `lax.scan`
(with features, each step sees those of the nearest recorded pose, `features.feature_view`;
`teacher_forced_logits` runs it over recorded views without the simulator):
`navigation_policy` / `assembly_policy` are the policies (`ttw_jax.core.env`) that run it in
each phase's environment (greedy, or teacher-forced), `navigation_student_policy` the one that
trains it by student forcing (its own samples, labelled by `ttw_jax.arramon.expert`).
"""
from __future__ import annotations

from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from ttw_jax.arramon.features import feature_view
from ttw_jax.arramon.views import assembly_view, navigation_view
from ttw_jax.core.env import choose_action
from ttw_jax.core.train.precision import softmax

NUM_ACTIONS = 4
START = NUM_ACTIONS          # previous-action id at t = 0
KINDS = ("vl", "vo", "lo")
DROPOUT_PLACEMENTS = ("inputs", "action_and_logits")


def _masked_softmax(scores: jax.Array, mask: jax.Array, axis: int = -1) -> jax.Array:
    scores = jnp.where(mask, scores, -1e9)
    return softmax(scores, axis) * mask


def attend(h: jax.Array, x: jax.Array, mask: jax.Array) -> jax.Array:
    """General attention (eqs. 12-14): [B, d] summary of x [B, N, d] (mask [B, N]) with scores
    x_i . h for h [B, d]."""
    alpha = _masked_softmax(jnp.einsum("bnd,bd->bn", x, h), mask)
    return jnp.einsum("bn,bnd->bd", alpha, x)


class CrossAttention(nn.Module):
    """BiDAF between entities V [B, M, d] and words L [B, l, d] (eqs. 7-11): (V-hat, L-hat)."""
    hidden: int

    @nn.compact
    def __call__(self, v, vmask, u, umask):
        # S_ij = w . (V_i * L_j) + b, without materialising the [B, M, l, d] products.
        w = self.param("similarity_w", nn.initializers.lecun_normal(), (v.shape[-1], 1))[:, 0]
        b = self.param("similarity_b", nn.initializers.zeros, ())
        s = jnp.einsum("bmd,bld->bml", v * w, u) + b                                    # [B,M,l]
        pair = vmask[:, :, None] & umask[:, None, :]
        v_bar = jnp.einsum("bml,bmd->bld", _masked_softmax(s, pair, axis=1), v)       # [B, l, d]
        l_hat = nn.Dense(self.hidden, name="fuse_words")(
            jnp.concatenate([u, v_bar, u * v_bar], -1))
        l_bar = jnp.einsum("bml,bld->bmd", _masked_softmax(s, pair, axis=2), u)       # [B, M, d]
        v_hat = nn.Dense(self.hidden, name="fuse_entities")(
            jnp.concatenate([v, l_bar, v * l_bar], -1))
        return v_hat, l_hat


VISUALS = ("symbolic", "features")


class PhaseAgent(nn.Module):
    vocab_size: int
    num_attrs: tuple[int, int, int]        # pattern, colour, type id counts (0 = unknown)
    kind: str = "vl"
    embed_dim: int = 300
    action_dim: int = 64
    hidden: int = 128
    dropout: float = 0.3
    logits_from_state: bool = True         # official decoder: Linear([v_t; l_t; h_t])
    visual: str = "symbolic"               # symbolic | features (VISUALS)
    dropout_placement: str = "inputs"      # DROPOUT_PLACEMENTS (module docstring)

    @property
    def uses_words(self) -> bool:
        return self.kind != "vo"

    @property
    def uses_vision(self) -> bool:
        return self.kind != "lo"

    def setup(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown agent kind {self.kind!r}; choose from {KINDS}")
        if self.visual not in VISUALS:
            raise ValueError(f"unknown visual input {self.visual!r}; choose from {VISUALS}")
        if self.dropout_placement not in DROPOUT_PLACEMENTS:
            raise ValueError(f"unknown dropout placement {self.dropout_placement!r}; choose "
                             f"from {DROPOUT_PLACEMENTS}")
        if self.uses_words:
            self.words = nn.Embed(self.vocab_size, self.embed_dim)
            self.encoder = nn.RNN(nn.OptimizedLSTMCell(self.hidden))
        if self.uses_vision and self.visual == "features":
            self.project_features = nn.Dense(self.hidden)
        elif self.uses_vision:
            self.attr_embeds = [nn.Embed(n, self.hidden) for n in self.num_attrs]
            self.geo = nn.Dense(self.hidden)
            self.null = self.param("null", nn.initializers.normal(0.1), (self.hidden,))
        if self.kind == "vl":
            self.cross = CrossAttention(self.hidden)
        self.action_embed = nn.Embed(NUM_ACTIONS + 1, self.action_dim)
        self.cell = nn.OptimizedLSTMCell(self.hidden)
        self.head = nn.Dense(NUM_ACTIONS)
        self.drop = nn.Dropout(self.dropout)

    def _drop_input(self, x: jax.Array, train: bool) -> jax.Array:
        """Dropout of a word / entity embedding or the logits' input: only under "inputs"."""
        if self.dropout_placement != "inputs":
            return x
        return self.drop(x, deterministic=not train)

    def encode(self, tokens: jax.Array, lengths: jax.Array, train: bool = False):
        """(L [B, l, hidden] word states, mask [B, l]); (None, None) for 'vo'."""
        if not self.uses_words:
            return None, None
        mask = jnp.arange(tokens.shape[1])[None] < lengths[:, None]
        emb = self._drop_input(self.words(tokens), train)
        return self.encoder(emb, seq_lengths=lengths), mask

    def entities(self, view: tuple, train: bool):
        """(V, mask) of one step's `view`: symbolic (attrs [B, M, 3], geo [B, M, 4], visible
        [B, M]) -> V [B, M + 1, hidden] with the null entity first; features (feats [B, N, D]
        any float dtype, valid [B, N]) -> V [B, N, hidden]."""
        if self.visual == "features":
            feats, valid = view
            return self.project_features(feats.astype(jnp.float32)), valid
        attrs, geo, visible = view
        v = self.geo(geo)
        for i, embed in enumerate(self.attr_embeds):
            v = v + embed(attrs[..., i])
        v = self._drop_input(nn.relu(v), train)
        null = jnp.broadcast_to(self.null, (v.shape[0], 1, self.hidden))
        mask = jnp.concatenate([jnp.ones((v.shape[0], 1), bool), visible], 1)
        return jnp.concatenate([null, v], 1), mask

    def initial_carry(self, batch_size: int):
        zeros = jnp.zeros((batch_size, self.hidden))
        return zeros, zeros

    def step(self, carry, u, umask, view: tuple, prev_action, train: bool = False):
        """One decision (eqs. 3-6) on one step's `view` (`entities`): (carry, logits [B, 4])."""
        a = self.drop(self.action_embed(prev_action), deterministic=not train)
        carry, h = self.cell(carry, a)
        if self.kind == "lo":
            feats = [attend(h, u, umask)]
        else:
            v, vmask = self.entities(view, train)
            if self.kind == "vo":
                feats = [attend(h, v, vmask)]
            else:
                v_hat, l_hat = self.cross(v, vmask, u, umask)
                feats = [attend(h, v_hat, vmask), attend(h, l_hat, umask)]
        if self.logits_from_state:
            feats.append(h)
        logits = self.head(self._drop_input(jnp.concatenate(feats, -1), train))
        if self.dropout_placement == "action_and_logits":
            logits = self.drop(logits, deterministic=not train)
        return carry, logits

    def __call__(self, tokens, lengths, views: tuple, prev_actions, train: bool = False):
        """Teacher-forced logits [B, T, 4] for `views` (the arrays of `entities`' view with a
        time axis: [B, T, M, ...]; used to initialise)."""
        u, umask = self.encode(tokens, lengths, train)
        carry = self.initial_carry(tokens.shape[0])
        outs = []
        for t in range(prev_actions.shape[1]):
            carry, out = self.step(carry, u, umask, tuple(x[:, t] for x in views),
                                   prev_actions[:, t], train)
            outs.append(out)
        return jnp.stack(outs, 1)


def num_params(params) -> int:
    """Number of trainable parameters in a parameter tree."""
    return sum(int(x.size) for x in jax.tree.leaves(params))


def encode_words(model: PhaseAgent, params, tokens: jax.Array, token_len: jax.Array,
                 key: jax.Array | None = None):
    """(L, mask) of the instruction ((None, None) for 'vo', which reads none); dropout is on
    when `key` is given (training)."""
    return model.apply(params, tokens, token_len, key is not None, method=PhaseAgent.encode,
                       rngs=None if key is None else {"dropout": key})


def phase_policy(model: PhaseAgent, params, words, view: Callable, batch_size: int,
                 gold: jax.Array | None = None, greedy: bool = True, train: bool = False):
    """A simulator policy driven by `model` (the policy of `ttw_jax.core.env`).

    words: (L, mask) from `encode_words` ((None, None) for 'vo'); `view(state)` gives the view (`PhaseAgent.entities`) the agent
    sees in the batched `state`. Returns (policy, initial carry). With `gold` [B, T] the
    demonstrated action is executed (teacher forcing); otherwise the argmax (greedy) or a sample.
    The policy's output is the logits [B, 4]; with `train`, dropout draws from the step's key.
    """
    u, umask = words

    def policy(carry, state, t, key):
        lstm, prev = carry
        k_drop, k_act = jax.random.split(key)
        lstm, logits = model.apply(params, lstm, u, umask, view(state), prev, train,
                                   method=PhaseAgent.step,
                                   rngs={"dropout": k_drop} if train else None)
        action = choose_action(logits, t, k_act, gold, greedy)
        return (lstm, action), action, logits

    zeros = jnp.zeros((batch_size, model.hidden), jnp.float32)
    return policy, ((zeros, zeros), jnp.full((batch_size,), START, jnp.int32))


def student_policy(model: PhaseAgent, params, words, view: Callable, gold: jax.Array,
                   expert: Callable, student_prob: float, dropout_key: jax.Array | None = None):
    """A training policy for student forcing (DAgger-style): at every step the label is the
    demonstrated action gold [B, T] while the agent has taken exactly the demonstrated actions
    so far, and `expert(state)` [B] once it has left them; the executed action is a sample of
    the model's own distribution with probability `student_prob`, else the label. The output is
    (logits [B, 4], label [B]). Returns (policy, initial carry)."""
    u, umask = words
    train = dropout_key is not None
    batch_size = gold.shape[0]

    def policy(carry, state, t, key):
        lstm, prev, on_gold = carry
        k_drop, k_act, k_mix = jax.random.split(key, 3)
        lstm, logits = model.apply(params, lstm, u, umask, view(state), prev, train,
                                   method=PhaseAgent.step,
                                   rngs={"dropout": k_drop} if train else None)
        demo = gold[:, jnp.minimum(t, gold.shape[1] - 1)]
        label = jnp.where(on_gold, demo, expert(state)).astype(jnp.int32)
        own = jax.random.categorical(k_act, jax.lax.stop_gradient(logits)).astype(jnp.int32)
        action = jnp.where(jax.random.bernoulli(k_mix, student_prob, (batch_size,)), own, label)
        return (lstm, action, on_gold & (action == demo)), action, (logits, label)

    zeros = jnp.zeros((batch_size, model.hidden), jnp.float32)
    return policy, ((zeros, zeros), jnp.full((batch_size,), START, jnp.int32),
                    jnp.ones((batch_size,), bool))


def _navigation_view(model: PhaseAgent, batch: dict, perceive: Callable | None = None
                     ) -> Callable:
    """view(state) of the navigation module: `perceive(batch)` when given (e.g. `render`),
    else the release's recorded features or the simulator's symbolic views."""
    if perceive is not None:
        return perceive(batch)
    if model.visual == "features":
        return feature_view(batch, "navi")
    view = jax.vmap(navigation_view)
    return lambda s: view(s, batch["object_attrs"], batch["object_mask"])


def navigation_student_policy(model: PhaseAgent, params, batch: dict, expert: Callable,
                              student_prob: float, dropout_key: jax.Array | None = None,
                              perceive: Callable | None = None):
    """`student_policy` of `model` in the navigation environment for a turn-level `batch`
    (`batch["navi_actions"]` the demonstration); `expert(state)` gives the labels off it."""
    words = encode_words(model, params, batch["navi_tokens"], batch["navi_token_len"],
                         dropout_key)
    return student_policy(model, params, words, _navigation_view(model, batch, perceive),
                          batch["navi_actions"],
                          expert, student_prob, dropout_key)


def navigation_policy(model: PhaseAgent, params, batch: dict, gold: jax.Array | None = None,
                      dropout_key: jax.Array | None = None, perceive: Callable | None = None):
    """(policy, initial carry) of `model` in the navigation environment for a turn-level
    `batch` (the keys of `episodes.turn_examples`): greedy, or the demonstrated `gold` [B, T]
    (teacher forcing); `dropout_key` turns dropout on (training); `perceive(batch)` gives
    view(state) (`_navigation_view`)."""
    words = encode_words(model, params, batch["navi_tokens"], batch["navi_token_len"],
                         dropout_key)
    return phase_policy(model, params, words, _navigation_view(model, batch, perceive),
                        batch["navi_tokens"].shape[0], gold=gold, train=dropout_key is not None)


def assembly_policy(model: PhaseAgent, params, batch: dict, num_types: int,
                    gold: jax.Array | None = None, dropout_key: jax.Array | None = None,
                    perceive: Callable | None = None):
    """The assembly twin of `navigation_policy` (object type ids 1..num_types)."""
    words = encode_words(model, params, batch["assem_tokens"], batch["assem_token_len"],
                         dropout_key)
    if perceive is not None:
        view = perceive(batch)
    elif model.visual == "features":
        view = feature_view(batch, "assem")
    else:
        symbolic = jax.vmap(assembly_view, in_axes=(0, 0, None))
        view = lambda s: symbolic(s, batch["grid_attrs"], num_types)       # noqa: E731
    return phase_policy(model, params, words, view,
                        batch["assem_tokens"].shape[0], gold=gold, train=dropout_key is not None)


def teacher_forced_logits(model: PhaseAgent, params, tokens: jax.Array, token_len: jax.Array,
                          feats: jax.Array, actions: jax.Array, dropout_key: jax.Array | None = None):
    """Logits [T, B, 4] of the demonstrated `actions` [B, T] from the recorded views
    feats [B, T, 49, 2048] (view t is the one before action t), without the simulator: the
    official `main_nosim.py` training. Dropout is on when `dropout_key` is given."""
    train = dropout_key is not None
    k_words, k_steps = jax.random.split(dropout_key) if train else (None, None)
    u, umask = encode_words(model, params, tokens, token_len, k_words)
    prev = jnp.concatenate([jnp.full_like(actions[:, :1], START), actions[:, :-1]], 1)
    valid = jnp.ones(feats.shape[:1] + feats.shape[2:3], bool)
    keys = (jax.random.split(k_steps, actions.shape[1]) if train
            else jnp.zeros((actions.shape[1],), jnp.uint32))

    def body(carry, xs):
        f, a, k = xs
        carry, logits = model.apply(params, carry, u, umask, (f, valid), a, train,
                                    method=PhaseAgent.step,
                                    rngs={"dropout": k} if train else None)
        return carry, logits

    zeros = jnp.zeros((actions.shape[0], model.hidden), jnp.float32)
    _, logits = jax.lax.scan(body, (zeros, zeros),
                             (jnp.swapaxes(feats, 0, 1), prev.T, keys))
    return logits
