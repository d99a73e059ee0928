"""ArraMon (Kim et al. 2020): navigate and pick up, then assemble on a grid; pure `reset`/`step`.

Navigation (continuous city, Unity world coordinates (x, z), y up):
- The heading is `psi0 + 30 degrees * heading`, psi measured from +z towards +x
  (`atan2(dx, dz)`); `psi0` is the episode's start heading (reconstructed from the data, see
  `ttw_jax.arramon.episodes.start_heading`).
- FORWARD adds (sin psi, cos psi) to (x, z) if the landing point is walkable (`Walkable`), else
  the agent stays; LEFT / RIGHT turn by -30 / +30 degrees.
- PICK takes the still-present object inside the rectangle |lateral| <= 0.5, 0 <= forward <= 3
  of the agent that is nearest straight ahead (smallest forward distance) and ends the phase;
  with none there it does nothing.
- The position is kept as `start + counts @ directions` with integer forward counts per heading,
  so a replay is exact up to one float32 rounding however long the path.
Assembly (a 5 x 4 grid, columns gx 0..4, rows gz 0..3, bordered by four walls):
- Every phase restarts at cell (2, 0) facing +z; headings are 30-degree steps (three turns make
  a right angle). FORWARD moves one cell along the nearest axis of the heading (the ground truth
  only moves at multiples of 90 degrees) unless that leaves the grid.
- PLACE puts the held object in the cell one step ahead (at the agent's own cell if that is
  outside the grid), on top of what is already there (level = objects there + 1), and ends the
  phase.
Fallbacks (the paper's): a navigation phase that ends without a pick-up takes the present
object nearest in (x, z) (`finish_navigation`), an assembly phase without a placement places in front
(`finish_assembly`); both set `auto`, which zeroes the phase's CTC / rPOD / PTC.
Rollouts are `ttw_jax.core.rollout.scan_rollout`: vmap-free batched steps (every leaf carries a
leading batch axis), a fixed horizon (the paper's limit, 150 steps per phase) with done masks.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from ttw_jax.core.rollout import Policy, scan_rollout

FORWARD, LEFT, RIGHT, PICK = 0, 1, 2, 3
PLACE = PICK
ACTIONS = ("f", "l", "r", "P")
NUM_ACTIONS = 4
NUM_HEADINGS = 12            # 30-degree steps
STEP_LIMIT = 150             # per phase
AGENT_Y = 0.525
PICK_LATERAL, PICK_FORWARD = 0.5, 3.0
GRID_COLUMNS, GRID_ROWS = 5, 4
START_CELL = (2, 0)
CELL = 1.5
ASSEMBLY_ORIGIN = (239.656616, -487.623871, -199.363037)   # world position of START_CELL
# Axis moves (dgx, dgz) for axis 0..3 = +z, +x, -z, -x (headings 0, 3, 6, 9).
AXIS_MOVES = ((0, 1), (1, 0), (0, -1), (-1, 0))


@struct.dataclass
class Walkable:
    """Free space as rasters: grid [G, H, W] bool (row = x, column = z); origin [G, 2] the (x, z)
    of the lower corner of cell (0, 0); `resolution` the cell size. Episodes pick a raster by
    `map_index`. Points outside a raster are not walkable."""
    grid: jax.Array
    origin: jax.Array
    resolution: float = struct.field(pytree_node=False)

    def contains(self, map_index: jax.Array, xz: jax.Array) -> jax.Array:
        """[...] bool: is xz [..., 2] walkable in raster map_index [...]?"""
        grid, origin = jnp.asarray(self.grid), jnp.asarray(self.origin)
        _, h, w = grid.shape
        ij = jnp.floor((xz - origin[map_index]) / self.resolution).astype(jnp.int32)
        inside = (ij[..., 0] >= 0) & (ij[..., 0] < h) & (ij[..., 1] >= 0) & (ij[..., 1] < w)
        i, j = jnp.clip(ij[..., 0], 0, h - 1), jnp.clip(ij[..., 1], 0, w - 1)
        return inside & grid[map_index, i, j]


@struct.dataclass
class NavState:
    """Batched navigation state (leading axis B).

    start [B, 2] (x, z); directions [B, 12, 2] (sin, cos) of psi0 + 30 k; counts [B, 12] int32
    forward steps taken per heading; heading [B] int32 in 0..11; map_index [B] int32;
    objects [B, K, 3] (x, y, z); present [B, K] bool (objects still in the world);
    picked [B] int32 object index or -1; auto [B] bool (picked by the fallback);
    done [B] bool; num_steps [B] int32 actions taken (the pick-up included).
    """
    start: jax.Array
    directions: jax.Array
    counts: jax.Array
    heading: jax.Array
    map_index: jax.Array
    objects: jax.Array
    present: jax.Array
    picked: jax.Array
    auto: jax.Array
    done: jax.Array
    num_steps: jax.Array

    @property
    def position(self) -> jax.Array:
        """[..., B, 2] (x, z) (any leading axes, e.g. time in a trajectory)."""
        offset = jnp.einsum("...k,...kd->...d", self.counts.astype(self.directions.dtype),
                            self.directions)
        return self.start + offset


@struct.dataclass
class AssemblyState:
    """Batched assembly state: cell [B, 2] int32 (gx, gz); heading [B] int32 in 0..11 (0 = +z,
    3 = +x); heights [B, 5, 4] int32 objects stacked per cell; placed [B, 3] int32
    (gx, level, gz) or -1; auto [B] bool; done [B] bool; num_steps [B] int32."""
    cell: jax.Array
    heading: jax.Array
    heights: jax.Array
    placed: jax.Array
    auto: jax.Array
    done: jax.Array
    num_steps: jax.Array

    @property
    def position(self) -> jax.Array:
        """[B, 2] world (x, z) of the agent's cell."""
        return assembly_world(self.cell)


def assembly_world(cell: jax.Array) -> jax.Array:
    """World (x, z) [..., 2] of grid cells [..., 2] (gx, gz)."""
    cell = jnp.asarray(cell, jnp.float32)
    x = ASSEMBLY_ORIGIN[0] + CELL * (cell[..., 0] - START_CELL[0])
    z = ASSEMBLY_ORIGIN[2] + CELL * (cell[..., 1] - START_CELL[1])
    return jnp.stack([x, z], -1)


def heading_directions(psi0: jax.Array) -> jax.Array:
    """[B, 12, 2] (sin, cos) of psi0 [B] (radians) + 30 degrees * k."""
    psi = jnp.asarray(psi0, jnp.float32)[:, None] + jnp.arange(NUM_HEADINGS) * (jnp.pi / 6)
    return jnp.stack([jnp.sin(psi), jnp.cos(psi)], -1)


def reset_navigation(start: jax.Array, psi0: jax.Array, objects: jax.Array, present: jax.Array,
                     map_index: jax.Array, heading: jax.Array | None = None) -> NavState:
    """Navigation state at start [B, 2] facing psi0 [B] + 30 * heading [B] (default 0)."""
    b = start.shape[0]
    heading = jnp.zeros((b,), jnp.int32) if heading is None else jnp.asarray(heading, jnp.int32)
    return NavState(start=jnp.asarray(start, jnp.float32), directions=heading_directions(psi0),
                    counts=jnp.zeros((b, NUM_HEADINGS), jnp.int32), heading=heading % NUM_HEADINGS,
                    map_index=jnp.asarray(map_index, jnp.int32),
                    objects=jnp.asarray(objects, jnp.float32), present=jnp.asarray(present, bool),
                    picked=jnp.full((b,), -1, jnp.int32), auto=jnp.zeros((b,), bool),
                    done=jnp.zeros((b,), bool), num_steps=jnp.zeros((b,), jnp.int32))


def pickable(state: NavState) -> tuple[jax.Array, jax.Array]:
    """(inside [B, K] bool: present objects in the pick-up rectangle, forward [B, K] distance)."""
    rel = state.objects[..., jnp.array([0, 2])] - state.position[:, None, :]      # [B, K, 2]
    d = jnp.take_along_axis(state.directions, state.heading[:, None, None], 1)    # [B, 1, 2]
    forward = jnp.sum(rel * d, -1)
    lateral = rel[..., 0] * d[..., 1] - rel[..., 1] * d[..., 0]
    inside = (state.present & (jnp.abs(lateral) <= PICK_LATERAL) & (forward >= 0)
              & (forward <= PICK_FORWARD))
    return inside, forward


def step_navigation(walkable: Walkable, state: NavState, action: jax.Array) -> NavState:
    """One action per episode (action [B] int); finished episodes are left unchanged."""
    live = ~state.done
    one_hot = jax.nn.one_hot(state.heading, NUM_HEADINGS, dtype=jnp.int32)
    ahead = state.position + jnp.take_along_axis(state.directions, state.heading[:, None, None],
                                                 1)[:, 0]
    moves = live & (action == FORWARD) & walkable.contains(state.map_index, ahead)
    counts = state.counts + one_hot * moves[:, None].astype(jnp.int32)
    turn = jnp.where(action == LEFT, -1, jnp.where(action == RIGHT, 1, 0))
    heading = jnp.where(live, (state.heading + turn) % NUM_HEADINGS, state.heading)
    inside, forward = pickable(state)
    nearest = jnp.argmin(jnp.where(inside, forward, jnp.inf), -1).astype(jnp.int32)
    picks = live & (action == PICK) & jnp.any(inside, -1)
    picked = jnp.where(picks, nearest, state.picked)
    present = state.present & ~(picks[:, None] & (jnp.arange(inside.shape[1]) == nearest[:, None]))
    return state.replace(counts=counts, heading=heading, picked=picked, present=present,
                         done=state.done | picks, num_steps=state.num_steps + live)


def finish_navigation(state: NavState) -> NavState:
    """The step-limit fallback: without a pick-up, the nearest present object (in (x, z)) is
    taken and `auto` is set. Returns the state with `done` everywhere."""
    rel = state.objects[..., jnp.array([0, 2])] - state.position[:, None, :]
    dist = jnp.where(state.present, jnp.linalg.norm(rel, axis=-1), jnp.inf)
    nearest = jnp.argmin(dist, -1).astype(jnp.int32)
    auto = (state.picked < 0) & jnp.any(state.present, -1)
    picked = jnp.where(auto, nearest, state.picked)
    present = state.present & ~(auto[:, None] & (jnp.arange(dist.shape[1]) == nearest[:, None]))
    return state.replace(picked=picked, present=present, auto=auto,
                         done=jnp.ones_like(state.done))


def reset_assembly(heights: jax.Array) -> AssemblyState:
    """Assembly state at the start cell facing +z, with heights [B, 5, 4] already on the grid."""
    b = heights.shape[0]
    return AssemblyState(cell=jnp.tile(jnp.array(START_CELL, jnp.int32), (b, 1)),
                         heading=jnp.zeros((b,), jnp.int32),
                         heights=jnp.asarray(heights, jnp.int32),
                         placed=jnp.full((b, 3), -1, jnp.int32), auto=jnp.zeros((b,), bool),
                         done=jnp.zeros((b,), bool), num_steps=jnp.zeros((b,), jnp.int32))


def _in_grid(cell: jax.Array) -> jax.Array:
    return ((cell[..., 0] >= 0) & (cell[..., 0] < GRID_COLUMNS) & (cell[..., 1] >= 0)
            & (cell[..., 1] < GRID_ROWS))


def cell_ahead(state: AssemblyState) -> tuple[jax.Array, jax.Array]:
    """(cell [B, 2] one step along the heading's nearest axis, inside [B] bool)."""
    axis = ((state.heading + 1) // 3) % 4      # nearest axis of 30 * heading degrees
    ahead = state.cell + jnp.asarray(AXIS_MOVES, jnp.int32)[axis]
    return ahead, _in_grid(ahead)


def _place(state: AssemblyState, where: jax.Array):
    """(heights, placed [B, 3]) after placing on the cell ahead (own cell if outside) where."""
    ahead, inside = cell_ahead(state)
    target = jnp.where(inside[:, None], ahead, state.cell)
    b = jnp.arange(target.shape[0])
    level = state.heights[b, target[:, 0], target[:, 1]] + 1
    heights = state.heights.at[b, target[:, 0], target[:, 1]].add(where.astype(jnp.int32))
    placed = jnp.where(where[:, None], jnp.stack([target[:, 0], level, target[:, 1]], -1),
                       state.placed)
    return heights, placed


def step_assembly(state: AssemblyState, action: jax.Array) -> AssemblyState:
    """One action per episode (action [B] int); finished episodes are left unchanged."""
    live = ~state.done
    ahead, inside = cell_ahead(state)
    moves = live & (action == FORWARD) & inside
    cell = jnp.where(moves[:, None], ahead, state.cell)
    turn = jnp.where(action == LEFT, -1, jnp.where(action == RIGHT, 1, 0))
    heading = jnp.where(live, (state.heading + turn) % NUM_HEADINGS, state.heading)
    places = live & (action == PLACE)
    heights, placed = _place(state, places)
    return state.replace(cell=cell, heading=heading, heights=heights, placed=placed,
                         done=state.done | places, num_steps=state.num_steps + live)


def finish_assembly(state: AssemblyState) -> AssemblyState:
    """The step-limit fallback: an unplaced object goes in front of the agent, `auto` set."""
    auto = state.placed[:, 0] < 0
    heights, placed = _place(state, auto)
    return state.replace(heights=heights, placed=placed, auto=auto,
                         done=jnp.ones_like(state.done))


def navigate(walkable: Walkable, state: NavState, policy: Policy, carry, rng: jax.Array,
             horizon: int = STEP_LIMIT):
    """A navigation phase: (final state after the fallback, carry, trajectory dict with `state`
    (the states actions were taken in, [T, B, ...]), `action` [T, B] and `output`)."""
    final, carry, states, actions, outs = scan_rollout(
        lambda s, a: step_navigation(walkable, s, a), state, policy, carry, rng, horizon)
    return finish_navigation(final), carry, dict(state=states, action=actions, output=outs)


def assemble(state: AssemblyState, policy: Policy, carry, rng: jax.Array,
             horizon: int = STEP_LIMIT):
    """An assembly phase: (final state after the fallback, carry, trajectory dict)."""
    final, carry, states, actions, outs = scan_rollout(step_assembly, state, policy, carry, rng,
                                                       horizon)
    return finish_assembly(final), carry, dict(state=states, action=actions, output=outs)


def path_of(positions: jax.Array, final: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The visited points with repeats dropped: positions [T, B, 2] of the states actions were
    taken in plus final [B, 2] -> (path [B, T + 1, 2] compacted to the front, padded with the
    last point; length [B] int32). A point is kept when it differs from the one before, so
    turns and refused moves add nothing (like the ground-truth paths: the start plus one point
    per forward step)."""
    pts = jnp.concatenate([positions, final[None]], 0).transpose(1, 0, 2)      # [B, T+1, 2]
    moved = jnp.any(pts[:, 1:] != pts[:, :-1], -1)
    keep = jnp.concatenate([jnp.ones_like(moved[:, :1]), moved], 1)
    length = jnp.sum(keep, 1).astype(jnp.int32)
    slot = jnp.where(keep, jnp.cumsum(keep, 1) - 1, pts.shape[1])
    rows = jnp.arange(pts.shape[0])[:, None]
    out = jnp.zeros_like(pts).at[rows, slot].set(pts, mode="drop")
    last = jnp.take_along_axis(out, (length - 1)[:, None, None], 1)
    pad = jnp.arange(pts.shape[1])[None, :, None] >= length[:, None, None]
    return jnp.where(pad, last, out), length


def random_policy(carry, state, t, key):
    """Uniform over the 4 actions (the paper's random walk); output is None."""
    action = jax.random.randint(key, state.done.shape, 0, NUM_ACTIONS, jnp.int32)
    return carry, action, None
