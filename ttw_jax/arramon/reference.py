"""A plain-Python simulator of one ArraMon episode: the reference the batched JAX simulator
(`ttw_jax.arramon.env`) is tested against, and the baseline of its benchmark.

Written from the rules stated in `ttw_jax.arramon.env` with plain floats and ints (`math` only;
numpy is used for nothing but reading the walkable raster). Unlike the JAX simulator, which keeps
integer step counts per heading, the position here is accumulated directly in double precision.

Actions: 0 forward, 1 left, 2 right, 3 pick-up (navigation) / place (assembly).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

FORWARD, LEFT, RIGHT, PICK = 0, 1, 2, 3
PLACE = PICK
NUM_HEADINGS = 12
TURN = math.pi / 6                 # 30 degrees
PICK_LATERAL, PICK_FORWARD = 0.5, 3.0
OBJECT_RADIUS = 0.04               # objects are discs: reachable when they touch the rectangle
GRID_COLUMNS, GRID_ROWS = 5, 4
START_CELL = (2, 0)
# Unit moves (dgx, dgz) along the four grid axes, and the angle of each axis in degrees (measured
# from +z towards +x, like the navigation heading).
AXES = (((0, 1), 0), ((1, 0), 90), ((0, -1), 180), ((-1, 0), 270))


def _turned(heading: int, action: int) -> int:
    if action == LEFT:
        return (heading - 1) % NUM_HEADINGS
    if action == RIGHT:
        return (heading + 1) % NUM_HEADINGS
    return heading


class NavReference:
    """One navigation phase in the continuous city.

    walkable_grid [H, W] bool (row i covers x in origin_x + [i, i + 1) * resolution, column j
    covers z likewise; points off the raster are not walkable); start (x, z); psi0 the episode's
    start heading in radians (from +z towards +x); heading the initial number of 30-degree right
    turns from psi0; objects [(x, y, z)]; present [bool] (objects still in the world).
    """

    def __init__(self, walkable_grid, origin: Sequence[float], resolution: float,
                 start: Sequence[float], psi0: float, heading: int,
                 objects: Sequence[Sequence[float]], present: Sequence[bool]):
        self.grid = np.asarray(walkable_grid, bool)
        self.origin = (float(origin[0]), float(origin[1]))
        self.resolution = float(resolution)
        self.x, self.z = float(start[0]), float(start[1])
        self.psi0 = float(psi0)
        self._heading = int(heading) % NUM_HEADINGS
        self.objects = [(float(o[0]), float(o[1]), float(o[2])) for o in objects]
        self.present = [bool(p) for p in present]
        self.picked = -1
        self.auto = False
        self.done = False
        self.num_steps = 0

    @property
    def position(self) -> tuple[float, float]:
        return self.x, self.z

    @property
    def heading(self) -> int:
        return self._heading

    def direction(self) -> tuple[float, float]:
        """(sin psi, cos psi): the (x, z) displacement of one forward step."""
        psi = self.psi0 + TURN * self._heading
        return math.sin(psi), math.cos(psi)

    def ahead(self) -> tuple[float, float]:
        """Where a forward step would land."""
        dx, dz = self.direction()
        return self.x + dx, self.z + dz

    def walkable(self, x: float, z: float) -> bool:
        i = math.floor((x - self.origin[0]) / self.resolution)
        j = math.floor((z - self.origin[1]) / self.resolution)
        h, w = self.grid.shape
        return 0 <= i < h and 0 <= j < w and bool(self.grid[i, j])

    def relative(self, k: int) -> tuple[float, float]:
        """(lateral, forward) offset of object k in the agent's frame (lateral > 0 to the left)."""
        dx, dz = self.direction()
        rx, rz = self.objects[k][0] - self.x, self.objects[k][2] - self.z
        return rx * dz - rz * dx, rx * dx + rz * dz

    def in_reach(self, k: int) -> bool:
        lateral, forward = self.relative(k)
        r = OBJECT_RADIUS
        return (self.present[k] and abs(lateral) <= PICK_LATERAL + r
                and -r <= forward <= PICK_FORWARD + r)

    def _take(self, k: int) -> None:
        self.picked = k
        self.present[k] = False

    def step(self, action: int) -> None:
        if self.done:
            return
        self.num_steps += 1
        if action == FORWARD:
            x, z = self.ahead()
            if self.walkable(x, z):
                self.x, self.z = x, z
        elif action in (LEFT, RIGHT):
            self._heading = _turned(self._heading, action)
        elif action == PICK:
            # The nearest reachable object: the first one met walking straight ahead (smallest
            # forward distance; the lowest index on ties).
            reach = [(self.relative(k)[1], k) for k in range(len(self.objects)) if self.in_reach(k)]
            if reach:
                self._take(min(reach)[1])
                self.done = True
        else:
            raise ValueError(f"unknown action {action}")

    def finish(self) -> None:
        """The step-limit fallback: without a pick-up, take the present object nearest in (x, z)
        (the lowest index on ties) and set `auto`. Ends the phase."""
        if self.picked < 0:
            dist = [(math.hypot(o[0] - self.x, o[2] - self.z), k)
                    for k, o in enumerate(self.objects) if self.present[k]]
            if dist:
                self._take(min(dist)[1])
                self.auto = True
        self.done = True


class AssemblyReference:
    """One assembly phase on the 5 x 4 grid (cells (gx, gz), gx 0..4, gz 0..3), starting at cell
    (2, 0) facing +z. heights [5][4]: objects already stacked per cell (copied)."""

    def __init__(self, heights: Sequence[Sequence[int]]):
        self._heights = [[int(h) for h in column] for column in heights]
        assert len(self._heights) == GRID_COLUMNS and all(len(c) == GRID_ROWS
                                                          for c in self._heights)
        self.gx, self.gz = START_CELL
        self._heading = 0
        self.placed: tuple[int, int, int] | None = None     # (gx, level, gz)
        self.auto = False
        self.done = False
        self.num_steps = 0

    @property
    def cell(self) -> tuple[int, int]:
        return self.gx, self.gz

    @property
    def heading(self) -> int:
        return self._heading

    @property
    def heights(self) -> list[list[int]]:
        return [list(column) for column in self._heights]

    def axis_move(self) -> tuple[int, int]:
        """The grid axis closest to the heading (30 * heading degrees; never a tie)."""
        degrees = 30 * self._heading

        def gap(axis):
            d = abs(degrees - axis[1]) % 360
            return min(d, 360 - d)
        return min(AXES, key=gap)[0]

    def ahead(self) -> tuple[int, int]:
        dgx, dgz = self.axis_move()
        return self.gx + dgx, self.gz + dgz

    @staticmethod
    def in_grid(gx: int, gz: int) -> bool:
        return 0 <= gx < GRID_COLUMNS and 0 <= gz < GRID_ROWS

    def _place(self) -> None:
        gx, gz = self.ahead()
        if not self.in_grid(gx, gz):
            gx, gz = self.gx, self.gz
        self._heights[gx][gz] += 1
        self.placed = (gx, self._heights[gx][gz], gz)

    def step(self, action: int) -> None:
        if self.done:
            return
        self.num_steps += 1
        if action == FORWARD:
            gx, gz = self.ahead()
            if self.in_grid(gx, gz):
                self.gx, self.gz = gx, gz
        elif action in (LEFT, RIGHT):
            self._heading = _turned(self._heading, action)
        elif action == PLACE:
            self._place()
            self.done = True
        else:
            raise ValueError(f"unknown action {action}")

    def finish(self) -> None:
        """The step-limit fallback: an object not yet placed goes in front of the agent (its own
        cell if that is off the grid), `auto` set. Ends the phase."""
        if self.placed is None:
            self._place()
            self.auto = True
        self.done = True
