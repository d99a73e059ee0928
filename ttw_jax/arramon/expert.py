"""An expert for navigation from any pose: the action that leads back onto the ground truth's
path and on to its target (the labels of student forcing, `ttw_jax.arramon.losses`).

The ground truth is only defined along its own path; an agent trained on it alone never sees
how to recover from its own mistakes (exposure bias). From a pose (x, z, heading) the expert
steers along the turn's gold path points `path` [P, 2] (the start plus one point per forward
step):
- j = the path point nearest to the agent (the later one on ties). Farther than `NEAR` from it,
  the agent heads for point j; within `NEAR`, for point j + 1.
- Heading for a point: FORWARD when its bearing is within 15 degrees of the heading (every
  bearing is then reachable: turns are 30 degrees), else the turn towards it (RIGHT for a
  positive bearing, to the right); a FORWARD that the walkable map would refuse becomes that
  turn.
- Within `NEAR` of the last point: PICK when the turn's target is the object the pick-up would
  take, else head for the target itself.
Along the gold path the expert's route can differ from the demonstration where two are equally
short (a turn-around to the left or to the right), so the student-forcing policy keeps the
demonstrated actions while the agent is still on them and asks the expert only after it left.
"""
from __future__ import annotations

import math
from typing import Callable

import jax
import jax.numpy as jnp

from ttw_jax.arramon import env
from ttw_jax.core.env import batched

NEAR = 0.75                                 # units: "at" a path point
ALIGNED = math.radians(15.0) + 1e-4         # bearing within which FORWARD is taken


def _towards(bearing: jax.Array) -> jax.Array:
    """FORWARD within ALIGNED of the heading, else the 30-degree turn towards the bearing."""
    turn = jnp.where(bearing > 0, env.RIGHT, env.LEFT)
    return jnp.where(jnp.abs(bearing) <= ALIGNED, env.FORWARD, turn).astype(jnp.int32)


def navigation_expert(walkable: env.Walkable, state: env.NavState, path: jax.Array,
                      path_len: jax.Array, target: jax.Array) -> jax.Array:
    """() int32 expert action of one episode in `state`, towards gold path points path [P, 2]
    (the first path_len () valid) and the target object index target () of `state.objects`."""
    pos = state.position
    index = jnp.arange(path.shape[0])
    dist = jnp.linalg.norm(path - pos, axis=-1)
    j = jnp.argmin(jnp.where(index < path_len, dist - 1e-4 * index, jnp.inf))
    last = path_len - 1
    near = dist[j] <= NEAR
    aim = path[jnp.where(near, jnp.minimum(j + 1, last), j)]
    d = state.directions[state.heading]
    rel = aim - pos
    bearing = jnp.arctan2(rel[0] * d[1] - rel[1] * d[0], jnp.sum(rel * d))
    along = _towards(bearing)
    blocked = (along == env.FORWARD) & ~walkable.contains(state.map_index, pos + d)
    along = jnp.where(blocked, jnp.where(bearing > 0, env.RIGHT, env.LEFT), along)

    forward, right = env.object_offsets(state)
    inside, ahead = env.pickable(state)
    takes = jnp.argmin(jnp.where(inside, ahead, jnp.inf))
    can_pick = inside[target] & (takes == target)
    to_object = jnp.where(can_pick, env.PICK,
                          _towards(jnp.arctan2(right[target], forward[target])))
    return jnp.where(near & (j == last), to_object, along).astype(jnp.int32)


def batch_expert(walkable: env.Walkable, batch: dict) -> Callable[[env.NavState], jax.Array]:
    """expert(state) -> [B] int32 actions of `navigation_expert` for the batched `state` of a
    turn-level `batch` (keys of `episodes.turn_examples`: navi_path, navi_path_len, target)."""
    expert = batched(navigation_expert)
    return lambda state: expert(walkable, state, batch["navi_path"], batch["navi_path_len"],
                                batch["target"])


def expert_policy(walkable: env.Walkable, batch: dict):
    """policy(carry, state, t, key) of the expert alone over a turn-level `batch` (as
    `batch_expert`); carry is None."""
    expert = batch_expert(walkable, batch)

    def policy(carry, state, t, key):
        return carry, expert(state), None
    return policy
