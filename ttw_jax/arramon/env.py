"""ArraMon (Kim et al. 2020): navigate and pick up, then assemble on a grid; pure `reset`/`step`.

Navigation (continuous city, Unity world coordinates (x, z), y up):
- The heading is `psi0 + 30 degrees * heading`, psi measured from +z towards +x
  (`atan2(dx, dz)`); `psi0` is the episode's start heading (reconstructed from the data, see
  `ttw_jax.arramon.episodes.start_heading`).
- FORWARD adds (sin psi, cos psi) to (x, z) if the landing point is walkable (`Walkable`), else
  the agent stays; LEFT / RIGHT turn by -30 / +30 degrees.
- PICK takes the still-present object touching the rectangle |lateral| <= 0.5, 0 <= forward <= 3
  of the agent (objects are discs of radius `OBJECT_RADIUS`, so the test on their centres is
  |lateral| <= 0.54, -0.04 <= forward <= 3.04) that is nearest straight ahead (smallest forward
  distance) and ends the phase; with none there it does nothing. Points would reject 14 of the
  2,130 ground-truth pick-ups of val_seen (lateral offsets up to 0.5333); discs of radius 0.04
  take all of them.
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
(`finish_assembly`); both set `auto` (what that costs in each metric: `metrics`).
The two phases are two environments of the protocol of `ttw_jax.core.env`, each a small params /
state pair with single-episode functions: navigation `reset_navigation` / `step_navigation` /
`finish_navigation` over `Walkable` / `NavState`, assembly `reset_assembly` / `step_assembly` /
`finish_assembly` over `AssemblyGrid` / `AssemblyState`. A phase is `ttw_jax.core.env.rollout`
over a fixed horizon (the paper's limit, 150 steps per phase) with done masks, then its `finish`.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from ttw_jax.core.env import Trajectory, compact_path

FORWARD, LEFT, RIGHT, PICK = 0, 1, 2, 3
PLACE = PICK                 # action 3 of the assembly phase
ACTION_NAMES = ("FORWARD", "LEFT", "RIGHT", "PICK")
NUM_ACTIONS = 4
NUM_HEADINGS = 12            # 30-degree steps
STEP_LIMIT = 150             # per phase
AGENT_Y = 0.525
PICK_LATERAL, PICK_FORWARD = 0.5, 3.0   # the paper's pick-up rectangle (section 3.1)
OBJECT_RADIUS = 0.04       # object extent: the largest ground-truth excess is 0.0333 (val_seen)
GRID_COLUMNS, GRID_ROWS = 5, 4
START_CELL = (2, 0)
CELL = 1.5
ASSEMBLY_ORIGIN = (239.656616, -487.623871, -199.363037)   # world position of START_CELL
# Axis moves (dgx, dgz) for axis 0..3 = +z, +x, -z, -x (headings 0, 3, 6, 9).
AXIS_MOVES = ((0, 1), (1, 0), (0, -1), (-1, 0))


@struct.dataclass
class Walkable:
    """The navigation params: free space as rasters, one per map; an episode picks its raster by
    `map_index`. Points outside a raster are not walkable."""
    grid: jax.Array      # (G, H, W) bool free cells (row = x, column = z)
    origin: jax.Array    # (G, 2) float32 (x, z) of the lower corner of cell (0, 0)
    resolution: float = struct.field(pytree_node=False)   # cell size

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
    start: jax.Array        # (2,) float32 (x, z) where the phase started
    directions: jax.Array   # (12, 2) float32 (sin, cos) of psi0 + 30 k degrees
    counts: jax.Array       # (12,) int32 forward steps taken per heading
    heading: jax.Array      # () int32 in 0..11
    map_index: jax.Array    # () int32 raster of the `Walkable` map
    objects: jax.Array      # (K, 3) float32 (x, y, z)
    present: jax.Array      # (K,) bool objects still in the world
    picked: jax.Array       # () int32 object taken, -1 none
    auto: jax.Array         # () bool taken by the fallback
    done: jax.Array         # () bool picked up (or out of steps, after a rollout)
    num_steps: jax.Array    # () int32 actions taken before it ended (the pick-up included)

    @property
    def position(self) -> jax.Array:
        """[..., 2] (x, z) (any leading axes, e.g. batch and time in a trajectory)."""
        offset = jnp.einsum("...k,...kd->...d", self.counts.astype(self.directions.dtype),
                            self.directions)
        return self.start + offset


@struct.dataclass
class AssemblyGrid:
    """The assembly params: the room's grid of cells inside four walls."""
    columns: int = struct.field(pytree_node=False, default=GRID_COLUMNS)   # gx 0..columns - 1
    rows: int = struct.field(pytree_node=False, default=GRID_ROWS)         # gz 0..rows - 1


ASSEMBLY = AssemblyGrid()    # ArraMon's room


@struct.dataclass
class AssemblyState:
    cell: jax.Array         # (2,) int32 (gx, gz)
    heading: jax.Array      # () int32 in 0..11 (0 = +z, 3 = +x)
    heights: jax.Array      # (columns, rows) int32 objects stacked per cell
    placed: jax.Array       # (3,) int32 (gx, level, gz) of the placement, or -1
    auto: jax.Array         # () bool placed by the fallback
    done: jax.Array         # () bool placed (or out of steps, after a rollout)
    num_steps: jax.Array    # () int32 actions taken before it ended (the placement included)

    @property
    def position(self) -> jax.Array:
        """[..., 2] world (x, z) of the agent's cell."""
        return assembly_world(self.cell)


def assembly_world(cell: jax.Array) -> jax.Array:
    """World (x, z) [..., 2] of grid cells [..., 2] (gx, gz)."""
    cell = jnp.asarray(cell, jnp.float32)
    x = ASSEMBLY_ORIGIN[0] + CELL * (cell[..., 0] - START_CELL[0])
    z = ASSEMBLY_ORIGIN[2] + CELL * (cell[..., 1] - START_CELL[1])
    return jnp.stack([x, z], -1)


def heading_directions(psi0: jax.Array) -> jax.Array:
    """(12, 2) (sin, cos) of psi0 () (radians) + 30 degrees * k."""
    psi = jnp.asarray(psi0, jnp.float32) + jnp.arange(NUM_HEADINGS) * (jnp.pi / 6)
    return jnp.stack([jnp.sin(psi), jnp.cos(psi)], -1)


def reset_navigation(walkable: Walkable, start: jax.Array, psi0: jax.Array, objects: jax.Array,
                     present: jax.Array, map_index: jax.Array, heading: jax.Array = 0) -> NavState:
    """Navigation state at start (2,) facing psi0 () + 30 * heading () degrees, among
    objects (K, 3) of which `present` (K,) are still in the world."""
    del walkable   # the map does not change the start
    return NavState(start=jnp.asarray(start, jnp.float32), directions=heading_directions(psi0),
                    counts=jnp.zeros((NUM_HEADINGS,), jnp.int32),
                    heading=jnp.asarray(heading, jnp.int32) % NUM_HEADINGS,
                    map_index=jnp.asarray(map_index, jnp.int32),
                    objects=jnp.asarray(objects, jnp.float32), present=jnp.asarray(present, bool),
                    picked=jnp.full((), -1, jnp.int32), auto=jnp.zeros((), bool),
                    done=jnp.zeros((), bool), num_steps=jnp.zeros((), jnp.int32))


def object_offsets(state: NavState) -> tuple[jax.Array, jax.Array]:
    """(forward (K,), right (K,)): each object's offset from the agent along its heading and to
    its right, in world units."""
    rel = state.objects[..., jnp.array([0, 2])] - state.position                  # (K, 2)
    d = state.directions[state.heading]                                           # (2,)
    return jnp.sum(rel * d, -1), rel[..., 0] * d[1] - rel[..., 1] * d[0]


def pickable(state: NavState) -> tuple[jax.Array, jax.Array]:
    """(inside (K,) bool: present objects touching the pick-up rectangle, forward (K,)
    distance of their centres)."""
    forward, lateral = object_offsets(state)
    inside = (state.present & (jnp.abs(lateral) <= PICK_LATERAL + OBJECT_RADIUS)
              & (forward >= -OBJECT_RADIUS) & (forward <= PICK_FORWARD + OBJECT_RADIUS))
    return inside, forward


def step_navigation(walkable: Walkable, state: NavState, action: jax.Array) -> NavState:
    """One action; a finished episode is left unchanged."""
    live = ~state.done
    one_hot = jax.nn.one_hot(state.heading, NUM_HEADINGS, dtype=jnp.int32)
    ahead = state.position + state.directions[state.heading]
    moves = live & (action == FORWARD) & walkable.contains(state.map_index, ahead)
    counts = state.counts + one_hot * moves.astype(jnp.int32)
    turn = jnp.where(action == LEFT, -1, jnp.where(action == RIGHT, 1, 0))
    heading = jnp.where(live, (state.heading + turn) % NUM_HEADINGS, state.heading)
    inside, forward = pickable(state)
    nearest = jnp.argmin(jnp.where(inside, forward, jnp.inf), -1).astype(jnp.int32)
    picks = live & (action == PICK) & jnp.any(inside, -1)
    picked = jnp.where(picks, nearest, state.picked)
    present = state.present & ~(picks & (jnp.arange(inside.shape[-1]) == nearest))
    return state.replace(counts=counts, heading=heading, picked=picked, present=present,
                         done=state.done | picks, num_steps=state.num_steps + live)


def finish_navigation(walkable: Walkable, state: NavState) -> NavState:
    """The step-limit fallback: without a pick-up, the nearest present object (in (x, z)) is
    taken and `auto` is set. Returns the state with `done` set."""
    del walkable
    rel = state.objects[..., jnp.array([0, 2])] - state.position
    dist = jnp.where(state.present, jnp.linalg.norm(rel, axis=-1), jnp.inf)
    nearest = jnp.argmin(dist, -1).astype(jnp.int32)
    auto = (state.picked < 0) & jnp.any(state.present, -1)
    picked = jnp.where(auto, nearest, state.picked)
    present = state.present & ~(auto & (jnp.arange(dist.shape[-1]) == nearest))
    return state.replace(picked=picked, present=present, auto=auto,
                         done=jnp.ones_like(state.done))


def reset_assembly(grid: AssemblyGrid, heights: jax.Array) -> AssemblyState:
    """Assembly state at the start cell facing +z, with heights (columns, rows) already on the
    grid."""
    del grid
    return AssemblyState(cell=jnp.array(START_CELL, jnp.int32), heading=jnp.zeros((), jnp.int32),
                         heights=jnp.asarray(heights, jnp.int32),
                         placed=jnp.full((3,), -1, jnp.int32), auto=jnp.zeros((), bool),
                         done=jnp.zeros((), bool), num_steps=jnp.zeros((), jnp.int32))


def cell_ahead(grid: AssemblyGrid, state: AssemblyState) -> tuple[jax.Array, jax.Array]:
    """(cell (2,) one step along the heading's nearest axis, inside () bool)."""
    axis = ((state.heading + 1) // 3) % 4      # nearest axis of 30 * heading degrees
    ahead = state.cell + jnp.asarray(AXIS_MOVES, jnp.int32)[axis]
    inside = ((ahead[0] >= 0) & (ahead[0] < grid.columns) & (ahead[1] >= 0)
              & (ahead[1] < grid.rows))
    return ahead, inside


def _place(grid: AssemblyGrid, state: AssemblyState, where: jax.Array):
    """(heights, placed (3,)) after placing on the cell ahead (own cell if outside) if `where`."""
    ahead, inside = cell_ahead(grid, state)
    target = jnp.where(inside, ahead, state.cell)
    level = state.heights[target[0], target[1]] + 1
    heights = state.heights.at[target[0], target[1]].add(where.astype(jnp.int32))
    placed = jnp.where(where, jnp.stack([target[0], level, target[1]]), state.placed)
    return heights, placed


def step_assembly(grid: AssemblyGrid, state: AssemblyState, action: jax.Array) -> AssemblyState:
    """One action; a finished episode is left unchanged."""
    live = ~state.done
    ahead, inside = cell_ahead(grid, state)
    moves = live & (action == FORWARD) & inside
    cell = jnp.where(moves, ahead, state.cell)
    turn = jnp.where(action == LEFT, -1, jnp.where(action == RIGHT, 1, 0))
    heading = jnp.where(live, (state.heading + turn) % NUM_HEADINGS, state.heading)
    places = live & (action == PLACE)
    heights, placed = _place(grid, state, places)
    return state.replace(cell=cell, heading=heading, heights=heights, placed=placed,
                         done=state.done | places, num_steps=state.num_steps + live)


def finish_assembly(grid: AssemblyGrid, state: AssemblyState) -> AssemblyState:
    """The step-limit fallback: an unplaced object goes in front of the agent, `auto` set."""
    auto = state.placed[0] < 0
    heights, placed = _place(grid, state, auto)
    return state.replace(heights=heights, placed=placed, auto=auto,
                         done=jnp.ones_like(state.done))


def path_of(traj: Trajectory, final: NavState | AssemblyState) -> tuple[jax.Array, jax.Array]:
    """The visited points of either phase with repeats dropped: (path [B, T + 1, 2] (x, z)
    compacted to the front, padded with the last point; length [B] int32). A point is kept when
    it differs from the one before, so turns and refused moves add nothing (like the
    ground-truth paths: the start plus one point per forward step)."""
    return compact_path(traj.state.position, final.position)


def random_policy(carry, state, t, key):
    """Uniform over the 4 actions (the paper's random walk); output is None."""
    action = jax.random.randint(key, state.done.shape, 0, NUM_ACTIONS, jnp.int32)
    return carry, action, None
