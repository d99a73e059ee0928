"""The Talk The Walk grid as a pure-functional environment (the protocol of `ttw_jax.core.env`).

The tourist stands on a corner of a window (`landmarks.shape[:2]`, 4x4 in Talk The Walk; the
window is the environment's params, one per episode) and perceives perfectly: its observation is
the landmark ids of its corner (`[Empty]` when it has none). Actions 0-3 are orientation-agnostic
moves, 4-6 orientation-aware; moves are clamped to the window (a blocked move leaves the tourist
in place). An orientation-aware tourist (section 2) sees a corner's landmarks only while it faces
away from the intersection, as the released code's `GoldstandardFeatures(orientation_aware=True)`:
at a SW corner (x even, y even) facing S or W, SE (x odd, y even) E or S, NW (x even, y odd) N or
W, NE (x odd, y odd) N or E; otherwise it sees `[Empty]`. Window origins are even corners, so the
window's parity is the neighbourhood's. The grid has no ending action: `done` is set from outside (the full task ends an
episode), and a done tourist no longer moves. Functions are single-episode; batches vmap them
(`ttw_jax.core.env.batched(fn, params_axis=0)`, one window per episode) and `lax.scan` over time.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ttw_jax.talk_the_walk.maps import EMPTY_ID

UP, RIGHT, DOWN, LEFT, TURNLEFT, TURNRIGHT, FORWARD = range(7)
ACTION_NAMES = ("UP", "RIGHT", "DOWN", "LEFT", "TURNLEFT", "TURNRIGHT", "FORWARD")
NUM_AGNOSTIC_ACTIONS = 4
AWARE_ACTIONS = (TURNLEFT, TURNRIGHT, FORWARD)
NUM_ACTIONS = len(ACTION_NAMES)
ORIENTATION_NAMES = ("N", "E", "S", "W")
# Orientation o (0 north, 1 east, 2 south, 3 west) moves by DELTAS[o]; agnostic action a by DELTAS[a].
# numpy, not jnp: importing this module must not start a backend.
DELTAS = np.array([[0, 1], [1, 0], [0, -1], [-1, 0]], np.int32)
# VISIBLE[x % 2, y % 2, o]: an orientation-aware tourist on that corner facing o sees its landmarks.
VISIBLE = np.zeros((2, 2, 4), bool)
VISIBLE[0, 0, [2, 3]] = True   # SW: facing S or W
VISIBLE[1, 0, [1, 2]] = True   # SE: facing E or S
VISIBLE[0, 1, [0, 3]] = True   # NW: facing N or W
VISIBLE[1, 1, [0, 1]] = True   # NE: facing N or E


@struct.dataclass
class GridState:
    pos: jax.Array           # (2,) int32 corner (x, y) inside the window
    orientation: jax.Array   # () int32 facing: 0 north, 1 east, 2 south, 3 west
    done: jax.Array          # () bool the episode has ended (set from outside)
    num_steps: jax.Array     # () int32 actions taken before it ended


def observe(landmarks: jax.Array, state: GridState, orientation_aware: bool = False) -> jax.Array:
    """The (K,) landmark ids at the tourist's corner; `landmarks` (the params) is (X, Y, K).

    `orientation_aware`: `[Empty]` (padded) unless the tourist faces away from the intersection.
    """
    ids = landmarks[state.pos[0], state.pos[1]]
    if not orientation_aware:
        return ids
    visible = jnp.asarray(VISIBLE)[state.pos[0] % 2, state.pos[1] % 2, state.orientation]
    empty = jnp.zeros_like(ids).at[0].set(EMPTY_ID)
    return jnp.where(visible, ids, empty)


def reset(landmarks: jax.Array, pos: jax.Array, orientation: jax.Array) -> GridState:
    """The tourist on corner pos (2,) facing `orientation` ()."""
    del landmarks   # the start does not depend on the window
    return GridState(jnp.asarray(pos, jnp.int32), jnp.asarray(orientation, jnp.int32),
                     jnp.zeros((), bool), jnp.zeros((), jnp.int32))


def random_reset(landmarks: jax.Array, key: jax.Array) -> GridState:
    """A uniformly random corner and orientation."""
    kx, ky, ko = jax.random.split(key, 3)
    pos = jnp.stack([jax.random.randint(kx, (), 0, landmarks.shape[0]),
                     jax.random.randint(ky, (), 0, landmarks.shape[1])])
    return reset(landmarks, pos, jax.random.randint(ko, (), 0, 4))


def step(landmarks: jax.Array, state: GridState, action: jax.Array) -> GridState:
    """Applies one action.

    UP/RIGHT/DOWN/LEFT move one corner in that direction and face it; TURNLEFT/TURNRIGHT rotate in
    place; FORWARD moves one corner in the facing direction.
    """
    action = jnp.asarray(action, jnp.int32)
    live = ~state.done
    is_agnostic = action < NUM_AGNOSTIC_ACTIONS
    turn = jnp.where(action == TURNLEFT, -1, jnp.where(action == TURNRIGHT, 1, 0))
    orientation = jnp.where(is_agnostic, action, (state.orientation + turn) % 4)
    moves = is_agnostic | (action == FORWARD)
    delta = jnp.where(moves, jnp.asarray(DELTAS)[orientation], 0)
    limit = jnp.array(landmarks.shape[:2], jnp.int32) - 1
    pos = jnp.clip(state.pos + delta, 0, limit)
    return state.replace(pos=jnp.where(live, pos, state.pos).astype(jnp.int32),
                         orientation=jnp.where(live, orientation,
                                               state.orientation).astype(jnp.int32),
                         num_steps=state.num_steps + live.astype(jnp.int32))


@struct.dataclass
class Walk:
    """A localization walk: what the tourist saw and did."""
    obs: jax.Array         # (T+1, K) int32 landmark ids at each corner visited
    actions: jax.Array     # (T,) int32 actions taken
    positions: jax.Array   # (T+1, 2) int32 corners visited


def walk(landmarks: jax.Array, state: GridState, actions: jax.Array,
         orientation_aware: bool = False) -> Walk:
    """Replays the fixed `actions` (T,) from `state` with `lax.scan`, recording what the tourist
    observes (a policy-driven episode is `ttw_jax.core.env.rollout`)."""
    def body(s, a):
        s = step(landmarks, s, a)
        return s, (observe(landmarks, s, orientation_aware), s.pos)

    _, (obs, pos) = jax.lax.scan(body, state, actions)
    obs = jnp.concatenate([observe(landmarks, state, orientation_aware)[None], obs])
    return Walk(obs, actions.astype(jnp.int32), jnp.concatenate([state.pos[None], pos]))


def random_walk(landmarks: jax.Array, key: jax.Array, num_steps: int,
                orientation_aware: bool = False) -> Walk:
    """A uniformly random start (corner and orientation) and `num_steps` uniformly random moves:
    agnostic UP/RIGHT/DOWN/LEFT, or TURNLEFT/TURNRIGHT/FORWARD for an orientation-aware tourist."""
    k_reset, k_act = jax.random.split(key)
    state = random_reset(landmarks, k_reset)
    if orientation_aware:
        actions = jax.random.randint(k_act, (num_steps,), TURNLEFT, FORWARD + 1)
    else:
        actions = jax.random.randint(k_act, (num_steps,), 0, NUM_AGNOSTIC_ACTIONS)
    return walk(landmarks, state, actions, orientation_aware)
