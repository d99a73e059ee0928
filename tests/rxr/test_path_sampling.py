"""RxR two-level path sampling: rooms, room paths, constrained shortest paths and the greedy choice
on a hand-made graph; properties of sampled paths on real scans; the region-file reader."""
import itertools

import numpy as np
import pytest
from scipy.sparse import csgraph

from tests.conftest import shared_path
from ttw_jax.core.pano_graph import NodeTable, adjacency, build_graph
from ttw_jax.rxr import path_sampling as ps
from ttw_jax.rxr.graph import load_matterport_graph

# A 3x3 grid of viewpoints (node = 3 * row + column):
#   6 - 7 - 8
#   |   |   |
#   3 - 4 - 5
#   |   |   |
#   0 - 1 - 2
# Every edge is 1 m long except 0-3 (1.5 m). Regions: {0, 1, 3}, {2, 5}, {4, 7}, {6, 8}; the last
# one is not connected inside itself, so it gives two rooms.
EDGES = [(0, 1, 1.0), (1, 2, 1.0), (0, 3, 1.5), (1, 4, 1.0), (2, 5, 1.0), (3, 4, 1.0),
         (4, 5, 1.0), (3, 6, 1.0), (4, 7, 1.0), (5, 8, 1.0), (6, 7, 1.0), (7, 8, 1.0)]
REGIONS = np.array([10, 10, 11, 10, 12, 11, 13, 12, 13], np.int32)
# Rooms are numbered by their lowest node: {0,1,3} -> 0, {2,5} -> 1, {4,7} -> 2, {6} -> 3, {8} -> 4.
ROOM_OF = [0, 0, 1, 0, 2, 1, 3, 2, 4]
ROOM_ADJ = [{1, 2, 3}, {0, 2, 4}, {0, 1, 3, 4}, {0, 2}, {1, 2}]


def grid_graph():
    src, dst, length = [], [], []
    for a, b, w in EDGES:
        src += [a, b]
        dst += [b, a]
        length += [w, w]
    pos = np.array([(i % 3, i // 3, 0.0) for i in range(9)], np.float32)
    return build_graph(9, np.array(src), np.array(dst), np.zeros(len(src), np.float32),
                       np.array(length, np.float32), pos)


def edge_length(graph, a, b):
    nb = np.asarray(graph.neighbors)[a]
    assert b in nb, f"{a}->{b} is not an edge"
    return float(np.asarray(graph.lengths)[a][list(nb).index(b)])


def test_rooms_and_room_adjacency_by_hand():
    room_of, rooms = ps.room_graph(grid_graph(), REGIONS)
    assert room_of.tolist() == ROOM_OF
    assert rooms == ROOM_ADJ


def test_room_paths_dfs_order_and_count():
    assert ps.room_paths(ROOM_ADJ, [3], max_rooms=3) == [
        (3,), (3, 0), (3, 0, 1), (3, 0, 2), (3, 2), (3, 2, 0), (3, 2, 1), (3, 2, 4)]
    # Brute force: every sequence of distinct rooms with consecutive rooms adjacent.
    expected = {p for k in range(1, 6) for p in itertools.permutations(range(5), k)
                if all(b in ROOM_ADJ[a] for a, b in zip(p, p[1:]))}
    got = ps.room_paths(ROOM_ADJ, range(5), max_rooms=5)
    assert len(got) == len(set(got)) and set(got) == expected
    # The cap keeps ceil(cap / rooms) paths per start room.
    capped = ps.room_paths(ROOM_ADJ, range(5), max_rooms=5, max_room_paths=10)
    assert [p[0] for p in capped] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]


def test_constrained_shortest_paths_by_hand():
    g, room_of = grid_graph(), np.array(ROOM_OF)
    # Rooms 3 -> 0 -> 1: from 6 the walk must cross room 0 (via the 1.5 m edge) and enter room 1
    # through 1-2, although 6-7-8-5 is only 3 m.
    assert ps.constrained_shortest_path(g, room_of, (3, 0, 1), 6, 5) == ([6, 3, 0, 1, 2, 5], 5.5)
    # Rooms 0 -> 2 -> 1: the direct 0-1-2 would skip room 2, and the layered graph forbids going
    # back from room 1 to room 0, so the path detours through 4.
    assert ps.constrained_shortest_path(g, room_of, (0, 2, 1), 0, 2) == ([0, 1, 4, 5, 2], 4.0)
    # A single room: the shortest path inside it (3-4-1 is shorter but leaves the room).
    assert ps.constrained_shortest_path(g, room_of, (0,), 3, 1) == ([3, 0, 1], 2.5)
    with pytest.raises(ValueError, match="repeats"):
        ps.constrained_shortest_path(g, room_of, (0, 2, 0), 0, 1)
    with pytest.raises(ValueError, match="first room"):
        ps.constrained_shortest_path(g, room_of, (2, 1), 0, 2)


def test_greedy_minimises_directness_plus_coverage_by_hand():
    paths = [[0, 1, 2], [0, 3, 4, 1], [3, 4, 5], [2, 5]]
    lengths = [2.0, 3.0, 2.0, 1.0]
    geodesic = [2.0, 1.0, 1.5, 1.0]
    # Round 1, nothing covered: d/L = 1, 1/3, 0.75, 1 -> path 1 (the least direct).
    # Round 2, nodes 0,1,3,4 covered once: 1 + 2/3, -, 0.75 + 2/3, 1 + 0 -> path 3 (new ground).
    # Round 3, also 2,5 covered: 1 + 3/3, -, 0.75 + 3/3, - -> path 2; then path 0.
    assert ps.greedy_select(paths, lengths, geodesic, 6, 4) == [1, 3, 2, 0]
    assert ps.greedy_select(paths, lengths, geodesic, 6, 2) == [1, 3]
    assert ps.greedy_select([], [], [], 6, 3) == []


def test_sample_paths_on_the_hand_graph():
    g = grid_graph()
    out = ps.sample_paths(g, np.zeros(9, np.int32), REGIONS, per_env=5, candidates_per_env=50,
                          max_length=40.0, seed=3)
    assert 0 < len(out) <= 5
    assert len({tuple(p) for _, p in out}) == len(out)
    for scan, path in out:
        assert scan == 0 and len(path) >= 3
        for a, b in zip(path, path[1:]):
            edge_length(g, a, b)
    assert out == ps.sample_paths(g, np.zeros(9, np.int32), REGIONS, per_env=5,
                                  candidates_per_env=50, max_length=40.0, seed=3)


# ---------------------------------------------------------------------------------------------
# Real scans
# ---------------------------------------------------------------------------------------------

SCANS = ["17DRP5sb8fy", "1LXtFkjw3qL", "2azQ1b91cZZ"]


@pytest.fixture(scope="module")
def real():
    graph, nodes, scan_of = load_matterport_graph(shared_path("matterport", "connectivity"), SCANS)
    regions = ps.synthetic_regions(graph, scan_of, nodes_per_region=6, seed=0)
    paths = ps.sample_paths(graph, scan_of, regions, per_env=60, seed=0)
    return graph, nodes, scan_of, regions, paths


def test_synthetic_regions_are_connected_and_within_scans(real):
    graph, _, scan_of, regions, _ = real
    room_of, _ = ps.room_graph(graph, regions)
    # Every region is one room (connected), and regions never cross scans.
    assert len(np.unique(room_of)) == len(np.unique(regions))
    for r in np.unique(regions):
        assert len(np.unique(scan_of[regions == r])) == 1
    sizes = np.bincount(regions)
    assert 3 <= sizes.mean() <= 12
    assert np.array_equal(regions, ps.synthetic_regions(graph, scan_of, 6, seed=0))
    assert not np.array_equal(regions, ps.synthetic_regions(graph, scan_of, 6, seed=1))


def test_real_paths_are_valid_walks_through_room_paths(real):
    graph, _, scan_of, regions, paths = real
    room_of, room_adj = ps.room_graph(graph, regions)
    counts = np.bincount([s for s, _ in paths], minlength=len(SCANS))
    assert (counts > 0).all() and (counts <= 60).all()
    for scan, path in paths:
        assert len(path) - 1 >= 2
        assert len(set(path)) == len(path)
        assert (scan_of[path] == scan).all()
        length = sum(edge_length(graph, a, b) for a, b in zip(path, path[1:]))
        assert length <= 40.0 + 1e-3
        # The rooms along the path, consecutive repeats merged, form a simple room path.
        rooms = [int(room_of[path[0]])]
        for v in path[1:]:
            if room_of[v] != rooms[-1]:
                assert room_of[v] in room_adj[rooms[-1]]
                rooms.append(int(room_of[v]))
        assert len(rooms) == len(set(rooms)) <= 5
        # And the path is the shortest one constrained to that room path.
        _, best = ps.constrained_shortest_path(graph, room_of, rooms, path[0], path[-1])
        assert abs(best - length) < 1e-3
    keys = [(s, tuple(p)) for s, p in paths]
    assert len(set(keys)) == len(keys)


def test_real_sampling_is_deterministic_given_the_seed(real):
    graph, _, scan_of, regions, paths = real
    assert ps.sample_paths(graph, scan_of, regions, per_env=60, seed=0) == paths
    assert ps.sample_paths(graph, scan_of, regions, per_env=60, seed=1) != paths


def test_real_sampling_limits_and_objective(real):
    graph, _, scan_of, regions, _ = real
    short = ps.sample_paths(graph, scan_of, regions, max_rooms=2, max_length=8.0, min_steps=3,
                            max_steps=4, per_env=20, seed=0)
    room_of, _ = ps.room_graph(graph, regions)
    for _, path in short:
        assert 3 <= len(path) - 1 <= 4
        assert len(set(room_of[path].tolist())) <= 2
        assert sum(edge_length(graph, a, b) for a, b in zip(path, path[1:])) <= 8.0 + 1e-3
    # The first pick of each scan has the smallest d / L among all picks of that scan (coverage
    # is zero for everyone in round 1).
    picked = ps.sample_paths(graph, scan_of, regions, per_env=30, seed=0)
    d = ps.scan_geodesics(graph, scan_of, [(p[0], p[-1]) for _, p in picked])
    ratio = np.array([d[i] / sum(edge_length(graph, a, b) for a, b in zip(p, p[1:]))
                      for i, (_, p) in enumerate(picked)])
    scans = np.array([s for s, _ in picked])
    for s in np.unique(scans):
        mine = np.nonzero(scans == s)[0]
        assert ratio[mine[0]] <= ratio[mine].min() + 1e-6


def test_geodesics_match_dijkstra(real):
    graph, _, scan_of, _, paths = real
    pairs = [(p[0], p[-1]) for _, p in paths[:20]]
    full = csgraph.dijkstra(adjacency(graph, True), indices=[a for a, _ in pairs])
    np.testing.assert_allclose(ps.scan_geodesics(graph, scan_of, pairs),
                               [full[i, b] for i, (_, b) in enumerate(pairs)], rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# Region files
# ---------------------------------------------------------------------------------------------

def write_regions(tmp_path, scan, lines):
    d = tmp_path / scan / "house_segmentations"
    d.mkdir(parents=True)
    (d / "panorama_to_region.txt").write_text("".join(line + "\n" for line in lines))


def test_region_file_reader(tmp_path):
    write_regions(tmp_path, "scanA", ["0 vpa0 3 k", "1 vpa1 3 k", "2 vpa2 0 b", "", "3 vpa3 -1 -"])
    write_regions(tmp_path, "scanB", ["0 vpb0 0 l", "1 vpb1 1 h"])
    nodes = NodeTable.from_ids(["scanA/vpa0", "scanA/vpa1", "scanA/vpa2", "scanA/vpa3",
                                "scanA/vpa4", "scanB/vpb0", "scanB/vpb1"])
    regions = ps.read_panorama_regions(str(tmp_path), nodes, ["scanA", "scanB"])
    # Annotated regions in (scan, region index) order: A0 -> 0, A3 -> 1, B0 -> 2, B1 -> 3; the
    # viewpoint with region -1 and the unlisted one become singletons 4 and 5.
    assert regions.tolist() == [1, 1, 0, 4, 5, 2, 3]
    assert regions.dtype == np.int32
    assert ps.read_region_file(str(tmp_path / "scanA" / ps.REGION_FILE))["vpa2"] == (0, "b")
    assert ps.read_panorama_regions(str(tmp_path), nodes).tolist() == regions.tolist()


def test_region_file_errors(tmp_path):
    nodes = NodeTable.from_ids(["scanA/vpa0", "scanC/vpc0"])
    write_regions(tmp_path, "scanA", ["0 vpa0 3 k"])
    with pytest.raises(FileNotFoundError, match=r"scanC.*panorama_to_region\.txt.*Matterport3D"):
        ps.read_panorama_regions(str(tmp_path), nodes)
    with pytest.raises(ValueError, match="not in `scans`"):
        ps.read_panorama_regions(str(tmp_path), nodes, ["scanA"])
    write_regions(tmp_path, "scanC", ["0 vpc0 1 k", "1 vpc1 two k"])
    with pytest.raises(ps.RegionFormatError, match=r"panorama_to_region\.txt: line 2: field "
                                                   r"'region_index' must be an integer"):
        ps.read_panorama_regions(str(tmp_path), nodes)
    (tmp_path / "scanC" / ps.REGION_FILE).write_text("0 vpc0 1\n")
    with pytest.raises(ps.RegionFormatError, match="line 1: expected 4 fields"):
        ps.read_panorama_regions(str(tmp_path), nodes)
    (tmp_path / "scanC" / ps.REGION_FILE).write_text("x vpc0 1 k\n")
    with pytest.raises(ps.RegionFormatError, match="line 1: field 'panorama_index'"):
        ps.read_panorama_regions(str(tmp_path), nodes)
    (tmp_path / "scanC" / ps.REGION_FILE).write_text("0 vpc0 1 k\n1 vpc0 2 k\n")
    with pytest.raises(ps.RegionFormatError, match="line 2: field 'viewpoint_id'"):
        ps.read_panorama_regions(str(tmp_path), nodes)
