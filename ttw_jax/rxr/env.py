"""R2R / RxR navigation on compiled Matterport3D graphs with the panoramic action space.

Action 0 is STOP; action i >= 1 moves to the i-th navigable neighbour of the current viewpoint
(neighbours sorted by heading). An action naming a padded (absent) neighbour leaves the state
unchanged. After a move the agent faces the heading of the edge it took. `candidates` gives the
agent each neighbour's heading (relative to its own) and elevation.
"""
from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from ttw_jax.core.pano_graph import PanoGraph
from ttw_jax.core.rollout import Policy, scan_rollout
from ttw_jax.rxr.views import VIEW_ELEVATIONS, VIEW_HEADINGS, angle_features, nearest_view

STOP = 0


@struct.dataclass
class MatterportState:
    """node: [] int32; heading: [] float32 radians (clockwise from +y); done: [] bool;
    num_steps: [] int32 actions taken (STOP included)."""
    node: jax.Array
    heading: jax.Array
    done: jax.Array
    num_steps: jax.Array


def reset(node, heading) -> MatterportState:
    node = jnp.asarray(node, jnp.int32)
    return MatterportState(node, jnp.asarray(heading, jnp.float32), jnp.zeros(node.shape, bool),
                           jnp.zeros(node.shape, jnp.int32))


def num_actions(graph: PanoGraph) -> int:
    """STOP plus one action per neighbour slot: K + 1."""
    return graph.max_degree + 1


def step(graph: PanoGraph, state: MatterportState, action) -> MatterportState:
    action = jnp.asarray(action, jnp.int32)
    slot = jnp.clip(action - 1, 0, graph.max_degree - 1)
    nxt = graph.neighbors[state.node, slot]
    move = ~state.done & (action != STOP) & (action <= graph.max_degree) & (nxt >= 0)
    return MatterportState(
        node=jnp.where(move, nxt, state.node),
        heading=jnp.where(move, graph.headings[state.node, slot], state.heading),
        done=state.done | (action == STOP),
        num_steps=state.num_steps + (~state.done).astype(jnp.int32),
    )


def candidates(graph: PanoGraph, state: MatterportState) -> dict:
    """What the agent sees of its action space, each [K]: `node`, `mask` (neighbour present),
    `rel_heading` (edge heading minus agent heading, wrapped to [-pi, pi)), `elevation`, `length`."""
    nb = graph.neighbors[state.node]
    rel = jnp.mod(graph.headings[state.node] - state.heading[..., None] + math.pi,
                  2 * math.pi) - math.pi
    return dict(node=nb, mask=nb >= 0, rel_heading=rel, elevation=graph.elevations[state.node],
                length=graph.lengths[state.node])


def observe(graph: PanoGraph, view_features: jax.Array, state: MatterportState) -> dict:
    """The agent's observation in `state` (batched):

    views [B, 36, D + 4]: each standard view's features (`view_features` [N, 36, D], absolute
    orientation) and the angle encoding of its heading relative to the agent and its elevation;
    cands [B, K, D + 6]: per navigable direction, the features of the view it lies in, the
    angle encoding of its relative heading and elevation, and two structural features: the edge
    length / 5 m and the neighbour's out-degree / 10; cand_mask [B, K] (neighbour present).
    """
    node = state.node
    view_rel = jnp.asarray(VIEW_HEADINGS)[None] - state.heading[:, None]
    views = jnp.concatenate([view_features[node], jnp.broadcast_to(
        angle_features(view_rel, jnp.asarray(VIEW_ELEVATIONS)[None]), view_rel.shape + (4,))], -1)
    cand = candidates(graph, state)
    which = nearest_view(jnp.asarray(graph.headings[node], jnp.float32), cand["elevation"])
    cand_vis = jnp.take_along_axis(view_features[node], which[..., None], axis=1)
    structure = jnp.stack([cand["length"] / 5.0, jnp.where(
        cand["mask"], graph.degree[jnp.maximum(cand["node"], 0)], 0) / 10.0], -1)
    cands = jnp.concatenate([cand_vis, angle_features(cand["rel_heading"], cand["elevation"]),
                             structure.astype(cand_vis.dtype)], -1)
    return dict(views=views, cands=cands, cand_mask=cand["mask"])


def rollout(graph: PanoGraph, state: MatterportState, policy: Policy, carry: Any, rng: jax.Array,
            horizon: int):
    """Batched `lax.scan` rollout; same contract as `ttw_jax.touchdown.env.rollout` (trajectory
    keys `node`, `heading`, `done`, `action`, `output`, each [horizon, B, ...])."""
    final, carry, states, actions, outs = scan_rollout(
        lambda s, a: step(graph, s, a), state, policy, carry, rng, horizon)
    return final, carry, dict(node=states.node, heading=states.heading, done=states.done,
                              action=actions, output=outs)


def path_of(traj, final: MatterportState):
    """Visited viewpoints as (path [B, horizon + 1], length [B]): the start, then each node moved
    to; entries past `length` are -1. Consecutive repeats (refused actions) are dropped."""
    nodes = jnp.concatenate([traj["node"].T, final.node[:, None]], axis=1)
    keep = jnp.concatenate([jnp.ones_like(nodes[:, :1], bool), nodes[:, 1:] != nodes[:, :-1]], 1)
    order = jnp.argsort(~keep, axis=1, stable=True)
    path = jnp.where(jnp.take_along_axis(keep, order, 1), jnp.take_along_axis(nodes, order, 1), -1)
    return path, keep.sum(1)
