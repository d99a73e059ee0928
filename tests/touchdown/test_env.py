"""Touchdown simulator: the rules on hand-made graphs, and parity with the pure-Python reference on
the real 29,641-panorama graph."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.conftest import shared_path
from ttw_jax.core.env import batched, replay_policy, rollout
from ttw_jax.touchdown import env as td
from ttw_jax.touchdown.episodes import hops_to_goal
from ttw_jax.touchdown.graph import (GraphFormatError, compile_touchdown, load_touchdown_graph,
                                     read_graph_files, synthetic_street_grid, write_graph_files)
from ttw_jax.touchdown.reference import TouchdownReference
from ttw_jax.touchdown.synthetic import synthetic_records

F, L, R, S = td.FORWARD, td.LEFT, td.RIGHT, td.STOP

# A crossing C with arms; E is a dead end (1 out-edge); links.txt order matters for ties.
TOY_LINKS = [
    ("C", 0, "N"), ("C", 90, "E"), ("C", 180, "S"), ("C", 270, "W"),
    ("N", 180, "C"), ("N", 10, "N2"), ("N2", 190, "N"), ("N2", 0, "N3"),
    ("E", 270, "C"),
    ("S", 0, "C"), ("S", 200, "S2"), ("S2", 20, "S"), ("S2", 160, "S3"),
    ("W", 90, "C"), ("W", 300, "W2"), ("W", 240, "W3"),
]
TOY_NODES = sorted({a for a, _, _ in TOY_LINKS} | {b for _, _, b in TOY_LINKS})


def toy():
    nodes = [(n, 0, 40.0 + i * 1e-4, -73.0) for i, n in enumerate(TOY_NODES)]
    graph, table = compile_touchdown(nodes, TOY_LINKS)
    return td.compile_sim(graph), table


def run_jax(sim, table, pano, heading, actions):
    state = td.reset(sim, table.index[pano], heading)
    out = [(table.ids[int(state.pano)], int(state.heading))]
    for a in actions:
        state = td.step(sim, state, a)
        out.append((table.ids[int(state.pano)], int(state.heading)))
    return out


@pytest.mark.parametrize("pano,heading,actions,expected", [
    # FORWARD along an aligned edge, then snap to the new pano's closest heading (10 from 0).
    ("C", 0, [F], [("C", 0), ("N", 10)]),
    # Misaligned FORWARD does not move but snaps in place: 40 -> closest of 0/90/180/270 is 0.
    ("C", 40, [F], [("C", 40), ("C", 0)]),
    # Tie at 45: 0 and 90 are equally close; 0 comes first in links.txt.
    ("C", 45, [F], [("C", 45), ("C", 0)]),
    # LEFT = nearest other heading counter-clockwise, RIGHT = clockwise.
    ("C", 0, [L, L, R], [("C", 0), ("C", 270), ("C", 180), ("C", 270)]),
    ("C", 30, [R], [("C", 30), ("C", 90)]),
    # Moving into E (1 out-edge) is refused: the state does not change at all.
    ("C", 90, [F], [("C", 90), ("C", 90)]),
    # From W at 90 LEFT picks 300 ((90-300) mod 360 = 150 < (90-240) mod 360 = 210).
    ("W", 90, [L, R], [("W", 90), ("W", 300), ("W", 90)]),
    # N3 has no out-edges: FORWARD from N2 at 0 is refused.
    ("N2", 0, [F], [("N2", 0), ("N2", 0)]),
    # STOP freezes the episode.
    ("C", 0, [S, F, L], [("C", 0)] * 4),
])
def test_rules_on_toy_graph(pano, heading, actions, expected):
    sim, table = toy()
    ref = TouchdownReference(TOY_LINKS)
    assert ref.run(pano, heading, actions) == expected
    assert run_jax(sim, table, pano, heading, actions) == expected


def test_out_edges_sorted_by_heading_with_file_rank():
    sim, table = toy()
    graph = sim.graph
    c = table.index["C"]
    assert np.asarray(graph.headings[c]).tolist() == [0, 90, 180, 270]
    w = table.index["W"]
    assert np.asarray(graph.headings[w]).tolist()[:3] == [90, 240, 300]
    assert np.asarray(graph.link_rank[w]).tolist()[:3] == [0, 2, 1]
    assert [table.ids[i] for i in np.asarray(graph.neighbors[w])[:3]] == ["C", "W3", "W2"]


def test_graph_errors_name_file_line_and_field(tmp_path):
    with pytest.raises(FileNotFoundError, match="nodes.txt.*links.txt.*lil-lab/touchdown"):
        read_graph_files(str(tmp_path))
    nodes, links = synthetic_street_grid(num_avenues=2, num_streets=2, panos_per_block=2)
    write_graph_files(str(tmp_path), nodes, links)
    lines = (tmp_path / "links.txt").read_text().splitlines()
    lines[4] = lines[4].replace(",", ",north,", 1).rsplit(",", 1)[0]
    (tmp_path / "links.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(GraphFormatError, match=r"links.txt:5: field 'heading'"):
        read_graph_files(str(tmp_path))
    lines[4] = "a,b"
    (tmp_path / "links.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(GraphFormatError, match=r"links.txt:5: expected 3"):
        read_graph_files(str(tmp_path))
    (tmp_path / "links.txt").write_text("\n")
    with pytest.raises(GraphFormatError, match=r"links.txt: no rows"):
        read_graph_files(str(tmp_path))


def test_synthetic_grid_looks_like_manhattan(tmp_path):
    nodes, links = synthetic_street_grid(seed=3)
    write_graph_files(str(tmp_path), nodes, links)
    graph, _ = load_touchdown_graph(str(tmp_path))
    degree = np.bincount(np.asarray(graph.degree))
    assert degree[2] / degree.sum() > 0.8 and degree[4] > 0 and degree[1] > 0
    out = {(a, b): h for a, h, b in links}
    assert all((out[(b, a)] - h) % 360 == 180 for (a, b), h in out.items())
    lengths = np.asarray(graph.lengths)[np.asarray(graph.neighbors) >= 0]
    assert 7 < np.median(lengths) < 13


@pytest.fixture(scope="module")
def real():
    graph_dir = shared_path("touchdown", "graph")
    graph, table = load_touchdown_graph(graph_dir)
    _, links = read_graph_files(graph_dir)
    return td.compile_sim(graph), table, TouchdownReference(links)


def test_real_graph_compiles(real):
    graph = real[0].graph
    assert graph.num_nodes == 29_641 and int(np.sum(np.asarray(graph.neighbors) >= 0)) == 61_319
    assert graph.max_degree == 5


@pytest.mark.slow
def test_parity_with_reference_on_real_graph(real):
    sim, table, ref = real
    graph = sim.graph
    rng = np.random.default_rng(0)
    batch, horizon = 48, 60
    start = rng.integers(0, graph.num_nodes, batch)
    heading = rng.integers(0, 360, batch)
    heading[:16] = np.asarray(graph.headings)[start[:16], 0]   # half start aligned with an edge
    actions = rng.choice(4, (batch, horizon), p=[0.55, 0.2, 0.2, 0.05]).astype(np.int32)
    final, _, traj = jax.jit(rollout, static_argnums=(0, 3, 6))(
        td.step, sim, batched(td.reset)(sim, start, heading), replay_policy, jnp.asarray(actions),
        jax.random.key(0), horizon)
    panos = np.concatenate([np.asarray(traj.state.pano).T, np.asarray(final.pano)[:, None]], 1)
    heads = np.concatenate([np.asarray(traj.state.heading).T, np.asarray(final.heading)[:, None]],
                           1)
    moved = 0
    for b in range(batch):
        expected = ref.run(table.ids[start[b]], int(heading[b]), actions[b].tolist())
        got = [(table.ids[p], int(h)) for p, h in zip(panos[b], heads[b])]
        assert got == expected, f"episode {b} diverges"
        moved += len({p for p, _ in expected}) > 1
    assert moved > batch // 2   # the walks do move


@pytest.mark.slow
def test_gold_actions_reach_the_goal_on_real_records(real):
    sim, table, ref = real
    graph = sim.graph
    path = shared_path("touchdown", "touchdown_unseen_dev_sample.json")
    records = [json.loads(line) for line in open(path)]
    assert len(records) == 800
    neighbors = np.asarray(graph.neighbors)
    ok = 0
    for rec in records:
        route = rec["route_panoids"]
        actions = ref.gold_actions(route, round(rec["start_heading"]))
        final = ref.run(route[0], round(rec["start_heading"]) % 360, actions)[-1][0]
        goal = table.index[route[-1]]
        ok += final == route[-1] or table.index[final] in neighbors[goal].tolist()
    assert ok >= 799


def test_hops_to_goal_follow_link_directions():
    sim, table = toy()
    graph = jax.tree.map(np.asarray, sim.graph)
    goal = table.index["E"]                     # only C links into E; E links back to C
    hops = hops_to_goal(graph, np.asarray([goal, table.index["N3"]]))
    by_id = {n: int(hops[0, table.index[n]]) for n in TOY_NODES}
    assert by_id == {"C": 1, "E": 0, "N": 2, "N2": 3, "N3": -1, "S": 2, "S2": 3, "S3": -1,
                     "W": 2, "W2": -1, "W3": -1}
    assert hops[1, table.index["N2"]] == 1 and hops[1, table.index["N"]] == 2


def test_synthetic_routes_on_the_real_graph_are_followable(real):
    _, links = read_graph_files(shared_path("touchdown", "graph"))
    _, _, ref = real
    for rec in synthetic_records(links, 30, seed=5):
        route = rec["route_panoids"]
        heading = round(rec["start_heading"])
        final = ref.run(route[0], heading, ref.gold_actions(route, heading))[-1][0]
        assert final == route[-1] and len(route) <= 45


@pytest.mark.parametrize("file, line, edit, message", [
    ("links.txt", 3, lambda l: "nopano," + l.split(",", 1)[1],
     r"links.txt:3: field 'start_panoid': unknown panoid 'nopano' \(not in .*nodes.txt\)"),
    ("links.txt", 2, lambda l: l.rsplit(",", 1)[0] + ",ghost",
     r"links.txt:2: field 'end_panoid': unknown panoid 'ghost'"),
    ("nodes.txt", 4, lambda l: ",".join(l.split(",")[:2] + ["nan"] + l.split(",")[3:]),
     r"nodes.txt:4: field 'lat' must be a finite number"),
    ("nodes.txt", 2, lambda l: ",".join(l.split(",")[:3] + ["1e300"]),
     r"nodes.txt:2: field 'lng' must be a finite number in \[-180, 180\]"),
    ("nodes.txt", 3, lambda l: None, r"nodes.txt:3: field 'panoid': .* repeats line 2"),
])
def test_bad_graph_values_name_file_line_and_field(tmp_path, file, line, edit, message):
    nodes, links = synthetic_street_grid(num_avenues=2, num_streets=2, panos_per_block=2)
    write_graph_files(str(tmp_path), nodes, links)
    lines = (tmp_path / file).read_text().splitlines()
    new = edit(lines[line - 1])
    lines[line - 1] = lines[line - 2] if new is None else new   # None: repeat the line above
    (tmp_path / file).write_text("\n".join(lines) + "\n")
    with pytest.raises(GraphFormatError, match=message):
        read_graph_files(str(tmp_path))
