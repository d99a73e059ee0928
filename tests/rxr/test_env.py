"""Matterport simulator (panoramic action space): parity with the pure-Python reference on real
scans, geodesic distances, and loader errors."""
import json
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.conftest import shared_path
from ttw_jax.core.env import batched, replay_policy, rollout
from ttw_jax.core.pano_graph import distances_from, to_device
from ttw_jax.rxr import env as mp
from ttw_jax.rxr.graph import (ConnectivityFormatError, geodesic_table, load_matterport_graph,
                               read_connectivity)
from ttw_jax.rxr.metrics import path_metrics
from ttw_jax.rxr.reference import MatterportReference

SCANS = ["17DRP5sb8fy", "1LXtFkjw3qL", "2azQ1b91cZZ", "8194nk5LbLH", "zsNo4HB9uLZ"]


@pytest.fixture(scope="module")
def scans():
    cdir = shared_path("matterport", "connectivity")
    graph, table, scan_of = load_matterport_graph(cdir, SCANS)
    raw = {s: read_connectivity(os.path.join(cdir, f"{s}_connectivity.json")) for s in SCANS}
    return graph, table, scan_of, MatterportReference(raw), raw


@pytest.mark.slow
def test_all_scans_match_published_statistics():
    graph, table, _ = load_matterport_graph(shared_path("matterport", "connectivity"))
    num_edges = int(np.sum(np.asarray(graph.neighbors) >= 0))
    assert len(table) == 10_567 and num_edges == 2 * 21_468 and graph.max_degree == 13


def test_parity_with_reference(scans):
    graph, table, _, ref, _ = scans
    dgraph = to_device(graph)
    rng = np.random.default_rng(1)
    batch, horizon = 64, 30
    start = rng.integers(0, graph.num_nodes, batch)
    heading = rng.uniform(0, 2 * math.pi, batch).astype(np.float32)
    actions = rng.integers(1, graph.max_degree + 1, (batch, horizon))
    actions[rng.random((batch, horizon)) < 0.03] = mp.STOP
    final, _, traj = jax.jit(rollout, static_argnums=(0, 3, 6))(
        mp.step, dgraph, batched(mp.reset)(dgraph, start, heading), replay_policy,
        jnp.asarray(actions, jnp.int32), jax.random.key(0), horizon)
    nodes = np.concatenate([np.asarray(traj.state.node).T, np.asarray(final.node)[:, None]], 1)
    heads = np.concatenate([np.asarray(traj.state.heading).T, np.asarray(final.heading)[:, None]],
                           1)
    for b in range(batch):
        expected = ref.run(table.ids[start[b]], float(heading[b]), actions[b].tolist())
        assert [table.ids[n] for n in nodes[b]] == [n for n, _ in expected], f"episode {b}"
        np.testing.assert_allclose(heads[b], [h for _, h in expected], atol=1e-5)


def test_candidates_report_relative_heading_and_elevation(scans):
    graph, table, _, ref, _ = scans
    dgraph = to_device(graph)
    node = 7
    cands = ref.neighbors[table.ids[node]]
    state = mp.reset(dgraph, node, 0.5)
    obs = mp.candidates(dgraph, state)
    k = len(cands)
    assert np.asarray(obs["mask"]).sum() == k
    rel = [(h - 0.5 + math.pi) % (2 * math.pi) - math.pi for h, _, _ in cands]
    np.testing.assert_allclose(np.asarray(obs["rel_heading"])[:k], rel, atol=1e-5)
    np.testing.assert_allclose(np.asarray(obs["elevation"])[:k], [e for _, e, _ in cands], atol=1e-5)


def test_geodesic_table_matches_dijkstra_and_r2r_distance(scans):
    graph, table, scan_of, _, _ = scans
    geo = geodesic_table(graph, scan_of)
    src = np.arange(0, graph.num_nodes, 17)
    d = distances_from(graph, src, weighted=True)
    for i, s in enumerate(src):
        same = np.nonzero(scan_of == scan_of[s])[0]
        np.testing.assert_allclose(geo.np(np.full(len(same), s), same), d[i, same], rtol=1e-5)
    # R2R's `distance` field is the geodesic length of the reference path's endpoints' path.
    data = json.load(open(shared_path("r2r", "R2R_val_seen.json")))
    checked = 0
    for item in data:
        if item["scan"] in SCANS:
            path = table.lookup([f"{item['scan']}/{v}" for v in item["path"]])
            assert float(geo.np(path[0], path[-1])) == pytest.approx(item["distance"], abs=0.05)
            checked += 1
    assert checked > 5


def test_connectivity_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="Matterport3DSimulator"):
        read_connectivity(str(tmp_path / "x_connectivity.json"))
    bad = tmp_path / "bad_connectivity.json"
    bad.write_text(json.dumps([{"image_id": "a", "pose": [0] * 16, "included": True}]))
    with pytest.raises(ConnectivityFormatError, match="viewpoint 0: missing field 'unobstructed'"):
        read_connectivity(str(bad))


@pytest.mark.parametrize("change, match", [
    (lambda d: d[1]["pose"].__setitem__(3, float("nan")), r"viewpoint 1: field 'pose': expected 16"),
    (lambda d: d[0].__setitem__("included", 1), r"viewpoint 0: field 'included': expected true"),
    (lambda d: d[1].__setitem__("image_id", "a"), r"viewpoint 1: field 'image_id': 'a' is also "
                                                  r"viewpoint 0"),
    (lambda d: d[0].__setitem__("unobstructed", [False, "yes"]), r"viewpoint 0: field "
                                                                 r"'unobstructed': expected 2 booleans"),
    (lambda d: d[0].__setitem__("image_id", 7), r"viewpoint 0: field 'image_id'"),
])
def test_connectivity_values_are_checked(tmp_path, change, match):
    data = [{"image_id": v, "pose": [0.0] * 16, "included": True,
             "unobstructed": [v == "b", v == "a"]} for v in ("a", "b")]
    change(data)
    path = tmp_path / "s_connectivity.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConnectivityFormatError, match=match) as e:
        read_connectivity(str(path))
    assert str(path) in str(e.value)


@pytest.mark.slow
def test_replaying_r2r_reference_paths_scores_perfectly():
    """Reference paths of R2R val_seen driven through the simulator (one panoramic action per
    hop, then STOP): the final viewpoint is the goal, PL equals the dataset's `distance` (the paths
    are shortest paths), SR = SPL = nDTW = SDTW = 1."""

    cdir = shared_path("matterport", "connectivity")
    data = json.load(open(shared_path("r2r", "R2R_val_seen.json")))
    scans = sorted({d["scan"] for d in data})[:6]
    items = [d for d in data if d["scan"] in scans]
    graph, table, scan_of = load_matterport_graph(cdir, scans)
    geo = geodesic_table(graph, scan_of)
    nb = np.asarray(graph.neighbors)
    horizon = max(len(d["path"]) for d in items)
    actions = np.zeros((len(items), horizon), np.int32)    # STOP-padded
    refs = np.full((len(items), horizon), -1, np.int32)
    for i, d in enumerate(items):
        path = table.lookup([f"{d['scan']}/{v}" for v in d["path"]])
        refs[i, :len(path)] = path
        for t, (a, b) in enumerate(zip(path[:-1], path[1:])):
            actions[i, t] = int(np.nonzero(nb[a] == b)[0][0]) + 1
    dgraph = to_device(graph)
    start = batched(mp.reset)(dgraph, refs[:, 0], np.asarray([d["heading"] for d in items]))
    final, _, traj = jax.jit(rollout, static_argnums=(0, 3, 6))(
        mp.step, dgraph, start, replay_policy, jnp.asarray(actions), jax.random.key(0), horizon)
    path, path_len = mp.path_of(traj, final)
    ref_len = (refs >= 0).sum(1)
    m = path_metrics(path, path_len, jnp.asarray(refs), jnp.asarray(ref_len), geo)
    np.testing.assert_array_equal(np.asarray(final.node), refs[np.arange(len(items)), ref_len - 1])
    np.testing.assert_allclose(m["pl"], [d["distance"] for d in items], atol=0.05)
    for k in ("ne",):
        np.testing.assert_allclose(m[k], 0.0, atol=1e-6)
    for k in ("sr", "spl", "ndtw", "sdtw", "osr"):
        np.testing.assert_allclose(m[k], 1.0, atol=1e-5)
