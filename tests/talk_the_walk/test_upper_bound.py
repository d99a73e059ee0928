import collections
import itertools

import numpy as np
import pytest

from tests.talk_the_walk.test_env import reference_step
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.upper_bound import bayes_rate


def reference_bayes_rate(table, T, condition_on_actions):
    """Dictionary counting over every (window, start, action sequence)."""
    classes = collections.defaultdict(collections.Counter)
    total = 0
    for w in range(table.shape[0]):
        for sx, sy in itertools.product(range(4), range(4)):
            for seq in itertools.product(range(4), repeat=T):
                x, y, o = sx, sy, 0
                obs = [tuple(sorted(table[w, x, y]))]
                for a in seq:
                    x, y, o = reference_step(x, y, o, a, 4, 4)
                    obs.append(tuple(sorted(table[w, x, y])))
                key = (w, tuple(obs), seq if condition_on_actions else None)
                classes[key][(x, y)] += 1
                total += 1
    return sum(max(c.values()) for c in classes.values()), total


def test_hand_computed_example():
    # One window: corner (0, 0) shows a Bank (B), every other corner is Empty (E).
    table = np.full((1, 4, 4, 1), maps.EMPTY_ID, np.int32)
    table[0, 0, 0, 0] = maps.LANDMARK_TYPES.index("Bank")
    # T=0: two distinct observations, so 2 of the 16 examples can be localised.
    assert bayes_rate(table, 0) == (2, 16)
    # T=1 with actions (64 examples). UP: (B,E) pins (0,1); the 15 (E,E) walks end on 13 corners,
    # the top row twice each -> 1 + 2. RIGHT likewise 3. DOWN: (B,B) and (E,B) each pin (0,0), the 14
    # (E,E) walks end at (x,0) twice for x>0 -> 1 + 1 + 2 = 4. LEFT likewise 4. Total 14.
    assert bayes_rate(table, 1, condition_on_actions=True) == (14, 64)
    # T=1 without actions: (B,E) has 2 walks ending apart -> 1; (B,B) and (E,B) -> 2 each; every corner
    # is the end of exactly 4 walks, so the 58 (E,E) walks still have a corner ending 4 -> 9 in all.
    assert bayes_rate(table, 1, condition_on_actions=False) == (9, 64)


@pytest.mark.parametrize("T", [1, 2])
@pytest.mark.parametrize("condition", [True, False])
def test_matches_dictionary_reference(T, condition):
    table = maps.windows(maps.synthetic_maps(seed=5, names=["fidi"]), "train").landmarks
    assert bayes_rate(table, T, condition) == reference_bayes_rate(table, T, condition)


@pytest.mark.slow
def test_real_maps_T0_bags_of_landmarks(real_maps_dir):
    loaded = maps.load_maps(real_maps_dir)
    got = {s: bayes_rate(maps.windows(loaded, s).landmarks, 0) for s in maps.SPLITS}
    assert got == {"train": (250, 816), "valid": (85, 256), "test": (47, 128)}
    # Comparing landmark lists in file order treats two bags as different and overstates the bound.
    assert bayes_rate(maps.windows(loaded, "valid").landmarks, 0, order_sensitive=True) == (86, 256)
