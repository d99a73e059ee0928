"""The cascaded ArraMon task (`evaluation.arramon.make_task_rollout`) replaying the ground truth of
every val_seen instance, and the egocentric views on hand-made scenes."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.conftest import shared_path
from ttw_jax.arramon import env, episodes as ae, evaluation as arr_eval, views as view
from ttw_jax.core.env import replay_policy
from ttw_jax.core.vocab import Vocabulary


def gold_factories(horizon=env.STEP_LIMIT):
    """Policy factories replaying the ground-truth actions (consts = (navi [B, 2, Tn], assem
    [B, 2, Ta]))."""
    def replay(actions, end):
        acts = jnp.pad(actions, ((0, 0), (0, horizon - actions.shape[1])), constant_values=end)
        return replay_policy, acts

    def nav(walkable, consts, batch):
        return replay(jnp.take_along_axis(consts[0], batch["turn"][:, None, None], 1)[:, 0],
                      env.PICK)

    def assem(grid, consts, batch):
        return replay(jnp.take_along_axis(consts[1], batch["turn"][:, None, None], 1)[:, 0],
                      env.PLACE)
    return nav, assem


@pytest.fixture(scope="module")
def val_seen():
    with open(shared_path("arramon", "val_seen.json")) as f:
        records = json.load(f)
    vocab = Vocabulary.build(s for r in records for s in r["instructions"]["navi_inst_gt"])
    walk, index = ae.walkable_for(records)
    return ae.episodes(records, vocab, map_index=index), walk


@pytest.mark.slow
def test_replaying_the_ground_truth_scores_perfectly(val_seen):
    ep, walk = val_seen
    run = arr_eval.make_task_rollout(gold_factories())
    consts = (jnp.asarray(ep["navi_actions"]), jnp.asarray(ep["assem_actions"]))
    res = arr_eval.evaluate(run, walk, consts, ep, jax.random.key(0), batch_size=1065)
    per = res["episodes"]
    for t in range(2):
        np.testing.assert_allclose(per[f"navi_ndtw_{t}"], 1.0, atol=1e-4)
        np.testing.assert_allclose(per[f"assem_ndtw_{t}"], 1.0, atol=1e-6)
    # 14 of the 2,130 gold pick-ups fall outside the rectangle (README); the fallback takes the
    # nearest object there, which scores 0. Every other turn collects and places perfectly, and
    # turn 2 starts from turn 1's own end state.
    ctc0 = np.stack([per["ctc0_0"], per["ctc0_1"]])
    assert int((ctc0 == 0).sum()) == 14
    for k in ("ctc3", "ctc5", "ctc7"):
        assert np.all(np.stack([per[f"{k}_0"], per[f"{k}_1"]]) >= ctc0)
    ptc = np.stack([per["ptc_0"], per["ptc_1"]])
    rpod = np.stack([per["rpod_0"], per["rpod_1"]])
    collected = np.maximum(ctc0, np.stack([per["ctc3_0"], per["ctc3_1"]]))
    np.testing.assert_array_equal(ptc, collected)
    np.testing.assert_array_equal(rpod, collected)
    np.testing.assert_array_equal(per["navi_steps_0"][ctc0[0] == 1],
                                  ep["navi_len"][ctc0[0] == 1, 0])


def _nav_state(objects, heading=0):
    objects = jnp.asarray(objects, jnp.float32)
    return env.reset_navigation(None, jnp.zeros(2), jnp.zeros(()), objects,
                                jnp.ones(objects.shape[:1], bool), jnp.zeros((), jnp.int32),
                                jnp.array(heading))


def test_navigation_view_bearings_and_visibility():
    objs = [(1, 0.06, 1), (-1, 0.06, 1), (0, 0.06, -2), (0, 0.06, 13), (6, 0.06, 0)]
    attrs = jnp.arange(15).reshape(5, 3)
    mask = jnp.ones((5,), bool)
    a, geo, vis = view.navigation_view(_nav_state(objs), attrs, mask)
    # Facing +z: 45 degrees to the right, 45 to the left, behind, out of range, 90 to the right
    # (outside the 120-degree field of view).
    np.testing.assert_array_equal(np.asarray(vis), [True, True, False, False, False])
    r = np.sqrt(0.5)
    np.testing.assert_allclose(np.asarray(geo[0]), [r, r, np.sqrt(2) / 12, 1], atol=1e-6)
    np.testing.assert_allclose(np.asarray(geo[1]), [-r, r, np.sqrt(2) / 12, 1], atol=1e-6)
    np.testing.assert_array_equal(np.asarray(geo[2:]), 0.0)
    assert a is attrs
    # Facing +x (three right turns) the object at (6, 0) is straight ahead.
    _, geo, vis = view.navigation_view(_nav_state(objs, heading=3), attrs, mask)
    assert bool(vis[4]) and not bool(vis[0] & vis[1])
    np.testing.assert_allclose(np.asarray(geo[4]), [0, 1, 0.5, 1], atol=1e-6)


def test_assembly_view_positions_and_unknown_objects():
    heights = jnp.zeros((5, 4), jnp.int32).at[3, 1].set(1).at[0, 3].set(2)
    attrs = jnp.zeros((5, 4, 3), jnp.int32).at[3, 1].set(jnp.array([1, 2, 3]))
    state = env.reset_assembly(env.ASSEMBLY, heights)
    a, geo, vis = view.assembly_view(state, attrs, num_types=7)
    cell = 3 * env.GRID_ROWS + 1
    # (3, 1) from (2, 0) facing +z: one right, one ahead; (0, 3) holds objects of unknown looks
    # and stays hidden; the four walls are always seen, with their own type ids 8..11.
    assert bool(vis[cell]) and not bool(vis[0 * env.GRID_ROWS + 3])
    assert int(vis.sum()) == 1 + view.NUM_WALLS
    np.testing.assert_allclose(np.asarray(geo[cell]), [0.25, 0.25, 0.5, 1])
    np.testing.assert_array_equal(np.asarray(a[-4:, 2]), [8, 9, 10, 11])
    # Facing +x, the same cell is one ahead and one to the left; the far wall (+z) is to the left.
    turned = state.replace(heading=jnp.array(3))
    _, geo, _ = view.assembly_view(turned, attrs, num_types=7)
    np.testing.assert_allclose(np.asarray(geo[cell, :2]), [-0.25, 0.25], atol=1e-6)
    assert float(geo[20, 0]) < 0
