"""The cascaded ArraMon task (`evaluation.arramon.make_task_rollout`) replaying the ground truth of
every val_seen instance, and the egocentric views on hand-made scenes."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.conftest import shared_path
from ttw_jax.arramon import env, episodes as ae, evaluation as arr_eval, views as view
from ttw_jax.core.vocab import Vocabulary


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
    gold = (arr_eval.gold_navigation_factory, arr_eval.gold_assembly_factory)
    res = arr_eval.evaluate(arr_eval.make_task_rollout(gold), walk, None, ep, jax.random.key(0),
                            batch_size=1065)
    per = res["episodes"]
    for t in range(2):
        np.testing.assert_allclose(per[f"navi_ndtw_{t}"], 1.0, atol=1e-4)
        np.testing.assert_allclose(per[f"assem_ndtw_{t}"], 1.0, atol=1e-6)
        # The agent's own pick-up of the right object in all 2,130 turns (objects have an
        # extent; as points, 14 would be out of reach), within the gold number of steps, and
        # turn 2 starts from turn 1's own end state.
        np.testing.assert_array_equal(per[f"navi_steps_{t}"], ep["navi_len"][:, t])
        np.testing.assert_array_equal(per[f"placed_{t}"], ep["assem_target"][:, t])
        for rule in ("distance", "strict"):
            for k in arr_eval.RULE_METRICS:
                np.testing.assert_array_equal(per[f"{k}_{rule}_{t}"], 1.0, err_msg=(k, rule))
    assert all(res[k] == 1.0 for k in arr_eval.RULE_METRICS)
    # The paper's Table 6 set-up: the ground truth navigates, another policy (here the random
    # walk) assembles. Navigation is perfect; the assembly is not.
    perfect_nav = (arr_eval.gold_navigation_factory, arr_eval.random_factories()[1])
    sub = {k: v[:128] for k, v in ep.items()}
    res = arr_eval.evaluate(arr_eval.make_task_rollout(perfect_nav), walk, None, sub,
                            jax.random.key(1), batch_size=128)
    assert res["ctc0"] == res["ctc3"] == 1.0 and res["navi_ndtw"] == pytest.approx(1.0, abs=1e-4)
    assert res["ptc"] < 0.2 and res["assem_ndtw"] < 0.95


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
