"""Egocentric symbolic views of the ArraMon simulator: what the agent sees, as a set of entities.

Every entity is (attrs [3] int: pattern, colour, type ids, 0 = unknown; geo [4] float; visible
bool), so navigation and assembly views share one model input (one episode; batches vmap them):
- Navigation: each present object within `VIEW_RANGE` units and `FIELD_OF_VIEW` degrees of the
  heading; geo = (sin, cos) of its bearing (positive to the right), distance / VIEW_RANGE, 1.
  There is no occlusion (the data do not hold the buildings).
- Assembly: the 20 grid cells (visible when an object of known looks is on top; objects whose
  looks are unknown, i.e. reconstructed under real level-2 targets, stay invisible so the view
  cannot point at the target cell) and the four walls (always visible, each its own type id after the object types); geo = the
  entity's (right, forward) offset from the agent in cells / 4, its stack height / 2, 1.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ttw_jax.arramon import env

VIEW_RANGE = 12.0
FIELD_OF_VIEW = 120.0
GEO_DIM = 4
NUM_WALLS = 4
# Wall midpoints in grid coordinates (gx, gz): far (+z), right (+x), near (-z), left (-x).
WALLS = ((2.0, 4.0), (5.0, 1.5), (2.0, -1.0), (-1.0, 1.5))
NUM_ENTITIES_ASSEMBLY = env.GRID_COLUMNS * env.GRID_ROWS + NUM_WALLS


def navigation_view(state: env.NavState, attrs: jax.Array, mask: jax.Array):
    """(attrs (K, 3), geo (K, 4), visible (K,)) of one episode's objects with attrs (K, 3) and
    mask (K,) (real objects)."""
    forward, right = env.object_offsets(state)
    dist = jnp.sqrt(forward ** 2 + right ** 2)
    bearing = jnp.arctan2(right, forward)
    visible = (mask & state.present & (dist < VIEW_RANGE)
               & (jnp.abs(bearing) <= jnp.deg2rad(FIELD_OF_VIEW / 2)))
    geo = jnp.stack([jnp.sin(bearing), jnp.cos(bearing), dist / VIEW_RANGE,
                     jnp.ones_like(dist)], -1)
    return attrs, jnp.where(visible[..., None], geo, 0.0), visible


def wall_type(num_types: int, wall: int) -> int:
    """Type id of wall 0..3 when objects use type ids 1..num_types."""
    return num_types + 1 + wall


def assembly_view(state: env.AssemblyState, grid_attrs: jax.Array, num_types: int):
    """(attrs (24, 3), geo (24, 4), visible (24,)) of one episode's grid cells (top object
    attrs grid_attrs (5, 4, 3)) and the four walls."""
    gx, gz = jnp.meshgrid(jnp.arange(env.GRID_COLUMNS), jnp.arange(env.GRID_ROWS), indexing="ij")
    cells = jnp.stack([gx.ravel(), gz.ravel()], -1).astype(jnp.float32)        # [20, 2]
    points = jnp.concatenate([cells, jnp.asarray(WALLS, jnp.float32)], 0)      # [24, 2]
    rel = points - state.cell.astype(jnp.float32)                              # [24, 2]
    psi = state.heading.astype(jnp.float32) * (jnp.pi / 6)
    s, c = jnp.sin(psi), jnp.cos(psi)
    forward = rel[..., 0] * s + rel[..., 1] * c
    right = rel[..., 0] * c - rel[..., 1] * s
    height = jnp.concatenate([state.heights.reshape(-1).astype(jnp.float32),
                              jnp.zeros((NUM_WALLS,))])
    geo = jnp.stack([right / 4, forward / 4, height / 2, jnp.ones_like(height)], -1)
    wall_attrs = jnp.array([[0, 0, wall_type(num_types, w)] for w in range(NUM_WALLS)], jnp.int32)
    attrs = jnp.concatenate([grid_attrs.reshape(-1, 3), wall_attrs])
    known = (state.heights > 0) & (grid_attrs[..., 2] > 0)
    visible = jnp.concatenate([known.reshape(-1), jnp.ones((NUM_WALLS,), bool)])
    return attrs, jnp.where(visible[..., None], geo, 0.0), visible
