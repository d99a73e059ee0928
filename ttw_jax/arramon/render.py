"""Rendered image features for synthetic ArraMon cities: the view at ANY pose, in the release's
feature layout ([7, 7, D] maps, D = 2048 as the release's ResNet maps by default).

The release's features exist only at the poses its demonstrations pass (`features`), so an
evaluation rollout that leaves the demonstration is shown the nearest recorded pose's view
(`features.nearest_recorded`, the project's proxy for the Unity simulator's rendering). On
synthetic cities the project can render the true view at the agent's own pose, which measures
what the proxy costs (the README's proxy-bias table). Both perceptions go through the same
renderer, so they differ only in the pose (and, after a turn, the world state) rendered:

- `true`: the agent's own pose and world (its own pick-up and placement in the cascade).
- `nearest_recorded`: the recorded pose nearest the agent's (`features.nearest_recorded` over
  the demonstration's poses before each action, `features.demonstration_poses`) in the
  demonstration's world at that turn (the ground truth's earlier pick-up and placement), as the
  release recorded them.

The renderer draws each visible entity of the simulator's symbolic view (`views`) into the cell
of the 7 x 7 map given by its bearing (7 columns over the 120-degree field of view) and distance
(7 rows, near to far): the sum of fixed random codes [D] of its pattern, colour and type (the
assembly room's walls are types of their own, `views.wall_type`) and, in the assembly room, its
stack height. The codes come from `render_seed`, so the same seed is the same "camera".
"""
from __future__ import annotations

from typing import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.arramon import env, views
from ttw_jax.arramon.episodes import turn_examples
from ttw_jax.arramon.features import PHASES, demonstration_poses, nearest_steps

GRID = 7                      # the release's 7 x 7 feature maps
PERCEPTIONS = ("true", "nearest_recorded")
MAX_HEIGHT = 4                # stack height codes 0..MAX_HEIGHT - 1 (higher ones share the last)
ROOM_RANGE = 6.5              # assembly room: farthest entity drawn, in cells (the diagonal ~6.4)
# Keys `demonstration_keys` adds to a split's episodes ([N, 2, ...]: per turn), read per turn by
# the nearest-recorded perception: the poses before each demonstration action, which of them
# exist (t < the phase's length), and the demonstration's world at the turn's start.
DEMO_KEYS = ("navi_feat_pose", "navi_recorded", "assem_feat_pose", "assem_recorded",
             "navi_demo_present", "assem_demo_heights", "assem_demo_grid_attrs")


def codebook(num_attrs: tuple[int, int, int], width: int, seed: int) -> np.ndarray:
    """[sum(num_attrs) + MAX_HEIGHT, width] float32 standard normal codes: pattern ids, colour
    ids, type ids (walls included), then stack heights."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((sum(num_attrs) + MAX_HEIGHT, width)).astype(np.float32)


def _draw(codes: jax.Array, num_attrs, attrs: jax.Array, bearing: jax.Array, dist: jax.Array,
          visible: jax.Array, max_dist: float, height: jax.Array | None = None) -> jax.Array:
    """[49, D]: entities (attrs [E, 3], bearing [E] radians, dist [E], visible [E]) drawn into
    the cells of their bearing and distance."""
    half = jnp.deg2rad(views.FIELD_OF_VIEW / 2)
    col = jnp.clip(jnp.floor((bearing + half) / (2 * half) * GRID), 0, GRID - 1)
    row = jnp.clip(jnp.floor(dist / max_dist * GRID), 0, GRID - 1)
    cell = (row * GRID + col).astype(jnp.int32)
    offsets = np.cumsum((0,) + tuple(num_attrs[:-1]))
    content = sum(codes[attrs[:, i] + int(offsets[i])] for i in range(3))
    if height is not None:
        content = content + codes[sum(num_attrs) + jnp.clip(height, 0, MAX_HEIGHT - 1)]
    content = jnp.where(visible[:, None], content, 0.0)
    return jnp.zeros((GRID * GRID, codes.shape[1]), codes.dtype).at[cell].add(content)


def render_navigation(state: env.NavState, attrs: jax.Array, mask: jax.Array, codes: jax.Array,
                      num_attrs) -> jax.Array:
    """[49, D] view of one navigation state (objects attrs [K, 3], mask [K])."""
    forward, right = env.object_offsets(state)
    _, _, visible = views.navigation_view(state, attrs, mask)
    return _draw(codes, num_attrs, attrs, jnp.arctan2(right, forward),
                 jnp.sqrt(forward ** 2 + right ** 2), visible, views.VIEW_RANGE)


def render_assembly(state: env.AssemblyState, grid_attrs: jax.Array, num_types: int,
                    codes: jax.Array, num_attrs) -> jax.Array:
    """[49, D] view of one assembly state (top objects' attrs grid_attrs [5, 4, 3]): the known
    objects and the walls within the field of view."""
    attrs, geo, visible = views.assembly_view(state, grid_attrs, num_types)
    right, forward = 4 * geo[:, 0], 4 * geo[:, 1]
    bearing = jnp.arctan2(right, forward)
    in_view = visible & (jnp.abs(bearing) <= jnp.deg2rad(views.FIELD_OF_VIEW / 2))
    height = jnp.round(2 * geo[:, 2]).astype(jnp.int32)
    return _draw(codes, num_attrs, attrs, bearing, jnp.sqrt(forward ** 2 + right ** 2),
                 in_view, ROOM_RANGE, height)


def assembly_cell(xz: jax.Array) -> jax.Array:
    """Grid cells [..., 2] (gx, gz) int32 of world points xz [..., 2] (`env.assembly_world`
    inverted)."""
    origin = jnp.asarray([env.ASSEMBLY_ORIGIN[0], env.ASSEMBLY_ORIGIN[2]], jnp.float32)
    return (jnp.round((xz - origin) / env.CELL) + jnp.asarray(env.START_CELL)).astype(jnp.int32)


def _nearest(batch: Mapping, phase: str, state):
    """[B, 3] (x, z, heading) of the recorded pose nearest each agent's pose."""
    poses = batch[f"{phase}_feat_pose"]
    return poses[jnp.arange(poses.shape[0]), nearest_steps(batch, phase, state)]


def perception(codes: np.ndarray, num_attrs, num_types: int, mode: str
               ) -> tuple[Callable, Callable]:
    """(navigation, assembly) view builders for `model`'s policies: each maps a turn-level
    batch to view(state) -> (feats [B, 49, D], valid [B, 49]). `mode` is one of PERCEPTIONS;
    `nearest_recorded` needs the batch's DEMO_KEYS (per turn)."""
    if mode not in PERCEPTIONS:
        raise ValueError(f"perception must be one of {PERCEPTIONS}, got {mode!r}")
    nav = jax.vmap(lambda s, a, m: render_navigation(s, a, m, jnp.asarray(codes), num_attrs))
    assem = jax.vmap(lambda s, g: render_assembly(s, g, num_types, jnp.asarray(codes),
                                                  num_attrs))

    def valid(f):
        return f, jnp.ones(f.shape[:2], bool)

    def navigation(batch):
        def view(state):
            if mode == "nearest_recorded":
                pose = _nearest(batch, "navi", state)
                state = state.replace(start=pose[:, :2], counts=jnp.zeros_like(state.counts),
                                      heading=pose[:, 2].astype(jnp.int32),
                                      present=batch["navi_demo_present"])
            return valid(nav(state, batch["object_attrs"], batch["object_mask"]))
        return view

    def assembly(batch):
        def view(state):
            grid_attrs = batch["grid_attrs"]
            if mode == "nearest_recorded":
                pose = _nearest(batch, "assem", state)
                state = state.replace(cell=assembly_cell(pose[:, :2]),
                                      heading=pose[:, 2].astype(jnp.int32),
                                      heights=batch["assem_demo_heights"])
                grid_attrs = batch["assem_demo_grid_attrs"]
            return valid(assem(state, grid_attrs))
        return view
    return navigation, assembly


def demonstration_keys(walkable: env.Walkable, ep: Mapping[str, np.ndarray]) -> dict:
    """DEMO_KEYS of a split's episodes (the arrays of `episodes.episodes`): the recorded poses
    [N, 2, T, 3] and which exist [N, 2, T] per phase, and per turn the demonstration's world at
    its start: present objects [N, 2, K], heights [N, 2, 5, 4], top objects' attrs
    [N, 2, 5, 4, 3] (`episodes.turn_examples`: turn 2 after the ground truth's turn 1)."""
    poses = demonstration_poses(walkable, ep)
    ex = turn_examples(dict(ep))
    n = len(ep["psi0"])

    def per_turn(x):                 # [2N, ...] (turn 2 rows after turn 1's) -> [N, 2, ...]
        return np.stack([x[:n], x[n:]], 1)
    out = {"navi_demo_present": per_turn(ex["present"]),
           "assem_demo_heights": per_turn(ex["heights"]),
           "assem_demo_grid_attrs": per_turn(ex["grid_attrs"])}
    for phase in PHASES:
        t = np.arange(ep[f"{phase}_actions"].shape[-1])
        out[f"{phase}_feat_pose"] = poses[phase]
        out[f"{phase}_recorded"] = t < np.asarray(ep[f"{phase}_len"])[..., None]
    return out
