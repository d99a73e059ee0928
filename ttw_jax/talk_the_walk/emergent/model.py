"""Tourist and guide for localization with emergent communication (Talk The Walk, section 4).

The tourist sees T+1 observations (bags of landmark ids) and T actions and writes a message; the
guide reads it, embeds its 4x4 map, applies MASC (or the no-MASC baseline) T times, combines the
T+1 transformed maps with positional gates and scores every corner by a dot product with the
message. Messages are continuous vectors or, for `discrete=True`, Bernoulli bit vectors of length
`features` (the tourist is then trained with REINFORCE, see `emergent/losses.py`).
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from ttw_jax.core.train.precision import softmax
from ttw_jax.talk_the_walk.masc import MASC, NoMASC

_gate_init = nn.initializers.normal(0.1)


def partition_gate_init(key, shape, dtype=jnp.float32, scale: float = 4.0):
    """(S, N) gate logits giving each of the N dimensions to one of the S steps (a random
    balanced partition): +scale on its step, -scale elsewhere, so a message dimension starts
    out carrying a single step's observation or action."""
    steps, n = shape
    owner = jax.random.permutation(key, jnp.arange(n) % steps)
    return jnp.where(jnp.arange(steps)[:, None] == owner[None], scale, -scale).astype(dtype)


GATE_INITS = {"normal": _gate_init, "partition": partition_gate_init}
INITS = ("ours", "released")


def fan_in_uniform(key, shape, dtype=jnp.float32, fan_in: int | None = None):
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's `nn.Linear` default (weights and biases)."""
    bound = 1.0 / jnp.sqrt(fan_in or shape[0]).astype(dtype)
    return jax.random.uniform(key, shape, dtype, -bound, bound)


def dense(features: int, init: str, fan_in: int, **kw) -> nn.Dense:
    """nn.Dense with flax's default initialisation ("ours") or PyTorch's ("released")."""
    if init == "released":
        kw.update(kernel_init=fan_in_uniform,
                  bias_init=lambda k, s, d=jnp.float32: fan_in_uniform(k, s, d, fan_in=fan_in))
    return nn.Dense(features, **kw)


class BagOfLandmarks(nn.Module):
    """Sum of landmark embeddings over the last axis of `ids` (..., K); id 0 is padding."""
    num_ids: int
    features: int
    init_std: float = 0.1

    @nn.compact
    def __call__(self, ids: jax.Array) -> jax.Array:
        emb = nn.Embed(self.num_ids, self.features, embedding_init=nn.initializers.normal(self.init_std))
        return jnp.sum(emb(ids) * (ids > 0)[..., None], axis=-2)


@struct.dataclass
class Message:
    """obs: (B, N) and act: (B, N) (None without MASC). Continuous values, bits or bit logits."""
    obs: jax.Array
    act: jax.Array | None


class EmergentTourist(nn.Module):
    """Gated sums of observation and action embeddings: returns a `Message` of (B, N) vectors.

    For discrete communication these are the logits of the Bernoulli bits. `init_std` is the
    embeddings' initial scale, `gate_init` the positional gates' ('normal' or 'partition'),
    `use_bias` adds a learned offset per message dimension; `act_init_std` the action
    embeddings' initial scale (default `init_std`; the released code's is 1).
    """
    T: int
    features: int
    num_landmark_ids: int
    num_actions: int = 4
    use_actions: bool = True
    init_std: float = 0.1
    use_bias: bool = False
    gate_init: str = "normal"
    act_init_std: float | None = None

    @nn.compact
    def __call__(self, obs: jax.Array, actions: jax.Array) -> Message:
        """obs: (B, T+1, K) landmark ids; actions: (B, T) agnostic action ids."""
        emb = BagOfLandmarks(self.num_landmark_ids, self.features, self.init_std, name="obs_emb")(obs)
        gates = self.param("obs_gates", GATE_INITS[self.gate_init], (self.T + 1, self.features))
        msg_obs = jnp.sum(emb * jax.nn.sigmoid(gates), axis=1)
        msg_act = None
        if self.use_actions and self.T > 0:
            std = self.init_std if self.act_init_std is None else self.act_init_std
            act = nn.Embed(self.num_actions, self.features, name="act_emb",
                           embedding_init=nn.initializers.normal(std))(actions)
            act_gates = self.param("act_gates", GATE_INITS[self.gate_init], (self.T, self.features))
            msg_act = jnp.sum(act * jax.nn.sigmoid(act_gates), axis=1)
        if self.use_bias:  # lets a bit be confidently off when its landmarks are absent
            msg_obs = msg_obs + self.param("obs_bias", nn.initializers.zeros, (self.features,))
            if msg_act is not None:
                msg_act = msg_act + self.param("act_bias", nn.initializers.zeros, (self.features,))
        return Message(msg_obs, msg_act)


class EmergentGuide(nn.Module):
    """Location logits (B, X*Y) from a message and the guide's map (B, X, Y, K).

    `masc=True` predicts one 3x3 mask per step from the action message (one linear map per
    step); `masc=False` applies a shared ordinary 3x3 kernel T times. `read_obs` adds a linear
    read-out of the observation message (used for discrete messages).
    """
    T: int
    features: int
    num_landmark_ids: int
    masc: bool = True
    read_obs: bool = False
    kernel_init: str = "normal"
    map_init_std: float = 0.1
    dense_init: str = "ours"   # ours (flax defaults) | released (PyTorch's nn.Linear defaults)

    def setup(self):
        self.map_emb = BagOfLandmarks(self.num_landmark_ids, self.features, init_std=self.map_init_std)
        self.gates = self.param("map_gates", _gate_init, (self.T + 1, self.features))
        conv = MASC if self.masc else NoMASC
        self.conv = conv(self.features, kernel_init=self.kernel_init)
        if self.masc:
            self.extract = [dense(9, self.dense_init, self.features, name=f"extract_{t}")
                            for t in range(self.T)]
        if self.read_obs:
            self.obs_read = dense(self.features, self.dense_init, self.features)

    def mask_logits(self, msg_act: jax.Array) -> jax.Array:
        """(B, T, 9) MASC mask logits; the softmax of row t is the 3x3 mask of step t."""
        return jnp.stack([f(msg_act) for f in self.extract], axis=1)

    def __call__(self, msg: Message, landmarks: jax.Array) -> jax.Array:
        u = self.map_emb(landmarks)  # (B, X, Y, N)
        maps = [u]
        if self.masc and self.T > 0:
            logits = self.mask_logits(msg.act)
            for t in range(self.T):
                maps.append(self.conv(maps[-1], logits[:, t]))
        else:
            for _ in range(self.T):
                maps.append(self.conv(maps[-1]))
        stacked = jnp.stack(maps, axis=0) * jax.nn.sigmoid(self.gates)[:, None, None, None, :]
        cells = jnp.sum(stacked, axis=0).reshape(u.shape[0], -1, self.features)  # (B, X*Y, N)
        query = self.obs_read(msg.obs) if self.read_obs else msg.obs
        return jnp.einsum("bcn,bn->bc", cells, query)


class Localizer(nn.Module):
    """Tourist + guide. `discrete` samples Bernoulli messages with the 'comm' rng (or thresholds
    them when `greedy`). Returns a dict with guide `logits` (B, 16), the tourist's `message`
    logits/values, the sent `bits` (discrete) and the linear `baseline` (B,) (discrete).

    `init_scheme="released"` initialises as the released code: action embeddings N(0, 1), the guide's
    landmark embeddings N(0, 0.01) (continuous) or N(0, 0.1) (discrete), PyTorch's Linear
    defaults, no tourist bias; the MASC kernel is `kernel_init` ("uniform" is the released one).
    """
    T: int
    features: int
    num_landmark_ids: int
    masc: bool = True
    discrete: bool = False
    kernel_init: str = "normal"
    tourist_init_std: float = 0.1
    tourist_gate_init: str = "normal"
    num_actions: int = 4   # 7 for an orientation-aware tourist (env action ids 4-6)
    init_scheme: str = "ours"     # ours | released

    def setup(self):
        if self.init_scheme not in INITS:
            raise ValueError(f"init_scheme must be one of {INITS}, got {self.init_scheme!r}")
        released = self.init_scheme == "released"
        self.tourist = EmergentTourist(self.T, self.features, self.num_landmark_ids,
                                       num_actions=self.num_actions,
                                       use_actions=self.masc, init_std=self.tourist_init_std,
                                       use_bias=self.discrete and not released,
                                       gate_init=self.tourist_gate_init,
                                       act_init_std=1.0 if released else None)
        map_std = (0.1 if self.discrete else 0.01) if released else 0.1
        self.guide = EmergentGuide(self.T, self.features, self.num_landmark_ids, masc=self.masc,
                                   read_obs=self.discrete, kernel_init=self.kernel_init,
                                   map_init_std=map_std, dense_init=self.init_scheme)
        if self.discrete:
            fan_in = self.features * (2 if self.masc else 1)
            self.baseline = dense(1, self.init_scheme, fan_in)

    def __call__(self, obs, actions, landmarks, greedy: bool = False):
        msg = self.tourist(obs, actions)
        out = {"message": msg}
        if self.discrete:
            if greedy:
                bits = jax.tree_util.tree_map(lambda z: (z > 0).astype(jnp.float32), msg)
            else:
                k_obs, k_act = jax.random.split(self.make_rng("comm"))
                sample = lambda k, z: jax.random.bernoulli(k, jax.nn.sigmoid(z)).astype(jnp.float32)
                bits = Message(sample(k_obs, msg.obs),
                               None if msg.act is None else sample(k_act, msg.act))
            feats = [msg.obs] + ([msg.act] if msg.act is not None else [])
            out["baseline"] = self.baseline(jax.lax.stop_gradient(jnp.concatenate(feats, -1)))[:, 0]
            out["bits"] = bits
            msg = jax.tree_util.tree_map(jax.lax.stop_gradient, bits)
        out["logits"] = self.guide(msg, landmarks)
        return out

    def masks(self, actions: jax.Array) -> jax.Array:
        """(B, T, 3, 3) learned MASC masks for action sequences (B, T) (discrete: greedy bits)."""
        dummy = jnp.zeros(actions.shape[:1] + (self.T + 1, 1), jnp.int32)
        msg = self.tourist(dummy, actions)
        act = (msg.act > 0).astype(jnp.float32) if self.discrete else msg.act
        probs = softmax(self.guide.mask_logits(act), axis=-1)
        return probs.reshape(actions.shape + (3, 3))
