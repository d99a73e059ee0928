"""Synthetic Touchdown SDR scenes (`ttw_jax.touchdown.sdr.synthetic`)."""
import collections
import re

import numpy as np
import pytest

from ttw_jax.touchdown.sdr import synthetic as sdr

H, W, C = 25, 116, 12
KEYS = {"route_id", "which", "panoid", "heading", "center_x", "center_y", "td_location_text",
        "features", "_debug"}
# The relation phrases a description may use, read back independently of the generator.
RELATION_OF = {"on the left of": "left", "to the left of": "left", "just left of": "left",
               "on the right of": "right", "to the right of": "right",
               "just right of": "right", "on top of": "above", "right above": "above",
               "above": "above", "just below": "below", "below": "below", "under": "below",
               "resting on": "on", "perched on": "on", "placed on": "on"}
ORDINAL_OF = {w: i + 1 for i, w in enumerate(
    ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth"))}
TYPES = ("door", "window", "car", "bench", "hydrant", "sign", "tree", "mailbox")
COLOURS = ("red", "blue", "green", "yellow", "white", "black")
CLAUSE = re.compile(
    r"Touchdown,?(?: is)?(?: sitting| hiding)? (?P<rel>{rel}) the (?:(?P<ord>{ord}) )?"
    r"(?:(?P<col>{col}) )?(?P<type>{typ})\b".format(
        rel="|".join(sorted(RELATION_OF, key=len, reverse=True)), ord="|".join(ORDINAL_OF),
        col="|".join(COLOURS), typ="|".join(TYPES)))


@pytest.fixture(scope="module")
def examples():
    return sdr.synthetic_sdr_examples(120, seed=5, first_route_id=300)


def by_route(examples):
    out = collections.defaultdict(list)
    for e in examples:
        out[e["route_id"]].append(e)
    return out


def target_pixel(e, height=H, width=W):
    col, row = e["center_x"] * width - 0.5, e["center_y"] * height - 0.5
    assert col == pytest.approx(round(col)) and row == pytest.approx(round(row))
    return int(round(row)), int(round(col))


def test_deterministic_in_seed_and_prefix_stable():
    a = sdr.synthetic_sdr_examples(6, seed=3)
    b = sdr.synthetic_sdr_examples(6, seed=3)
    c = sdr.synthetic_sdr_examples(6, seed=4)
    strip = lambda ex: [(e["route_id"], e["which"], e["panoid"], e["heading"], e["center_x"],
                         e["center_y"], e["td_location_text"], e["features"].tobytes())
                        for e in ex]
    assert strip(a) == strip(b)
    assert strip(a) != strip(c)
    assert strip(sdr.synthetic_sdr_examples(3, seed=3)) == [
        t for t in strip(a) if t[0] < 3]
    assert strip(list(sdr.iter_synthetic_sdr_examples(6, seed=3))) == strip(a)


def test_shapes_ids_and_ranges(examples):
    routes = by_route(examples)
    assert sorted(routes) == list(range(300, 420))
    for rid, views in routes.items():
        assert [v["which"] for v in views] == [
            w for w in ("main", "pre", "post") if w in {v["which"] for v in views}]
        assert views[0]["which"] == "main"
        assert len({v["panoid"] for v in views}) == len(views)
        assert len({v["td_location_text"] for v in views}) == 1
    for e in examples:
        assert set(e) == KEYS
        assert e["features"].shape == (H, W, C) and e["features"].dtype == np.float16
        assert np.isfinite(e["features"]).all()
        assert 0 <= e["center_x"] <= 1 and 0 <= e["center_y"] <= 1
        assert 0 <= e["heading"] < 360
        assert isinstance(e["panoid"], str) and e["panoid"]
        assert target_pixel(e) == e["_debug"]["target"]
    counts = collections.Counter(e["which"] for e in examples)
    assert counts["main"] == 120 and 0.4 * 120 < counts["pre"] < 0.8 * 120
    assert 0.4 * 120 < counts["post"] < 0.8 * 120
    # other sizes
    small = sdr.synthetic_sdr_examples(4, seed=0, height=12, width=60, channels=3)
    assert all(e["features"].shape == (12, 60, 3) for e in small)
    assert all(0 <= e["center_x"] <= 1 and 0 <= e["center_y"] <= 1 for e in small)
    with pytest.raises(ValueError, match="width >= "):
        sdr.synthetic_sdr_examples(1, seed=0, width=30)


def test_views_are_circular_shifts_with_shifted_targets(examples):
    for views in by_route(examples).values():
        main = views[0]
        row0, col0 = target_pixel(main)
        for v in views[1:]:
            # find the shift from the features alone
            shifts = [d for d in range(W)
                      if np.array_equal(np.roll(main["features"], d, axis=1), v["features"])]
            assert len(shifts) == 1
            d = shifts[0]
            assert target_pixel(v) == (row0, (col0 + d) % W)
            # turning the camera left by d columns moves the scene d columns right
            gap = (main["heading"] - v["heading"] - d * 360 / W) % 360
            assert min(gap, 360 - gap) < 1e-6


def box_mean(e, obj):
    rows = np.arange(obj["row"], obj["row"] + obj["height"])
    cols = np.arange(obj["col"], obj["col"] + obj["width"]) % W
    return e["features"].astype(np.float32)[rows][:, cols].reshape(-1, C).mean(0)


def test_the_text_resolves_to_the_target(examples):
    types, colours = sdr.sdr_palette(C)
    combos = {(t, c): types[i] + colours[j]
              for i, t in enumerate(TYPES) for j, c in enumerate(COLOURS)}
    kinds = collections.Counter()
    checked = 0
    for e in examples[:150]:   # ~70 scenes, every view
        m = CLAUSE.search(e["td_location_text"])
        assert m, e["td_location_text"]
        objects = e["_debug"]["objects"]
        # every box shows its type + colour: the nearest palette combination is the right one
        for o in objects:
            mean = box_mean(e, o)
            nearest = min(combos, key=lambda k: np.linalg.norm(combos[k] - mean))
            assert nearest == (o["type"], o["colour"])
        # resolve the description in this view: candidates left to right
        cands = sorted((o for o in objects if o["type"] == m["type"]
                        and (m["col"] is None or o["colour"] == m["col"])),
                       key=lambda o: o["col"])
        if m["ord"]:
            assert m["col"] is not None
            k = ORDINAL_OF[m["ord"]]
            assert len(cands) >= max(2, k)   # the ordinal is needed, and it exists
            # the group keeps its order in this view: no member is cut by the seam
            assert all(o["col"] + o["width"] <= W for o in cands)
            obj = cands[k - 1]
            kinds["ordinal"] += 1
        else:
            assert len(cands) == 1, e["td_location_text"]
            obj = cands[0]
            kinds["colour" if m["col"] else "type"] += 1
        assert obj is objects[e["_debug"]["ref"]]
        row, col = target_pixel(e)
        rel = RELATION_OF[m["rel"]]
        assert rel == e["_debug"]["relation"]
        rows = range(obj["row"], obj["row"] + obj["height"])
        box_cols = {(obj["col"] + i) % W for i in range(obj["width"])}
        if rel == "on":
            assert row == obj["row"] + (obj["height"] - 1) // 2
            assert col == (obj["col"] + (obj["width"] - 1) // 2) % W
            checked += 1
            continue
        if rel in ("left", "right"):
            assert row in rows
            edge = obj["col"] - 3 if rel == "left" else obj["col"] + obj["width"] - 1 + 3
            assert col == edge % W
        else:
            assert col in box_cols
            edge = obj["row"] - 3 if rel == "above" else obj["row"] + obj["height"] - 1 + 3
            assert row == edge
        # Touchdown is not drawn: its pixel is background (in no box) and looks like noise
        for o in objects:
            assert not (o["row"] <= row < o["row"] + o["height"]
                        and (col - o["col"]) % W < o["width"])
        assert np.linalg.norm(e["features"][row, col].astype(np.float32)) < 3.5
        checked += 1
    assert checked == 150
    assert kinds["ordinal"] >= 20 and kinds["colour"] >= 10 and kinds["type"] >= 5, kinds


def test_texts_are_varied(examples):
    mains = [e for e in examples if e["which"] == "main"]
    texts = [e["td_location_text"] for e in mains]
    assert len(set(texts)) >= 0.95 * len(texts)
    rels = collections.Counter(RELATION_OF[CLAUSE.search(t)["rel"]] for t in texts)
    assert set(rels) == {"left", "right", "above", "below", "on"}
    assert rels["on"] > rels["left"] and rels["above"] > rels["right"]
    assert len({CLAUSE.search(t)["rel"] for t in texts}) >= 9   # the phrasings vary too
    assert sum(not t.startswith(("Touchdown", "You", "Look", "The bear")) for t in texts) >= 10
    assert len({CLAUSE.search(t)["type"] for t in texts}) == len(TYPES)
    assert len({CLAUSE.search(t)["col"] for t in texts} - {None}) == len(COLOURS)
    # scenes repeat types and colours, so that references need them
    repeats = [len(e["_debug"]["objects"]) - len({(o["type"], o["colour"])
                                                  for o in e["_debug"]["objects"]})
               for e in mains]
    assert np.mean([r > 0 for r in repeats]) > 0.5
    assert all(5 <= len(e["_debug"]["objects"]) <= 8 for e in mains)
