"""Touchdown metrics: hand-worked TC/SPD/SED examples; batched JAX versions vs NumPy twins."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ttw_jax.core.sequence import levenshtein_np
from ttw_jax.touchdown.metrics import (hop_distance_np, sed_np, shortest_path_distance,
                                       success_weighted_edit_distance, task_completion,
                                       task_completion_np, touchdown_metrics, touchdown_metrics_np)

# Directed links graph on 6 panoramas:
#   0 <-> 1 <-> 2 <-> 3 <-> 4, plus a one-way link 5 -> 2 (2 has no link back to 5).
NEIGHBORS = np.array([
    [1, -1],
    [0, 2],
    [1, 3],
    [2, 4],
    [3, -1],
    [2, -1],
], np.int32)
# Hops from each node to node 2 along out-links: 0->1->2 = 2, 1 = 1, 2 = 0, 3 = 1, 4 = 2, 5 = 1.
HOPS_TO_2 = np.array([2, 1, 0, 1, 2, 1], np.float32)


def test_task_completion_examples():
    goal = jnp.array([2, 2, 2, 2, 2, 5, 0, 0])
    final = jnp.array([2, 3, 1, 4, 5, 2, -1, 4])
    # goal itself, neighbours 3 and 1, two hops away; the one-way link 5 -> 2 makes 5 and 2
    # neighbours in the undirected graph (the paper's TC), whichever of them is the goal; -1
    # (no panorama) and an unlinked panorama never count.
    want = [1, 1, 1, 0, 1, 1, 0, 0]
    np.testing.assert_array_equal(task_completion(final, goal, NEIGHBORS), want)
    assert [task_completion_np(int(f), int(g), NEIGHBORS) for f, g in zip(final, goal)] == want
    links = {2: [1, 3], 5: [2]}                               # the mapping form
    assert task_completion_np(5, 2, links) == task_completion_np(2, 5, links) == 1.0
    assert task_completion_np(4, 2, links) == 0.0


def test_shortest_path_distance_example():
    for node in range(6):
        assert hop_distance_np(NEIGHBORS, node, 2) == HOPS_TO_2[node]
    assert hop_distance_np(NEIGHBORS, 2, 5) == np.inf  # nothing links into 5
    rows = np.stack([HOPS_TO_2] * 3)
    np.testing.assert_array_equal(shortest_path_distance(jnp.array([4, 5, 2]), rows), [2, 1, 0])


def test_sed_example_with_turns():
    # Predicted: turns at 0 and at 1 repeat panoramas -> de-duplicated [0, 1, 2, 3] (length 4).
    pred = [0, 0, 1, 1, 1, 2, 3]
    # Reference de-duplicated: [0, 1, 2, 4] (length 4).
    ref = [0, 1, 1, 2, 4]
    # Lev([0,1,2,3], [0,1,2,4]) = 1 (one substitution) -> SED = 1 * (1 - 1/4) = 0.75.
    assert sed_np(pred, ref, 1.0) == pytest.approx(0.75)
    assert sed_np(pred, ref, 0.0) == 0.0
    # On the raw sequences Lev = 3 (2 deletions + 1 substitution) -> 1 - 3/7 ~ 0.571 < 0.75.
    assert levenshtein_np(pred, ref) == 3
    p = jnp.array([pred + [-1] * 3, [3, 3, 3, -1, -1, -1, -1, -1, -1, -1]])
    r = jnp.array([ref + [-1], [3, 4, 4, 4, 2, -1]])
    # Row 2: p = [3], r = [3, 4, 2], Lev = 2, max len 3 -> 0.5 * (1 - 2/3) = 1/6.
    sed = success_weighted_edit_distance(p, jnp.array([7, 3]), r, jnp.array([5, 5]),
                                         jnp.array([1.0, 0.5]))
    np.testing.assert_allclose(sed, [0.75, 0.5 / 3], rtol=1e-6)


def test_touchdown_metrics_np_means():
    episodes = [
        {"pred": [0, 0, 1, 2], "ref": [0, 1, 2]},  # TC 1, SPD 0, SED 1
        {"pred": [1, 2, 3, 3], "ref": [0, 1, 2]},  # final 3 adjacent to goal 2: TC 1, SPD 1;
        # p = [1, 2, 3], r = [0, 1, 2]: Lev 2 -> SED 1 - 2/3 = 1/3
        {"pred": [0], "ref": [0, 1, 2]},           # TC 0, SPD 2, SED 0
    ]
    got = touchdown_metrics_np(episodes, NEIGHBORS)
    assert got["tc"] == pytest.approx(2 / 3)
    assert got["spd"] == pytest.approx(1.0)
    assert got["sed"] == pytest.approx((1 + 1 / 3) / 3)


def _random_graph(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    nbrs = np.full((n, k), -1, np.int32)
    for i in range(n):  # a ring (so everything is reachable) plus random one-way links
        extra = rng.choice(n, rng.integers(0, k - 1), replace=False)
        out = list(dict.fromkeys([(i + 1) % n, *[int(e) for e in extra if e != i]]))[:k]
        nbrs[i, :len(out)] = out
    return nbrs


def _pad(seqs: list[list[int]], size: int, fill: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    out = np.broadcast_to(np.asarray(fill, np.int32), (len(seqs), size)).copy()
    for i, s in enumerate(seqs):
        out[i, :len(s)] = s
    return out, np.array([len(s) for s in seqs], np.int32)


def _random_batch(seed: int, b: int = 50, n: int = 12, t: int = 10, r: int = 8):
    rng = np.random.default_rng(seed)
    nbrs = _random_graph(rng, n, 3)
    episodes = []
    for _ in range(b):
        # Walks on the graph, with repeats (turns in place) sprinkled in.
        def walk(start: int, steps: int) -> list[int]:
            seq = [start]
            while len(seq) < steps:
                cand = [int(x) for x in nbrs[seq[-1]] if x >= 0]
                seq.append(seq[-1] if rng.random() < 0.3 else int(rng.choice(cand)))
            return seq
        start = int(rng.integers(n))
        ref = walk(start, int(rng.integers(1, r + 1)))
        pred = walk(start, int(rng.integers(1, t + 1)))
        if rng.random() < 0.3:  # some near-misses and exact hits
            pred[-1] = ref[-1] if rng.random() < 0.5 else int(nbrs[ref[-1], 0])
        episodes.append({"pred": pred, "ref": ref})
    return rng, nbrs, episodes


def _batched_inputs(nbrs: np.ndarray, episodes: list[dict], t: int, r: int, fill_p, fill_r):
    pred, pred_len = _pad([e["pred"] for e in episodes], t, fill_p)
    ref, ref_len = _pad([e["ref"] for e in episodes], r, fill_r)
    final = np.array([e["pred"][-1] for e in episodes], np.int32)
    goal = np.array([e["ref"][-1] for e in episodes], np.int32)
    n = nbrs.shape[0]
    dist_to_goal = np.array([[hop_distance_np(nbrs, v, g) for v in range(n)] for g in goal],
                            np.float32)
    return final, goal, nbrs, dist_to_goal, pred, pred_len, ref, ref_len


def test_random_batched_matches_numpy():
    _, nbrs, episodes = _random_batch(0)
    inputs = _batched_inputs(nbrs, episodes, 10, 8, -1, -1)
    got = jax.jit(touchdown_metrics)(*inputs)
    for i, ep in enumerate(episodes):
        want = touchdown_metrics_np([ep], nbrs)
        for key in ("tc", "spd", "sed"):
            assert float(got[key][i]) == pytest.approx(want[key], abs=1e-6), (i, key)
    means = touchdown_metrics_np(episodes, nbrs)
    for key in ("tc", "spd", "sed"):
        assert float(got[key].mean()) == pytest.approx(means[key], abs=1e-5)
    # The batch mixes successes, failures and partial SED.
    assert 0 < means["tc"] < 1 and 0 < means["sed"] < means["tc"]
    assert len(set(np.asarray(got["sed"]).round(4).tolist())) > 3


def test_padding_values_change_nothing():
    rng, nbrs, episodes = _random_batch(1)
    base = _batched_inputs(nbrs, episodes, 10, 8, -1, -1)
    # Padding that looks like real panoramas.
    other = _batched_inputs(nbrs, episodes, 10, 8, rng.integers(0, 12, 10), rng.integers(0, 12, 8))
    assert (base[4] != other[4]).any() and (base[6] != other[6]).any()
    f = jax.jit(touchdown_metrics)
    got1, got2 = f(*base), f(*other)
    for key in ("tc", "spd", "sed"):
        np.testing.assert_array_equal(got1[key], got2[key])
