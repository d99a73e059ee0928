"""Touchdown navigation on a compiled Street View graph (the protocol of `ttw_jax.core.env`).

State is (panorama, integer heading). The transition rules are the official navigator's, stated in
full in `candidate`; `compile_sim` tabulates them once for every (panorama, out-edge heading) pair,
so a step is a table lookup. `reset` / `step` are single-episode with the `TouchdownSim` as params;
`ttw_jax.core.env.rollout` vmaps the step over a batch and scans it over a fixed horizon with done
masks, the policy inside the scan, so a model can drive the simulator on device.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from ttw_jax.core.env import Policy, Trajectory
from ttw_jax.core.pano_graph import PanoGraph

FORWARD, LEFT, RIGHT, STOP = 0, 1, 2, 3
ACTION_NAMES = ("FORWARD", "LEFT", "RIGHT", "STOP")
NUM_ACTIONS = 4
TRAIN_HORIZON, TEST_HORIZON = 55, 50
_BIG = 1 << 30


@struct.dataclass
class TouchdownSim:
    """A compiled graph plus its transition table (the environment's params).

    Once an agent has moved, its heading is always the heading of one of its panorama's
    out-edges, so its state is that edge, `pano * K + slot`, and a step is one gather.
    """
    graph: PanoGraph        # the graph, integer headings
    next_edge: jax.Array    # (N * K, 3) int32 edge state after FORWARD/LEFT/RIGHT (itself: refused)


@struct.dataclass
class TouchdownState:
    pano: jax.Array        # () int32 current panorama (node index)
    heading: jax.Array     # () int32 degrees in [0, 360)
    edge: jax.Array        # () int32 `pano * K + slot` when heading is an out-edge heading of
                           #    pano, else -1 (only before the first move)
    first: jax.Array       # (3,) int32 edge reached by FORWARD/LEFT/RIGHT from an off-edge
                           #    state (-1: refused)
    done: jax.Array        # () bool stopped (or out of steps, after a rollout)
    num_steps: jax.Array   # () int32 actions taken before it ended (STOP included)


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
    """Start state at node `pano` facing `heading` (degrees, rounded to an integer)."""
    graph = sim.graph
    pano = jnp.asarray(pano, jnp.int32)
    heading = jnp.mod(jnp.round(jnp.asarray(heading)).astype(jnp.int32), 360)
    match = (graph.headings[pano] == heading) & (graph.neighbors[pano] >= 0)
    edge = jnp.where(match.any(), pano * graph.max_degree + jnp.argmax(match), -1)
    return TouchdownState(pano, heading, edge, _moves(graph, pano, heading), jnp.zeros((), bool),
                          jnp.zeros((), jnp.int32))


def step(sim: TouchdownSim, state: TouchdownState, action) -> TouchdownState:
    """One action under the official rules (see `candidate`). Refused (state unchanged) if the
    candidate panorama has fewer than 2 out-edges; STOP ends the episode; a done episode never
    changes."""
    action = jnp.asarray(action, jnp.int32)
    a = jnp.clip(action, 0, 2)
    on_edge = sim.next_edge[jnp.maximum(state.edge, 0), a]
    nxt = jnp.where(state.edge >= 0, on_edge, state.first[a])
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


def path_of(traj: Trajectory, final: TouchdownState) -> tuple[jax.Array, jax.Array]:
    """(visited panoramas [B, horizon + 1], length [B]): the panorama of every state, turns
    included (positions after the final step repeat the last), so length is horizon + 1."""
    path = jnp.concatenate([traj.state.pano.T, final.pano[:, None]], axis=1)
    return path, jnp.full(path.shape[:1], path.shape[1], jnp.int32)
