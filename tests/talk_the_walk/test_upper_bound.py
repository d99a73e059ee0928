import collections
import itertools

import numpy as np
import pytest

from tests.talk_the_walk.test_env import reference_observe, reference_step
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.upper_bound import bayes_rate


def reference_bayes_rate(table, T, condition_on_actions, label="final", aware=False):
    """Dictionary counting over every (window, start, action sequence)."""
    classes = collections.defaultdict(collections.Counter)
    total = 0
    see = (lambda w, x, y, o: tuple(sorted(reference_observe(table[w, x, y], x, y, o)))) if aware \
        else (lambda w, x, y, o: tuple(sorted(table[w, x, y])))
    for w in range(table.shape[0]):
        for sx, sy, so in itertools.product(range(4), range(4), range(4) if aware else [0]):
            for seq in itertools.product((4, 5, 6) if aware else range(4), repeat=T):
                x, y, o = sx, sy, so
                obs = [see(w, x, y, o)]
                for a in seq:
                    x, y, o = reference_step(x, y, o, a, 4, 4)
                    obs.append(see(w, x, y, o))
                key = (w, tuple(obs), seq if condition_on_actions else None)
                classes[key][(x, y) if label == "final" else (sx, sy)] += 1
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


def test_hand_computed_example_start_label():
    # The same window, now predicting where the walk started.
    table = np.full((1, 4, 4, 1), maps.EMPTY_ID, np.int32)
    table[0, 0, 0, 0] = maps.LANDMARK_TYPES.index("Bank")
    # T=0 the start is the end: unchanged.
    assert bayes_rate(table, 0, label="start") == (2, 16)
    # T=1 with actions. UP: (B,E) pins start (0,0); the 15 (E,E) walks start on 15 different
    # corners -> 1 + 1. RIGHT likewise 2. DOWN: (B,B) pins (0,0), (E,B) pins (0,1), the 14 (E,E)
    # starts are distinct -> 3. LEFT: (B,B) (0,0), (E,B) (1,0), 14 distinct -> 3. Total 10 (the
    # final corner gave 14: clamped walks merge at the end, never at the start).
    assert bayes_rate(table, 1, condition_on_actions=True, label="start") == (10, 64)
    # T=1 without actions: (B,E) = (0,0) UP or RIGHT -> 2; (B,B) = (0,0) DOWN or LEFT -> 2;
    # (E,B) = (0,1) DOWN or (1,0) LEFT -> 1; (E,E): a start other than (0,0), (0,1), (1,0) has
    # all 4 moves in it -> 4. Total 9.
    assert bayes_rate(table, 1, condition_on_actions=False, label="start") == (9, 64)


def test_hand_computed_example_orientation_aware():
    # The Bank sits on a SW corner: only a tourist at (0,0) facing S or W sees it.
    table = np.full((1, 4, 4, 1), maps.EMPTY_ID, np.int32)
    table[0, 0, 0, 0] = maps.LANDMARK_TYPES.index("Bank")
    # T=0, 64 starts (16 corners x 4 orientations): 'Bank' pins (0,0) twice -> 2; 'Empty' holds
    # (0,0) twice (facing N, E) and every other corner 4 times -> 4. Total 6.
    for label in ("final", "start"):
        assert bayes_rate(table, 0, label=label, orientation_aware=True) == (6, 64)
    # T=1 with actions, 192 examples (64 starts x 3 actions). The turns stay put, so both labels
    # agree: TURNLEFT at (0,0) facing N / E / S / W sees (E,B) / (E,E) / (B,E) / (B,B); the three
    # with a Bank pin (0,0) -> 3; (E,E) holds (0,0) once and every other corner 4 times -> 4.
    # 7 for TURNLEFT, 7 for TURNRIGHT alike. FORWARD: at (0,0) facing S or W it is blocked and
    # sees (B,B) twice -> 2; arriving at (0,0) facing S from (0,1) or facing W from (1,0) gives
    # (E,B) twice, both ending at (0,0) -> 2 for "final", from two starts -> 1 for "start"; the
    # other 60 walks are (E,E), and every corner but (0,0) ends (starts) 4 of them -> 4.
    assert bayes_rate(table, 1, label="final", orientation_aware=True) == (7 + 7 + 8, 192)
    assert bayes_rate(table, 1, label="start", orientation_aware=True) == (7 + 7 + 7, 192)


@pytest.mark.parametrize("T", [1, 2])
@pytest.mark.parametrize("condition", [True, False])
@pytest.mark.parametrize("label", ["final", "start"])
def test_matches_dictionary_reference(T, condition, label):
    table = maps.windows(maps.synthetic_maps(seed=5, names=["fidi"]), "train").landmarks
    assert bayes_rate(table, T, condition, label=label) == \
        reference_bayes_rate(table, T, condition, label)


@pytest.mark.parametrize("T", [1, 2])
@pytest.mark.parametrize("condition", [True, False])
@pytest.mark.parametrize("label", ["final", "start"])
def test_orientation_aware_matches_dictionary_reference(T, condition, label):
    table = maps.windows(maps.synthetic_maps(seed=5, names=["fidi"]), "test").landmarks
    assert bayes_rate(table, T, condition, label=label, orientation_aware=True) == \
        reference_bayes_rate(table, T, condition, label, aware=True)


@pytest.mark.slow
def test_real_maps_T0_bags_of_landmarks(real_maps_dir):
    loaded = maps.load_maps(real_maps_dir)
    got = {s: bayes_rate(maps.windows(loaded, s).landmarks, 0) for s in maps.SPLITS}
    assert got == {"train": (250, 816), "valid": (85, 256), "test": (47, 128)}
    # Comparing landmark lists in file order treats two bags as different and overstates the bound.
    assert bayes_rate(maps.windows(loaded, "valid").landmarks, 0, order_sensitive=True) == (86, 256)


@pytest.mark.parametrize("T", [1, 2, 3])
def test_labels_agree_without_actions_by_time_reversal(T):
    # A clamped agnostic walk read backwards is a walk (a stay is as often possible at the same
    # corner, a move has exactly one reverse move), so without the actions the evidence classes of
    # the start label are the final label's reversed: the two bounds are equal ...
    table = maps.windows(maps.synthetic_maps(seed=3, names=["eastvillage"]), "train").landmarks
    assert bayes_rate(table, T, False, label="start") == bayes_rate(table, T, False, label="final")
    # ... while the actions break the symmetry: clamped walks merge at their end, never at the start.
    assert bayes_rate(table, T, True, label="start")[0] < bayes_rate(table, T, True, label="final")[0]


@pytest.mark.parametrize("aware", [False, True])
@pytest.mark.parametrize("label", ["final", "start"])
def test_enumerate_walks_equals_replay_on_every_window(aware, label):
    # The enumeration replays template walks once and gathers each window's observations; the
    # reference replays every walk on its own window with the environment.
    import jax
    import jax.numpy as jnp

    from ttw_jax.talk_the_walk import env as grid
    from ttw_jax.talk_the_walk import walks

    table = maps.windows(maps.synthetic_maps(seed=4, names=["hellskitchen"]), "valid").landmarks
    T = 2
    got = walks.enumerate_walks(table, T, label, aware)
    seqs = walks.action_sequences(T, walks.action_set(aware))
    win, sx, sy, so, seq = (a.ravel() for a in np.meshgrid(
        np.arange(len(table)), np.arange(4), np.arange(4), np.arange(4 if aware else 1),
        np.arange(len(seqs)), indexing="ij"))
    start = jax.vmap(grid.reset)(jnp.asarray(table[win]), jnp.stack([sx, sy], -1), so)
    ref = jax.vmap(grid.walk, in_axes=(0, 0, 0, None))(jnp.asarray(table[win]), start,
                                                        jnp.asarray(seqs[seq]), aware)
    corner = np.asarray(ref.positions)[:, -1 if label == "final" else 0]
    np.testing.assert_array_equal(got["obs"], np.asarray(ref.obs))
    np.testing.assert_array_equal(got["actions"], np.asarray(ref.actions))
    np.testing.assert_array_equal(got["landmarks"], table[win])
    np.testing.assert_array_equal(got["target"], corner[:, 0] * 4 + corner[:, 1])
    assert (got["obs"] != np.asarray(ref.obs)[::-1]).any()   # the comparison can fail


def test_row_ids_number_distinct_rows():
    from ttw_jax.talk_the_walk.upper_bound import row_ids
    rows = np.array([[3, -1, 7], [0, 0, 0], [3, -1, 7], [0, 0, 1], [2**40, 0, 0]])
    ids = row_ids(rows)
    assert ids[0] == ids[2] and len(set(ids.tolist())) == 4
    _, ref = np.unique(rows, axis=0, return_inverse=True)
    np.testing.assert_array_equal(ids, ref.ravel())
