"""A small, obviously-correct pure-Python Touchdown navigator: the ground truth the device simulator
is tested against, the plain-Python baseline of the benchmark, and gold actions along a route. It
works on raw ids straight from `links.txt` and shares no code with the compiled graph.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Sequence

FORWARD, LEFT, RIGHT, STOP = 0, 1, 2, 3


class TouchdownReference:
    """The official navigator's rules over `links.txt` rows (start, heading, end)."""

    def __init__(self, links: Iterable[tuple[str, int, str]]):
        self.out: dict[str, list[tuple[int, str]]] = defaultdict(list)  # in links.txt order
        for start, heading, end in links:
            self.out[start].append((heading % 360, end))

    def unlinked_step(self, route: Sequence[str]) -> tuple[str, str] | None:
        """The first two consecutive panoramas of `route` that no link joins (None if none)."""
        for a, b in zip(route, route[1:]):
            if all(end != b for _, end in self.out.get(a, ())):
                return a, b
        return None

    def closest_heading(self, pano: str, heading: int) -> int:
        """Out-edge heading of `pano` closest to `heading` (`heading` itself if it has none)."""
        best = (None, heading)
        for h, _ in self.out[pano]:
            diff = 180 - abs(abs(h - heading) - 180)
            if best[0] is None or diff < best[0]:   # strict: the first edge wins ties
                best = (diff, h)
        return best[1]

    def step(self, pano: str, heading: int, action: int) -> tuple[str, int]:
        """The next (pano, heading); STOP returns the state unchanged."""
        if action == STOP:
            return pano, heading
        if action == FORWARD:
            new_pano = pano
            for h, end in self.out[pano]:
                if h == heading:
                    new_pano = end
                    break
            new_heading = self.closest_heading(new_pano, heading)
        else:
            best = None
            for h, _ in self.out[pano]:
                if h == heading:
                    continue
                d = (heading - h) % 360 if action == LEFT else (h - heading) % 360
                if best is None or d < best[0]:
                    best = (d, h)
            new_pano, new_heading = pano, (heading if best is None else best[1])
        if len(self.out[new_pano]) < 2:
            return pano, heading
        return new_pano, new_heading

    def run(self, pano: str, heading: int, actions: Sequence[int]) -> list[tuple[str, int]]:
        """States before each action and after the last: len(actions) + 1 entries; STOP freezes."""
        states = [(pano, heading)]
        stopped = False
        for a in actions:
            if not stopped:
                pano, heading = self.step(pano, heading, a)
                stopped = a == STOP
            states.append((pano, heading))
        return states

    def gold_actions(self, route: Sequence[str], start_heading: int) -> list[int]:
        """Actions that follow `route` from `start_heading`, ending with STOP.

        At each panorama: turn (the direction needing fewer turns; LEFT on ties) until facing the
        link to the next panorama, then FORWARD. A route step without a link, or one the rules
        refuse, is skipped.
        """
        pano, heading, actions = route[0], start_heading % 360, []
        for nxt in route[1:]:
            target = next((h for h, end in self.out[pano] if end == nxt), None)
            if target is None:
                continue
            turns = []
            for action in (LEFT, RIGHT):
                h, seq = heading, []
                while h != target and len(seq) <= len(self.out[pano]):
                    _, h = self.step(pano, h, action)
                    seq.append(action)
                turns.append(seq if h == target else None)
            options = [t for t in turns if t is not None]
            if heading != target and not options:
                continue
            seq = [] if heading == target else min(options, key=len)
            for a in seq + [FORWARD]:
                actions.append(a)
                pano, heading = self.step(pano, heading, a)
        return actions + [STOP]
