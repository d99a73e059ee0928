"""Synthetic Touchdown SDR (spatial description resolution) scenes in feature space.

Each description is a panorama feature map [H, W, C] holding 5-8 small boxes ("objects") on a
noisy background, and a sentence that places Touchdown relative to one of them, e.g. "Touchdown is
on the left of the second red door." Touchdown itself is not in the features: only the text says
which object is meant and on which side, so a model has to read it.

- An object has a type (door, window, ...) and a colour (red, blue, ...); its pixels are
  `type_vec + colour_vec` plus the background noise. The vectors come from a fixed seed
  (`sdr_palette`), independent of the examples' seed.
- Objects sit on distinct columns (at least `MIN_GAP` pixels apart) with their tops in a band of
  rows around the middle. Each scene draws its objects from a few types and colours, so types and
  colours repeat and the text needs colours and ordinals ("the second red door", counted from the
  left among the objects of that type and colour) to single one out.
- Touchdown is `OFFSET` pixels to the left / right of the referenced box (at its middle row),
  above / below it (at its middle column), or on it (its middle pixel), with the frequencies
  `RELATION_PROBS`. Mailboxes, hydrants and benches are referenced more often than other types
  (`REF_TYPE_WEIGHTS`), as Touchdown favours some objects in the real data.
- A description has 1-3 views: `main` always, `pre` and `post` each with probability 0.6. A view is
  the scene circularly shifted to the right by a random number of columns (the panorama seen from
  another heading), the target shifted with it. Shifts never cut the referenced object, its
  same-type-and-colour group or the target apart at the seam, so the ordinal and the relation
  hold in every view.
"""
from __future__ import annotations

import functools
from typing import Iterator

import numpy as np

TYPES = ("door", "window", "car", "bench", "hydrant", "sign", "tree", "mailbox")
COLOURS = ("red", "blue", "green", "yellow", "white", "black")
RELATIONS = ("left", "right", "above", "below", "on")
# How often each relation is used: being on top of or right on things is the commonest, as in
# the real descriptions ("on top of the mailbox").
RELATION_PROBS = (0.15, 0.15, 0.25, 0.15, 0.30)
# Touchdown favours some objects (weights of a type being the referenced one), a prior that a
# model without language can learn from the image alone.
REF_TYPE_WEIGHTS = {"mailbox": 4.0, "hydrant": 4.0, "bench": 2.0}
VIEWS = ("main", "pre", "post")
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")

PALETTE_SEED = 20190617   # the palette does not depend on the examples' seed
OFFSET = 3                # pixels between a box's edge and Touchdown
MIN_GAP = 2 * OFFSET + 1  # free columns between neighbouring boxes
MARGIN = OFFSET + 1       # free columns at both ends of the unshifted scene
BOX_SIZES = (3, 4)        # box heights and widths, in pixels
NUM_OBJECTS = (5, 8)      # inclusive range of objects per scene
NOISE_STD = 0.5
VIEW_PROB = 0.6           # probability of a pre (and, independently, a post) view

_REL_PHRASES = {
    "left": ("on the left of", "to the left of", "just left of"),
    "right": ("on the right of", "to the right of", "just right of"),
    "above": ("on top of", "above", "right above"),
    "below": ("below", "under", "just below"),
    "on": ("resting on", "perched on", "placed on"),
}
_MAIN = ("Touchdown is {rel} {ref}.", "You will find Touchdown {rel} {ref}.",
         "Look for Touchdown {rel} {ref}.", "Touchdown is sitting {rel} {ref}.",
         "The bear, Touchdown, is hiding {rel} {ref}.")
_BEFORE = ("Turn to face the street.", "Look around carefully.",
           "Scan the buildings in front of you.", "Check the sidewalk.")
_AFTER = ("It is hard to miss.", "You should see it easily.", "Click on that spot.",
          "There is also a {colour} {type} in view.", "A {colour} {type} is nearby as well.")


@functools.lru_cache(maxsize=None)
def sdr_palette(channels: int) -> tuple[np.ndarray, np.ndarray]:
    """(type vectors [len(TYPES), channels], colour vectors [len(COLOURS), channels]), float32,
    standard normal entries from the fixed `PALETTE_SEED` (read-only arrays)."""
    rng = np.random.default_rng([PALETTE_SEED, channels])
    types = rng.standard_normal((len(TYPES), channels)).astype(np.float32)
    colours = rng.standard_normal((len(COLOURS), channels)).astype(np.float32)
    types.flags.writeable = colours.flags.writeable = False
    return types, colours


def max_objects(width: int) -> int:
    """The most objects (of the widest box size) that fit in `width` columns."""
    return (width - 2 * MARGIN + MIN_GAP) // (max(BOX_SIZES) + MIN_GAP)


def _check_size(height: int, width: int, channels: int) -> None:
    min_height = 2 * OFFSET + max(BOX_SIZES)
    min_width = 2 * MARGIN + NUM_OBJECTS[0] * (max(BOX_SIZES) + MIN_GAP) - MIN_GAP
    if height < min_height or width < min_width or channels < 1:
        raise ValueError(f"synthetic SDR scenes need height >= {min_height}, width >= "
                         f"{min_width} and channels >= 1; got {(height, width, channels)}")


def _layout(rng: np.random.Generator, height: int, width: int) -> list[dict]:
    """Objects (left to right, unshifted scene): type/colour indices and box (row, col, h, w)."""
    n = int(rng.integers(NUM_OBJECTS[0], min(NUM_OBJECTS[1], max_objects(width)) + 1))
    widths = rng.choice(BOX_SIZES, size=n)
    heights = rng.choice(BOX_SIZES, size=n)
    slack = width - 2 * MARGIN - int(widths.sum()) - (n - 1) * MIN_GAP
    extra = rng.multinomial(slack, np.full(n + 1, 1.0 / (n + 1)))   # spread over n + 1 gaps
    # a band of rows around the middle, leaving OFFSET rows above and below every box
    band_lo = max(OFFSET, height // 4)
    band_hi = max(band_lo, min(height - max(BOX_SIZES) - OFFSET, height - height // 4 - 4))
    type_pool = rng.choice(len(TYPES), size=int(rng.integers(2, 5)), replace=False)
    colour_pool = rng.choice(len(COLOURS), size=int(rng.integers(2, 4)), replace=False)
    objects, col = [], MARGIN
    for i in range(n):
        col += int(extra[i])
        objects.append({"type": int(rng.choice(type_pool)), "colour": int(rng.choice(colour_pool)),
                        "row": int(rng.integers(band_lo, band_hi + 1)), "col": col,
                        "height": int(heights[i]), "width": int(widths[i])})
        col += int(widths[i]) + MIN_GAP
    return objects


def _target(obj: dict, relation: str) -> tuple[int, int]:
    """(row, col) of Touchdown at `relation` of `obj`'s box (unshifted scene)."""
    mid_row = obj["row"] + (obj["height"] - 1) // 2
    mid_col = obj["col"] + (obj["width"] - 1) // 2
    return {"left": (mid_row, obj["col"] - OFFSET),
            "right": (mid_row, obj["col"] + obj["width"] - 1 + OFFSET),
            "above": (obj["row"] - OFFSET, mid_col),
            "below": (obj["row"] + obj["height"] - 1 + OFFSET, mid_col),
            "on": (mid_row, mid_col)}[relation]


def _description(rng: np.random.Generator, objects: list[dict], ref: int, relation: str,
                 ordinal: int | None) -> str:
    obj = objects[ref]
    words = ["the"]
    if ordinal is not None:
        words.append(ORDINALS[ordinal - 1])
    same_type = sum(o["type"] == obj["type"] for o in objects)
    if ordinal is not None or same_type > 1 or rng.random() < 0.5:
        words.append(COLOURS[obj["colour"]])
    words.append(TYPES[obj["type"]])
    if ordinal is not None and rng.random() < 0.4:
        words.append("from the left")
    rels = _REL_PHRASES[relation]
    main = _MAIN[rng.integers(len(_MAIN))].format(rel=rels[rng.integers(len(rels))],
                                                  ref=" ".join(words))
    parts = [main]
    if rng.random() < 0.4:
        parts.insert(0, _BEFORE[rng.integers(len(_BEFORE))])
    if rng.random() < 0.5:
        other = objects[rng.integers(len(objects))]
        parts.append(_AFTER[rng.integers(len(_AFTER))].format(
            colour=COLOURS[other["colour"]], type=TYPES[other["type"]]))
    return " ".join(parts)


def _scene(rng: np.random.Generator, height: int, width: int, channels: int):
    """(features [H, W, C] float32, objects, ref index, relation, ordinal or None, target
    (row, col), allowed shifts) of one unshifted scene."""
    objects = _layout(rng, height, width)
    weights = np.asarray([REF_TYPE_WEIGHTS.get(TYPES[o["type"]], 1.0) for o in objects])
    ref = int(rng.choice(len(objects), p=weights / weights.sum()))
    relation = RELATIONS[rng.choice(len(RELATIONS), p=RELATION_PROBS)]
    obj = objects[ref]
    group = [i for i, o in enumerate(objects)
             if (o["type"], o["colour"]) == (obj["type"], obj["colour"])]
    ordinal = group.index(ref) + 1 if len(group) > 1 else None
    target = _target(obj, relation)
    kept = group if ordinal is not None else [ref]   # must not be cut apart by the seam
    lo = min([objects[i]["col"] for i in kept] + [target[1]])
    hi = max([objects[i]["col"] + objects[i]["width"] - 1 for i in kept] + [target[1]])
    # shift s moves column c to (c + s) % width; [lo, hi] stays in one piece iff
    # s <= width - 1 - hi or s >= width - lo
    shifts = np.concatenate([np.arange(0, width - hi), np.arange(width - lo, width)])
    types, colours = sdr_palette(channels)
    features = rng.normal(0.0, NOISE_STD, (height, width, channels)).astype(np.float32)
    for o in objects:
        features[o["row"]:o["row"] + o["height"], o["col"]:o["col"] + o["width"]] += (
            types[o["type"]] + colours[o["colour"]])
    return features, objects, ref, relation, ordinal, target, shifts


def iter_synthetic_sdr_examples(num_descriptions: int, seed: int, height: int = 25,
                                width: int = 116, channels: int = 12,
                                first_route_id: int = 0) -> Iterator[dict]:
    """The examples of `synthetic_sdr_examples`, one at a time (same order and values)."""
    _check_size(height, width, channels)
    for i in range(num_descriptions):
        rng = np.random.default_rng([seed, i])
        route_id = first_route_id + i
        features, objects, ref, relation, ordinal, target, shifts = _scene(
            rng, height, width, channels)
        text = _description(rng, objects, ref, relation, ordinal)
        views = ["main"] + [v for v in VIEWS[1:] if rng.random() < VIEW_PROB]
        view_shifts = rng.choice(shifts, size=len(views), replace=len(shifts) < len(views))
        base_heading = float(rng.uniform(0.0, 360.0))
        for which, shift in zip(views, view_shifts):
            shift = int(shift)
            row, col = target[0], (target[1] + shift) % width
            yield {
                "route_id": route_id, "which": which,
                "panoid": f"synthsdr{route_id:07d}{which}",
                "heading": (base_heading - shift * 360.0 / width) % 360.0,
                "center_x": (col + 0.5) / width, "center_y": (row + 0.5) / height,
                "td_location_text": text,
                "features": np.roll(features, shift, axis=1).astype(np.float16),
                "_debug": {
                    "shift": shift, "relation": relation, "ref": ref, "ordinal": ordinal,
                    "target": (row, col),
                    "objects": [{"type": TYPES[o["type"]], "colour": COLOURS[o["colour"]],
                                 "row": o["row"], "col": (o["col"] + shift) % width,
                                 "height": o["height"], "width": o["width"]}
                                for o in objects]},
            }


def synthetic_sdr_examples(num_descriptions: int, seed: int, height: int = 25, width: int = 116,
                           channels: int = 12, first_route_id: int = 0) -> list[dict]:
    """SDR examples of `num_descriptions` synthetic scenes (route ids `first_route_id` + i), one per
    view, in (route_id, main/pre/post) order; deterministic in `seed`.

    Each example: {route_id: int, which: 'main'|'pre'|'post', panoid: str (made up), heading:
    float, center_x: float, center_y: float (Touchdown's pixel centre, (col + 0.5) / width and
    (row + 0.5) / height, in [0, 1]), td_location_text: str, features: [H, W, C] float16, and
    `_debug`}. `_debug` (not meant to be stored) holds the view's shift, the relation, the
    referenced object's index and ordinal (None if not needed), the target (row, col) and the
    objects {type, colour, row, col, height, width} in this view's coordinates, listed in the
    unshifted scene's left-to-right order (a box may wrap around the seam: col + width > W).
    """
    return list(iter_synthetic_sdr_examples(num_descriptions, seed, height, width, channels,
                                            first_route_id))
