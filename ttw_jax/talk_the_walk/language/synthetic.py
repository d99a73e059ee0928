"""Synthetic Talk The Walk dialogues in the official schema, grounded in a neighbourhood map.

Each dialogue takes a random 4x4 window of a neighbourhood (one of `split`'s windows by the
official rule when `split` is given), a random start and target corner and orientation. An oracle
guide steers the tourist toward the target ("turn left", "go forward twice", "head north", "which
landmarks do you see?"); the tourist mostly follows (ACTION acts), sometimes wanders, and describes
its corner after some moves. Descriptions are grounded but noisy: they name the landmark types of
the current corner (synonyms such as "cafe" / "coffee shop"; an empty corner gives "there is
nothing here"), sometimes also the previous corner and the absolute direction just walked ("i
walked north from the bank, now i see a shop"); a landmark is now and then replaced by a wrong
type or left out, and fillers and short replies ("ok", "yes") are mixed in. The guide ends with
EVALUATE_LOCATION (episode_done) once the tourist stands on the target; a few dialogues have a
failed evaluation earlier. Episodes also carry optional keys (version, total_time, worker ids,
status) that readers ignore. Everything is a deterministic function of the seed.
"""
from __future__ import annotations

import random
from typing import Sequence

from ttw_jax.core.vocab import tokenize
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.language import dialogues as td

DIRECTIONS = ("north", "east", "south", "west")  # orientation / agnostic move order
# Landmark type id -> the phrases tourists use for it (the first is the plain name).
LANDMARK_PHRASES = {
    maps.LANDMARK_TYPES.index("Coffee Shop"): ("coffee shop", "cafe", "coffee place"),
    maps.LANDMARK_TYPES.index("Shop"): ("shop", "store", "clothing store"),
    maps.LANDMARK_TYPES.index("Restaurant"): ("restaurant", "place to eat", "diner"),
    maps.LANDMARK_TYPES.index("Bank"): ("bank", "bank branch"),
    maps.LANDMARK_TYPES.index("Subway"): ("subway", "subway station", "metro entrance"),
    maps.LANDMARK_TYPES.index("Playfield"): ("playground", "park"),
    maps.LANDMARK_TYPES.index("Theater"): ("theater", "theatre", "movie theater"),
    maps.LANDMARK_TYPES.index("Bar"): ("bar", "pub"),
    maps.LANDMARK_TYPES.index("Hotel"): ("hotel", "hotel entrance"),
}
EMPTY_PHRASES = ("there is nothing here", "i don't see any landmarks",
                 "no landmarks on this corner", "nothing on this corner",
                 "just some buildings here", "i see nothing special here")
SHORT_REPLIES = ("ok", "Ok", "okay", "yes", "sure", "got it", "done", "ok!", "Yes.", "alright")
_CURRENT = ("i see {l}", "there is {l} here", "i'm at a corner with {l}", "i am next to {l}",
            "{l} on my corner", "right now i see {l}", "there's {l} in front of me",
            "i can see {l}")
_WALKED = ("i walked {d} from {p}, now i see {l}", "i came {d} from {p}. now there is {l}",
           "i went {d} past {p} and now i see {l}")
_WALKED_FROM_EMPTY = ("i walked {d}, now i see {l}", "i went {d} and i see {l}")
_WALKED_TO_EMPTY = ("i walked {d} from {p}, now there is nothing here",
                    "i came {d} from {p}. nothing on this corner")
_PREFIXES = ("ok", "ok,", "hmm", "well", "so", "alright,")
_SUFFIXES = ("right now", "i think", "too")
_TOURIST_QUESTIONS = ("which way should i go?", "where do i go now?", "am i close?",
                      "should i keep going?")
_GREETINGS = ("hi, where are you?", "hello! what do you see around you?", "hi there",
              "hey, tell me what you see")
_ASK = ("which landmarks do you see?", "what is around you?", "what do you see now?",
        "tell me what is on your corner", "what's near you?")
_FORWARD = ("go forward", "walk straight", "go straight ahead", "keep going straight")
_FORWARD_TWICE = ("go forward twice", "walk straight two times", "keep going straight twice")
_TURN = {1: ("turn right", "make a right"), 3: ("turn left", "make a left"),
         2: ("turn around", "turn around and go back")}
_THEN_FORWARD = (" and go forward", " then walk straight", "")
_HEAD = ("head {d}", "go {d}", "walk {d}")
_ARRIVED = ("great, stop there", "stop, i think you are there", "perfect, you are at the spot",
            "ok stop here")
_FAILED = ("hmm, that was not it. keep going", "not there yet, sorry", "ok that was wrong")
_PRAISE = ("good", "great", "ok", "nice")

# probabilities of the generator
P_GREET, P_OK, P_DESCRIBE, P_ASK, P_QUESTION = 0.6, 0.3, 0.6, 0.12, 0.05
P_WANDER, P_LOOK_AROUND, P_FAIL_EVAL, P_HEAD = 0.15, 0.1, 0.1, 0.25
P_WALKED, P_WRONG, P_OMIT, P_HALLUCINATE = 0.35, 0.1, 0.1, 0.05
P_PREFIX, P_SUFFIX, P_CAPITAL, P_CAPITAL_I, P_PUNCT = 0.3, 0.15, 0.5, 0.3, 0.4
MAX_ROUNDS = 25


def _window_choices(nmaps: Sequence[maps.NeighborhoodMap], split: str | None):
    out = []
    for m in nmaps:
        bx, by = m.boundary
        for mx in range(bx + 1):
            for my in range(by + 1):
                if split is None or maps.window_split(mx, my, m.boundary) == split:
                    out.append((m, mx, my))
    if not out:
        raise ValueError(f"no window of {[m.name for m in nmaps]} in split {split!r}")
    return out


def corner_types(nmap: maps.NeighborhoodMap, x: int, y: int) -> list[int]:
    """The landmark type ids at corner (x, y) of `nmap` (`[EMPTY_ID]` for an empty corner)."""
    return [int(i) for i in nmap.corners[x, y] if i != maps.PAD_ID]


def mentioned_types(text: str) -> set[int]:
    """Landmark type ids whose phrases occur in `text` (longest phrases first, so "coffee shop"
    is not also a shop), plus EMPTY_ID when an empty-corner phrase occurs."""
    toks = tokenize(text)
    found, used = set(), [False] * len(toks)
    phrases = sorted(((tuple(tokenize(p)), t) for t, ps in LANDMARK_PHRASES.items() for p in ps),
                     key=lambda pt: -len(pt[0]))
    phrases += [(tuple(tokenize(p)), maps.EMPTY_ID) for p in EMPTY_PHRASES]
    for words, t in phrases:
        n = len(words)
        for i in range(len(toks) - n + 1):
            if tuple(toks[i:i + n]) == words and not any(used[i:i + n]):
                found.add(t)
                used[i:i + n] = [True] * n
    return found


def _listing(rng: random.Random, types: Sequence[int]) -> str:
    names = [("the " if rng.random() < 0.2 else "a ") + rng.choice(LANDMARK_PHRASES[t])
             for t in types]
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " and " + names[-1]


def _noisy(rng: random.Random, types: Sequence[int]) -> list[int]:
    """What the tourist reports of a corner's types: sometimes a wrong type or one left out;
    [] for an empty corner (rarely a made-up landmark)."""
    real = [t for t in types if t != maps.EMPTY_ID]
    if not real:
        return [rng.choice(list(LANDMARK_PHRASES))] if rng.random() < P_HALLUCINATE else []
    out = []
    for t in real:
        if rng.random() < P_WRONG:
            t = rng.choice([u for u in LANDMARK_PHRASES if u != t])
        out.append(t)
    if len(out) > 1 and rng.random() < P_OMIT:
        out.pop(rng.randrange(len(out)))
    return out


def _humanize(rng: random.Random, text: str) -> str:
    if rng.random() < P_PREFIX:
        text = rng.choice(_PREFIXES) + " " + text
    if rng.random() < P_SUFFIX:
        text = text + " " + rng.choice(_SUFFIXES)
    if rng.random() < P_CAPITAL_I:
        text = " ".join("I" if w == "i" else ("I'm" if w == "i'm" else w) for w in text.split(" "))
    if rng.random() < P_CAPITAL:
        text = text[0].upper() + text[1:]
    if rng.random() < P_PUNCT:
        text += rng.choice(".!.")
    return text


def describe(rng: random.Random, types: Sequence[int], previous: Sequence[int] | None = None,
             walked: int | None = None) -> str:
    """A tourist description of a corner with landmark `types`; with `previous` (the types of
    the corner left by the last move) and `walked` (its absolute direction 0..3), sometimes
    "i walked <dir> from <previous>, now ...". Always at least 3 tokens."""
    now = _noisy(rng, types)
    if previous is not None and walked is not None and rng.random() < P_WALKED:
        before = _noisy(rng, previous)
        d = DIRECTIONS[walked]
        if not now:
            text = (rng.choice(_WALKED_TO_EMPTY).format(d=d, p=_listing(rng, before)) if before
                    else f"i walked {d}, " + rng.choice(EMPTY_PHRASES))
        elif before:
            text = rng.choice(_WALKED).format(d=d, p=_listing(rng, before), l=_listing(rng, now))
        else:
            text = rng.choice(_WALKED_FROM_EMPTY).format(d=d, l=_listing(rng, now))
    elif now:
        text = rng.choice(_CURRENT).format(l=_listing(rng, now))
    else:
        text = rng.choice(EMPTY_PHRASES)
    return _humanize(rng, text)


class _Episode:
    """Mutable state of one generated dialogue."""

    def __init__(self, rng: random.Random, nmap: maps.NeighborhoodMap, bounds: list[int],
                 start: list[int]):
        self.rng, self.nmap, self.bounds = rng, nmap, bounds
        self.loc = list(start)
        self.acts: list[dict] = []
        self.time = round(1.52e9 + rng.random() * 1e7, 3)
        self.last_described = list(start)
        self.prev_corner: list[int] | None = None   # corner left by the last position change
        self.walked: int | None = None

    def say(self, who: str, text: str) -> None:
        self.time = round(self.time + self.rng.uniform(1.0, 12.0), 3)
        self.acts.append({"id": who, "text": text, "episode_done": False, "time": self.time})

    def act(self, action: str) -> None:
        before = self.loc
        self.loc = td.step(self.loc, action, self.bounds)
        if self.loc[:2] != before[:2]:
            self.prev_corner, self.walked = before[:2], self.loc[2]
        self.say("Tourist", action)

    def face(self, d: int) -> None:
        rel = (d - self.loc[2]) % 4
        turns = {0: [], 1: [td.TURNRIGHT], 3: [td.TURNLEFT]}.get(
            rel, [self.rng.choice([td.TURNLEFT, td.TURNRIGHT])] * 2)
        for a in turns:
            self.act(a)

    def describe(self) -> None:
        x, y = self.loc[:2]
        moved = self.prev_corner is not None and self.loc[:2] != self.last_described[:2]
        previous = corner_types(self.nmap, *self.prev_corner) if moved else None
        self.say("Tourist", describe(self.rng, corner_types(self.nmap, x, y), previous,
                                     self.walked if moved else None))
        self.last_described = list(self.loc)


def _toward(rng: random.Random, loc: Sequence[int], target: Sequence[int]) -> tuple[int, int]:
    """(absolute direction, corners to go along it) of a step toward `target`; the facing
    direction is preferred when it helps."""
    dx, dy = target[0] - loc[0], target[1] - loc[1]
    options = []
    if dy:
        options.append((0 if dy > 0 else 2, abs(dy)))
    if dx:
        options.append((1 if dx > 0 else 3, abs(dx)))
    ahead = [o for o in options if o[0] == loc[2]]
    d, dist = ahead[0] if ahead and rng.random() < 0.7 else rng.choice(options)
    return d, min(dist, rng.choice((1, 1, 2)))


def _instruction(rng: random.Random, orientation: int, d: int, n: int) -> str:
    rel = (d - orientation) % 4
    if rng.random() < P_HEAD:
        text = rng.choice(_HEAD).format(d=DIRECTIONS[d]) + (" twice" if n == 2 else "")
        return text + (" please" if rng.random() < 0.3 else "")
    if rel == 0:
        return rng.choice(_FORWARD_TWICE if n == 2 else _FORWARD)
    text = rng.choice(_TURN[rel])
    if n == 2:
        return text + rng.choice((" and go forward twice", " then walk straight two times"))
    return text + rng.choice(_THEN_FORWARD)


def _one_dialogue(rng: random.Random, nmap: maps.NeighborhoodMap, mx: int, my: int) -> dict:
    bounds = [2 * mx, 2 * my, 2 * mx + maps.WINDOW - 1, 2 * my + maps.WINDOW - 1]

    def corner():
        return [bounds[0] + rng.randrange(maps.WINDOW), bounds[1] + rng.randrange(maps.WINDOW),
                rng.randrange(4)]

    start, target = corner(), corner()
    while target[:2] == start[:2] and rng.random() < 0.9:
        target = corner()
    ep = _Episode(rng, nmap, bounds, start)
    if rng.random() < P_GREET:
        ep.say("Guide", rng.choice(_GREETINGS))
    ep.describe()
    failed = False
    for round_ in range(MAX_ROUNDS):
        if ep.loc[:2] == target[:2]:
            break
        if rng.random() < P_ASK:
            ep.say("Guide", rng.choice(_ASK))
            if rng.random() < P_QUESTION:
                ep.say("Tourist", _humanize(rng, rng.choice(_TOURIST_QUESTIONS)))
            ep.describe()
            continue
        if not failed and round_ >= 1 and rng.random() < P_FAIL_EVAL:
            failed = True
            ep.say("Guide", td.EVALUATE)
            ep.say("Guide", rng.choice(_FAILED))
        d, n = _toward(rng, ep.loc, target)
        ep.say("Guide", _humanize(rng, _instruction(rng, ep.loc[2], d, n)) if rng.random() < 0.3
               else _instruction(rng, ep.loc[2], d, n))
        if rng.random() < P_OK:
            ep.say("Tourist", rng.choice(SHORT_REPLIES))
        if rng.random() < P_WANDER and round_ < MAX_ROUNDS - 5:
            for _ in range(rng.randint(1, 3)):
                ep.act(rng.choice(td.ACTIONS))
        else:
            if rng.random() < P_LOOK_AROUND:
                ep.act(td.TURNLEFT)
                ep.act(td.TURNRIGHT)
            ep.face(d)
            for _ in range(n):
                ep.act(td.FORWARD)
        if rng.random() < P_DESCRIBE:
            ep.describe()
        elif rng.random() < P_QUESTION:
            ep.say("Tourist", _humanize(rng, rng.choice(_TOURIST_QUESTIONS)))
    while ep.loc[:2] != target[:2]:   # rare: a long wander; walk straight to the target
        d, _ = _toward(rng, ep.loc, target)
        ep.face(d)
        ep.act(td.FORWARD)
    if rng.random() < 0.5:
        ep.say("Guide", rng.choice(_ARRIVED))
        if rng.random() < 0.5:
            ep.say("Tourist", rng.choice(SHORT_REPLIES))
    elif rng.random() < 0.3:
        ep.say("Guide", rng.choice(_PRAISE))
    ep.say("Guide", td.EVALUATE)
    ep.acts[-1]["episode_done"] = True
    return {
        "neighborhood": nmap.name, "boundaries": bounds, "start_location": start,
        "target_location": target, "dialog": ep.acts,
        # optional keys of the release, ignored by readers
        "version": 1, "status": "success",
        "total_time": round(ep.acts[-1]["time"] - ep.acts[0]["time"], 3),
        "tourist_worker_id": "W%08X" % rng.getrandbits(32),
        "guide_worker_id": "W%08X" % rng.getrandbits(32),
    }


def synthetic_dialogues(nmaps: Sequence[maps.NeighborhoodMap], num: int, seed: int,
                        split: str | None = None) -> list[dict]:
    """`num` dialogues (official schema, see the module docstring) on uniformly drawn windows of
    `nmaps` (only windows of `split` by the official rule when given); deterministic in `seed`."""
    if split is not None and split not in maps.SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {maps.SPLITS}")
    rng = random.Random(seed)
    choices = _window_choices(nmaps, split)
    return [_one_dialogue(rng, *rng.choice(choices)) for _ in range(num)]
