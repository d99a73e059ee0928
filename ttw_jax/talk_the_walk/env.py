"""The Talk The Walk grid as a pure-functional environment.

The tourist stands on a corner of a window (`landmarks.shape[:2]`, 4x4 in Talk The Walk) and
perceives perfectly: its observation is the landmark ids of its corner (`[Empty]` when it has none).
Actions 0-3 are orientation-agnostic moves, 4-6 orientation-aware; moves are clamped to the window
(a blocked move leaves the tourist in place). Everything is a pure function of arrays, so episodes
vmap over a batch and `lax.scan` over time.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

UP, RIGHT, DOWN, LEFT, TURNLEFT, TURNRIGHT, FORWARD = range(7)
ACTION_NAMES = ("UP", "RIGHT", "DOWN", "LEFT", "TURNLEFT", "TURNRIGHT", "FORWARD")
NUM_AGNOSTIC_ACTIONS = 4
# Orientation o (0 north, 1 east, 2 south, 3 west) moves by DELTAS[o]; agnostic action a by DELTAS[a].
DELTAS = jnp.array([[0, 1], [1, 0], [0, -1], [-1, 0]], jnp.int32)


@struct.dataclass
class GridState:
    """pos: (2,) int32 corner (x, y) inside the window; orientation: () int32 in 0..3."""
    pos: jax.Array
    orientation: jax.Array


def observe(state: GridState, landmarks: jax.Array) -> jax.Array:
    """The (K,) landmark ids at the tourist's corner; `landmarks` is (X, Y, K)."""
    return landmarks[state.pos[0], state.pos[1]]


def reset(key: jax.Array, landmarks: jax.Array) -> tuple[GridState, jax.Array]:
    """A uniformly random corner and orientation; returns (state, observation)."""
    kx, ky, ko = jax.random.split(key, 3)
    pos = jnp.stack([jax.random.randint(kx, (), 0, landmarks.shape[0]),
                     jax.random.randint(ky, (), 0, landmarks.shape[1])]).astype(jnp.int32)
    state = GridState(pos, jax.random.randint(ko, (), 0, 4).astype(jnp.int32))
    return state, observe(state, landmarks)


def step(state: GridState, action: jax.Array, landmarks: jax.Array) -> tuple[GridState, jax.Array]:
    """Applies one action; returns (next state, its observation).

    UP/RIGHT/DOWN/LEFT move one corner in that direction and face it; TURNLEFT/TURNRIGHT rotate in
    place; FORWARD moves one corner in the facing direction.
    """
    action = jnp.asarray(action, jnp.int32)
    is_agnostic = action < NUM_AGNOSTIC_ACTIONS
    turn = jnp.where(action == TURNLEFT, -1, jnp.where(action == TURNRIGHT, 1, 0))
    orientation = jnp.where(is_agnostic, action, (state.orientation + turn) % 4)
    moves = is_agnostic | (action == FORWARD)
    delta = jnp.where(moves, DELTAS[orientation], 0)
    limit = jnp.array(landmarks.shape[:2], jnp.int32) - 1
    pos = jnp.clip(state.pos + delta, 0, limit)
    nxt = GridState(pos.astype(jnp.int32), orientation.astype(jnp.int32))
    return nxt, observe(nxt, landmarks)


@struct.dataclass
class Walk:
    """A trajectory: obs (T+1, K), actions (T,), positions (T+1, 2)."""
    obs: jax.Array
    actions: jax.Array
    positions: jax.Array


def rollout(state: GridState, actions: jax.Array, landmarks: jax.Array) -> Walk:
    """Runs `actions` (T,) from `state` with `lax.scan`."""
    def body(s, a):
        s, o = step(s, a, landmarks)
        return s, (o, s.pos)

    _, (obs, pos) = jax.lax.scan(body, state, actions)
    obs = jnp.concatenate([observe(state, landmarks)[None], obs])
    return Walk(obs, actions.astype(jnp.int32), jnp.concatenate([state.pos[None], pos]))


def random_walk(key: jax.Array, landmarks: jax.Array, num_steps: int) -> Walk:
    """A uniformly random start and `num_steps` uniformly random agnostic moves."""
    k_reset, k_act = jax.random.split(key)
    state, _ = reset(k_reset, landmarks)
    actions = jax.random.randint(k_act, (num_steps,), 0, NUM_AGNOSTIC_ACTIONS)
    return rollout(state, actions, landmarks)


# Batched versions: one episode per row of `landmarks` (B, X, Y, K).
batch_step = jax.vmap(step)
batch_rollout = jax.vmap(rollout)
