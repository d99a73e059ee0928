"""Synthetic Touchdown routes with templated instructions, in the original JSON-lines schema.

Routes are walked on any Touchdown-format graph (the real one or `synthetic_street_grid`): start
mid-block, optionally facing away ("turn around"), then a few segments that each go straight
through some intersections and turn left or right, ending at an intersection. Every instruction
states exactly what to do, so an agent that counts intersections can follow it.
"""
from __future__ import annotations

import json
from typing import Sequence

import numpy as np

from ttw_jax.touchdown.graph import LinkRow

_NUMBERS = ("no", "one", "two", "three", "four")
_GO = ("Go straight", "Walk forward", "Continue straight", "Head forward")
_TURN = ("turn {d} at the next intersection", "take a {d} at the next intersection",
         "make a {d} turn at the next intersection")
_STOP = ("stop at the next intersection", "stop when you reach the next intersection")
_OBJECTS = ("a red fire hydrant", "a blue mailbox", "a yellow taxi", "a green bench",
            "a black trash can", "a white van")
_SIDES = ("on your left", "on your right", "in front of you", "on the corner")


def _angle(a: int, b: int) -> int:
    return 180 - abs(abs(a - b) - 180)


class _Walker:
    def __init__(self, links: Sequence[LinkRow]):
        self.out: dict[str, list[tuple[int, str]]] = {}
        for a, h, b in links:
            self.out.setdefault(a, []).append((h % 360, b))

    def straight(self, pano: str, heading: int) -> tuple[int, str] | None:
        """The out-edge within 45 degrees of `heading` closest to it, if any."""
        best = min(self.out.get(pano, []), key=lambda e: _angle(e[0], heading), default=None)
        return best if best is not None and _angle(best[0], heading) <= 45 else None

    def turn(self, pano: str, heading: int, side: str) -> tuple[int, str] | None:
        target = (heading + (-90 if side == "left" else 90)) % 360
        best = min(self.out.get(pano, []), key=lambda e: _angle(e[0], target), default=None)
        return best if best is not None and _angle(best[0], target) <= 30 else None


def _route(walker: _Walker, rng: np.random.Generator, starts: list[str], max_len: int):
    pano = starts[rng.integers(len(starts))]
    heading, _ = walker.out[pano][rng.integers(2)]
    turn_around = bool(rng.random() < 0.3)
    start_heading = (heading + 180) % 360 if turn_around else heading
    route, parts = [pano], ["Turn around."] if turn_around else []
    num_segments = int(rng.integers(1, 4))
    for seg in range(num_segments):
        last = seg == num_segments - 1
        skip = int(rng.integers(0, 3))
        passed = 0
        while True:   # walk to the next intersection, passing `skip` of them
            edge = walker.straight(pano, heading)
            if edge is None or len(route) >= max_len:
                return None
            heading, pano = edge
            route.append(pano)
            if len(walker.out[pano]) >= 3:
                if passed == skip:
                    break
                passed += 1
        go = _GO[rng.integers(len(_GO))]
        through = f" through {_NUMBERS[skip]} intersection{'s' if skip != 1 else ''}" if skip else ""
        if last:
            parts.append(f"{go}{through} and {_STOP[rng.integers(len(_STOP))]}.")
            break
        side = ("left", "right")[rng.integers(2)]
        edge = walker.turn(pano, heading, side)
        if edge is None:
            return None
        heading, pano = edge
        route.append(pano)
        parts.append(f"{go}{through} and {_TURN[rng.integers(len(_TURN))].format(d=side)}.")
    return route, start_heading, " ".join(parts)


def synthetic_records(links: Sequence[LinkRow], num_routes: int, seed: int,
                      max_route_len: int = 45, first_route_id: int = 0) -> list[dict]:
    """`num_routes` records in the Touchdown schema (navigation and SDR fields) on the graph of
    `links`; deterministic in `seed`."""
    rng = np.random.default_rng(seed)
    walker = _Walker(links)
    starts = sorted(p for p, out in walker.out.items() if len(out) == 2)
    records = []
    while len(records) < num_routes:
        made = _route(walker, rng, starts, max_route_len)
        if made is None:
            continue
        route, start_heading, text = made
        obj = _OBJECTS[rng.integers(len(_OBJECTS))]
        side = _SIDES[rng.integers(len(_SIDES))]
        location = f"Touchdown is on {obj} {side}."
        end_heading = float(rng.uniform(0, 360))
        rec = {
            "route_id": first_route_id + len(records),
            "navigation_text": text,
            "td_location_text": location,
            "full_text": f"{text} {location}",
            "route_panoids": route,
            # The real records store start_heading 0.0; synthetic routes start facing along (or
            # against) the street so that "turn around" is meaningful.
            "start_heading": float(start_heading),
            "end_heading": end_heading,
        }
        for name, pano in (("main", route[-1]), ("pre", route[-2]), ("post", route[-1])):
            x, y = rng.uniform(0.05, 0.95), rng.uniform(0.3, 0.8)
            rec[f"{name}_pano"] = pano
            rec[f"{name}_heading"] = str(end_heading)
            rec[f"{name}_static_center"] = json.dumps({"x": x, "y": y})
        records.append(rec)
    return records
