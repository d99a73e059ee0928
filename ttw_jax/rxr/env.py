"""R2R / RxR navigation on compiled Matterport3D graphs with the panoramic action space (the
protocol of `ttw_jax.core.env`, the `PanoGraph` as params).

Action 0 is STOP; action i >= 1 moves to the i-th navigable neighbour of the current viewpoint
(neighbours sorted by heading). An action naming a padded (absent) neighbour leaves the state
unchanged. After a move the agent faces the heading of the edge it took. `candidates` gives the
agent each neighbour's heading (relative to its own) and elevation; `observe` adds the view
features. Functions are single-episode; `ttw_jax.core.env.rollout` vmaps the step over a batch.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import struct

from ttw_jax.core.env import Trajectory, compact_path
from ttw_jax.core.pano_graph import PanoGraph
from ttw_jax.rxr.views import (VIEW_ELEVATIONS, VIEW_HEADINGS, angle_features, gather_views,
                               nearest_view)

STOP = 0
# Angle encodings of a direction (`angle_encoding`): 4 = (sin, cos) of heading and elevation;
# 128 = each of the four tiled 32 times (Fried et al. 2018, as VALAN's agents read them).
ANGLE_DIMS = (4, 128)
# The fixed actions; action i >= 1 moves to neighbour slot i - 1 (`num_actions(graph)` in all).
ACTION_NAMES = ("STOP",)


@struct.dataclass
class MatterportState:
    node: jax.Array        # () int32 current viewpoint
    heading: jax.Array     # () float32 radians, clockwise from +y
    done: jax.Array        # () bool stopped (or out of steps, after a rollout)
    num_steps: jax.Array   # () int32 actions taken before it ended (STOP included)


def reset(graph: PanoGraph, node, heading) -> MatterportState:
    """Start state at viewpoint `node` facing `heading` (radians)."""
    del graph   # any viewpoint and heading may start
    return MatterportState(jnp.asarray(node, jnp.int32), jnp.asarray(heading, jnp.float32),
                           jnp.zeros((), bool), jnp.zeros((), jnp.int32))


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
    rel = jnp.mod(graph.headings[state.node] - state.heading + math.pi,
                  2 * math.pi) - math.pi
    return dict(node=nb, mask=nb >= 0, rel_heading=rel, elevation=graph.elevations[state.node],
                length=graph.lengths[state.node])


def angle_encoding(heading, elevation, dim: int = 4) -> jax.Array:
    """[..., dim] angle encoding of a (relative) heading and an elevation: dim 4 is
    `views.angle_features` (sin h, cos h, sin e, cos e); dim 128 repeats each of the four 32
    times in a block (Fried et al. 2018's 128-d form; the order of the copies is immaterial to
    the dense layers that read it)."""
    if dim not in ANGLE_DIMS:
        raise ValueError(f"angle encoding dim must be one of {ANGLE_DIMS}, got {dim!r}")
    return jnp.repeat(angle_features(heading, elevation), dim // 4, axis=-1)


def observe(graph: PanoGraph, state: MatterportState, view_features: jax.Array,
            angle_dim: int = 4) -> dict:
    """The agent's observation in `state` (A = `angle_dim`, see `angle_encoding`):

    views [36, D + A]: each standard view's features (`view_features` [N, 36, D], absolute
    orientation; float32 or bfloat16 bits, `views.device_table`) and the angle encoding of its
    heading relative to the agent and its elevation;
    cands [K, D + A + 2]: per navigable direction, the features of the view it lies in, the angle
    encoding of its relative heading and elevation, and two structural features: the edge
    length / 5 m and the neighbour's out-degree / 10; cand_mask [K] (neighbour present).
    """
    feats = gather_views(view_features, state.node)                     # [36, D] float32
    view_rel = jnp.asarray(VIEW_HEADINGS) - state.heading
    views = jnp.concatenate([feats, jnp.broadcast_to(
        angle_encoding(view_rel, jnp.asarray(VIEW_ELEVATIONS), angle_dim),
        view_rel.shape + (angle_dim,))], -1)
    cand = candidates(graph, state)
    which = nearest_view(jnp.asarray(graph.headings[state.node], jnp.float32), cand["elevation"])
    structure = jnp.stack([cand["length"] / 5.0, jnp.where(
        cand["mask"], graph.degree[jnp.maximum(cand["node"], 0)], 0) / 10.0], -1)
    cands = jnp.concatenate([feats[which], angle_encoding(cand["rel_heading"], cand["elevation"],
                                                          angle_dim),
                             structure.astype(feats.dtype)], -1)
    return dict(views=views, cands=cands, cand_mask=cand["mask"])


def path_of(traj: Trajectory, final: MatterportState) -> tuple[jax.Array, jax.Array]:
    """Visited viewpoints as (path [B, horizon + 1], length [B]): the start, then each node moved
    to; entries past `length` are -1. Consecutive repeats (refused actions) are dropped."""
    return compact_path(traj.state.node, final.node, fill=-1)
