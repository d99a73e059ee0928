"""Touchdown navigation on a compiled Street View graph: pure `reset`/`step`, `lax.scan` rollouts.

State is (panorama, integer heading). The transition rules are the official navigator's, stated in
full in `candidate`; `compile_sim` tabulates them once for every (panorama, out-edge heading) pair,
so a step is a table lookup. Rollouts vmap over a batch of episodes and scan over a fixed horizon with done
masks; the policy runs inside the scan, so a model can drive the simulator on device.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from ttw_jax.core.pano_graph import PanoGraph
from ttw_jax.core.rollout import Policy, scan_rollout

FORWARD, LEFT, RIGHT, STOP = 0, 1, 2, 3
ACTIONS = ("FORWARD", "LEFT", "RIGHT", "STOP")
NUM_ACTIONS = 4
TRAIN_HORIZON, TEST_HORIZON = 55, 50
_BIG = 1 << 30


@struct.dataclass
class TouchdownSim:
    """A compiled graph plus its transition table.

    graph: the `PanoGraph` (integer headings).
    next_edge: [N * K, 3] int32. Once an agent has moved, its heading is always the heading of one
      of its panorama's out-edges, so its state is that edge, `pano * K + slot`; `next_edge[e, a]`
      is the state after FORWARD/LEFT/RIGHT (itself when refused). A step is then one gather.
    """
    graph: PanoGraph
    next_edge: jax.Array


@struct.dataclass
class TouchdownState:
    """pano: [] int32 node index; heading: [] int32 degrees in [0, 360); edge: [] int32 state
    `pano * K + slot` when the heading is an out-edge heading of `pano`, else -1 (only before the
    first move); first: [3] int32 edge reached by FORWARD/LEFT/RIGHT from an off-edge state (-1:
    refused); done: [] bool (stopped or out of steps); num_steps: [] int32 actions taken (STOP
    included)."""
    pano: jax.Array
    heading: jax.Array
    edge: jax.Array
    first: jax.Array
    done: jax.Array
    num_steps: jax.Array


def _first_min(key: jax.Array) -> jax.Array:
    return jnp.argmin(key, axis=-1)


def _snap_slot(graph: PanoGraph, pano, heading):
    """Slot of the out-edge of `pano` whose heading is closest to `heading` (ties: first edge in
    links.txt order)."""
    hs = graph.headings[pano]
    diff = 180 - jnp.abs(jnp.abs(hs - heading) - 180)
    key = jnp.where(graph.neighbors[pano] >= 0, diff * 64 + graph.link_rank[pano], _BIG)
    return _first_min(key)


def candidate(graph: PanoGraph, pano, heading, action):
    """The (panorama, out-edge slot) an action leads to before the <2-out-edges check; slot -1
    means the heading is unchanged (a turn with no other out-edge, or STOP).

    FORWARD: along the out-edge whose heading equals `heading` (else stay), then snap to the
    candidate's out-edge heading closest to `heading`. LEFT/RIGHT: the nearest other out-edge
    heading counter-clockwise/clockwise, i.e. minimising (h - h') mod 360 / (h' - h) mod 360.
    """
    nb, hs, rank = graph.neighbors[pano], graph.headings[pano], graph.link_rank[pano]
    valid = nb >= 0
    aligned = valid & (hs == heading)
    fwd_pano = jnp.where(aligned.any(), nb[_first_min(jnp.where(aligned, rank, _BIG))], pano)
    fwd_slot = _snap_slot(graph, fwd_pano, heading)

    other = valid & (hs != heading)
    def turn(delta):
        key = jnp.where(other, jnp.mod(delta, 360) * 64 + rank, _BIG)
        return jnp.where(other.any(), _first_min(key), -1)

    new_pano = jnp.where(action == FORWARD, fwd_pano, pano)
    slot = jnp.select([action == FORWARD, action == LEFT, action == RIGHT],
                      [fwd_slot, turn(heading - hs), turn(hs - heading)], -1)
    return new_pano, slot


def _moves(graph: PanoGraph, pano, heading) -> jax.Array:
    """[3] edge states reached by FORWARD/LEFT/RIGHT from (pano, heading); -1 where refused or
    where the heading would not change (a turn with no other out-edge)."""
    k = graph.max_degree
    def one(action):
        new_pano, slot = candidate(graph, pano, heading, action)
        ok = (graph.degree[new_pano] >= 2) & (slot >= 0)
        return jnp.where(ok, new_pano * k + slot, -1)
    return jax.vmap(one)(jnp.arange(3))


def compile_sim(graph: PanoGraph) -> TouchdownSim:
    """Builds the transition table of every (panorama, out-edge heading) state, on device."""
    graph = jax.tree.map(jnp.asarray, graph)
    n, k = graph.neighbors.shape
    pano = jnp.repeat(jnp.arange(n, dtype=jnp.int32), k)
    slot = jnp.tile(jnp.arange(k, dtype=jnp.int32), n)
    moves = jax.jit(jax.vmap(_moves, in_axes=(None, 0, 0)))(
        graph, pano, graph.headings.reshape(-1))
    own = (pano * k + slot)[:, None]
    valid = (graph.neighbors.reshape(-1) >= 0)[:, None]
    return TouchdownSim(graph, jnp.where(valid & (moves >= 0), moves, own).astype(jnp.int32))


def reset(sim: TouchdownSim, pano, heading) -> TouchdownState:
    """Start state at node `pano` facing `heading` (degrees, rounded to an integer); batched or
    not (leaves take the shape of `pano`)."""
    graph = sim.graph
    pano = jnp.asarray(pano, jnp.int32)
    heading = jnp.mod(jnp.round(jnp.asarray(heading)).astype(jnp.int32), 360)
    hs, nb = graph.headings[pano], graph.neighbors[pano]
    match = (hs == heading[..., None]) & (nb >= 0)
    slot = jnp.argmax(match, axis=-1)
    edge = jnp.where(match.any(-1), pano * graph.max_degree + slot, -1)
    moves = jnp.vectorize(lambda p, h: _moves(graph, p, h), signature="(),()->(a)")(pano, heading)
    return TouchdownState(pano, heading, edge, moves, jnp.zeros(pano.shape, bool),
                          jnp.zeros(pano.shape, jnp.int32))


def step(sim: TouchdownSim, state: TouchdownState, action) -> TouchdownState:
    """One action under the official rules (see `candidate`). Refused (state unchanged) if the
    candidate panorama has fewer than 2 out-edges; STOP ends the episode; a done episode never
    changes. Batched or not: leaves of `state` and `action` share their leading shape."""
    action = jnp.asarray(action, jnp.int32)
    a = jnp.clip(action, 0, 2)
    on_edge = sim.next_edge[jnp.maximum(state.edge, 0), a]
    off_edge = jnp.take_along_axis(state.first, a[..., None], axis=-1)[..., 0]
    nxt = jnp.where(state.edge >= 0, on_edge, off_edge)
    move = ~state.done & (action != STOP) & (nxt >= 0)
    edge = jnp.where(move, nxt, state.edge)
    k = sim.graph.max_degree
    safe = jnp.maximum(edge, 0)
    return TouchdownState(
        pano=jnp.where(move, safe // k, state.pano),
        heading=jnp.where(move, sim.graph.headings.reshape(-1)[safe], state.heading),
        edge=edge,
        first=state.first,
        done=state.done | (action == STOP),
        num_steps=state.num_steps + (~state.done).astype(jnp.int32),
    )




def rollout(sim: TouchdownSim, state: TouchdownState, policy: Policy, carry: Any,
            rng: jax.Array, horizon: int):
    """Runs `horizon` steps of a batched policy in one `lax.scan`.

    Returns (final state with done=True everywhere, final carry, trajectory) where the trajectory
    holds per step t (leading axis [horizon, B]): the `pano`/`heading`/`done` the action was taken
    in, the `action`, and the policy `output`.
    """
    final, carry, states, actions, outs = scan_rollout(
        lambda s, a: step(sim, s, a), state, policy, carry, rng, horizon)
    return final, carry, dict(pano=states.pano, heading=states.heading, done=states.done,
                              action=actions, output=outs)


def random_policy(carry, state, t, rng):
    """Uniform over FORWARD/LEFT/RIGHT, never STOP (the paper's Random baseline).

    One 16-bit draw per action mapped by (u * 3) >> 16 (probabilities 1/3 +- 1.5e-5): a quarter
    of the random bits `jax.random.randint` consumes, which is what bounds a random rollout's
    speed on CPU.
    """
    u = jax.random.bits(rng, state.pano.shape, jnp.uint16).astype(jnp.uint32)
    return carry, ((u * 3) >> 16).astype(jnp.int32), None


def constant_policy(action: int) -> Policy:
    """Always `action` (STOP: the Stop baseline; FORWARD: the Frequent baseline)."""
    def policy(carry, state, t, rng):
        return carry, jnp.full(state.pano.shape, action, jnp.int32), None
    return policy


def replay_policy(carry, state, t, rng):
    """Plays fixed action sequences: carry is [B, T] int32 actions (pad with STOP)."""
    return carry, carry[:, jnp.minimum(t, carry.shape[1] - 1)], None


def path_of(traj, final: TouchdownState):
    """Visited panoramas [B, horizon + 1] (positions after the final step repeat the last)."""
    return jnp.concatenate([traj["pano"].T, final.pano[:, None]], axis=1)
