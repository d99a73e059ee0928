"""A small, obviously-correct pure-Python simulator of the R2R / RxR panoramic action space: the
ground truth the device simulator is tested against. It works on raw connectivity JSON and shares no
code with the compiled graph.
"""
from __future__ import annotations

import math
from typing import Sequence


class MatterportReference:
    """Panoramic action space over connectivity JSON: action 0 is STOP, action i >= 1 moves to the
    i-th navigable neighbour in order of heading (clockwise from +y, in [0, 2pi); ties keep file
    order). The agent's heading becomes the heading of the edge it took."""

    def __init__(self, scans: dict[str, list[dict]]):
        self.neighbors: dict[str, list[tuple[float, float, str]]] = {}
        for scan, data in scans.items():
            for entry in data:
                if not entry["included"]:
                    continue
                p = entry["pose"]
                here = (p[3], p[7], p[11])
                cands = []
                for other, ok in zip(data, entry["unobstructed"]):
                    if ok and other["included"] and other is not entry:
                        q = other["pose"]
                        dx, dy, dz = q[3] - here[0], q[7] - here[1], q[11] - here[2]
                        heading = math.atan2(dx, dy) % (2 * math.pi)
                        elevation = math.atan2(dz, math.hypot(dx, dy))
                        cands.append((heading, elevation, f"{scan}/{other['image_id']}"))
                cands.sort(key=lambda c: c[0])   # stable: ties keep file order
                self.neighbors[f"{scan}/{entry['image_id']}"] = cands

    def step(self, node: str, heading: float, action: int) -> tuple[str, float]:
        cands = self.neighbors[node]
        if action == 0 or action > len(cands):
            return node, heading
        h, _, nxt = cands[action - 1]
        return nxt, h

    def run(self, node: str, heading: float, actions: Sequence[int]) -> list[tuple[str, float]]:
        states, stopped = [(node, heading)], False
        for a in actions:
            if not stopped:
                node, heading = self.step(node, heading, a)
                stopped = a == 0
            states.append((node, heading))
        return states
