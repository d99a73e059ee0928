"""Rendered views of synthetic cities (`ttw_jax.arramon.render`): a hand-placed object drawn in
its cell, the nearest-recorded perception identical to the true one along the demonstration
(so teacher forcing sees the release's views) and different off it, and a V/L run reporting
both perceptions."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.arramon import proxy_bias, train
from experiments.arramon.configs import default
from tests.conftest import xla_optimizations
from ttw_jax.arramon import env, episodes as ae, render, synthetic as syn
from ttw_jax.arramon.evaluation import METRICS
from ttw_jax.arramon.episodes import assembly_start, navigation_start
from ttw_jax.core.env import rollout
from ttw_jax.core.vocab import Vocabulary

NUM_ATTRS = train.NUM_ATTRS


def _codes(width=16):
    return jnp.asarray(render.codebook(NUM_ATTRS, width, seed=3))


def test_an_object_is_drawn_in_the_cell_of_its_bearing_and_distance():
    codes = _codes()
    objects = jnp.array([[3.0, 0.0, 0.0], [0.0, 0.0, 30.0], [0.0, 0.0, 4.0]])  # (x, y, z)
    state = env.reset_navigation(None, jnp.zeros(2), jnp.float32(0.0), objects,
                                 jnp.array([True, True, True]), jnp.int32(0), jnp.int32(0))
    attrs = jnp.array([[1, 2, 3], [2, 2, 2], [4, 1, 1]], jnp.int32)
    mask = jnp.array([True, True, False])                   # the third is padding
    f = render.render_navigation(state, attrs, mask, codes, NUM_ATTRS)
    # Heading 0 faces +z; the object at x = 3 is 90 degrees right: outside the 120-degree
    # view; the one at z = 30 is beyond the 12-unit range; the third is not real. Nothing drawn.
    assert float(jnp.abs(f).sum()) == 0.0
    # Facing +x (heading 3): the first object is straight ahead at distance 3: column 3 of 7
    # (bearing 0 in [-60, 60] degrees), row floor(3 / 12 * 7) = 1.
    f = render.render_navigation(state.replace(heading=jnp.int32(3)), attrs, mask, codes,
                                 NUM_ATTRS)
    p, c, _ = NUM_ATTRS
    expected = codes[1] + codes[p + 2] + codes[p + c + 3]
    np.testing.assert_allclose(f[1 * 7 + 3], expected, rtol=1e-6)
    assert float(jnp.abs(f).sum()) == pytest.approx(float(jnp.abs(expected).sum()), rel=1e-5)


@pytest.fixture(scope="module")
def demo():
    recs = syn.synthetic_instances(6, seed=4)
    vocab = Vocabulary.build(s for r in recs for k in ("navi_inst_gt", "assem_inst_gt")
                             for s in r["instructions"][k])
    walk, index = ae.walkable_for(recs)
    ep = ae.episodes(recs, vocab, 200, 8, index)
    ep.update(render.demonstration_keys(walk, ep))
    return walk, ep


def _turn(ep, t):
    ex = ae.turn_examples({k: v for k, v in ep.items() if k not in render.DEMO_KEYS})
    n = len(ep["psi0"])
    rows = slice(t * n, (t + 1) * n)
    turn = {k: jnp.asarray(v[rows]) for k, v in ex.items()}
    turn.update({k: jnp.asarray(ep[k][:, t]) for k in render.DEMO_KEYS})
    return turn


def _views(walk, batch, perceive, actions=None, key=None):
    """[T, B, 49, D] views along a navigation rollout (the demonstration, or random steps)."""
    nav, _ = perceive
    view = nav(batch)

    def policy(carry, state, t, k):
        f, _ = view(state)
        if actions is None:
            a = jax.random.randint(k, (f.shape[0],), 0, 3)        # never PICK: keep walking
        else:
            a = actions[:, t]
        return carry, a, f
    _, _, traj = rollout(env.step_navigation, walk, navigation_start(walk, batch), policy, None,
                         key if key is not None else jax.random.key(0),
                         batch["navi_actions"].shape[1])
    return traj.output


def _assembly_views(batch, perceive):
    _, assem = perceive
    view = assem(batch)

    def policy(carry, state, t, k):
        return carry, batch["assem_actions"][:, t], view(state)[0]
    _, _, traj = rollout(env.step_assembly, env.ASSEMBLY, assembly_start(env.ASSEMBLY, batch),
                         policy, None, jax.random.key(0), batch["assem_actions"].shape[1])
    return traj.output


def test_nearest_recorded_view_is_the_true_view_on_the_demonstration_only(demo):
    walk, ep = demo
    codes = render.codebook(NUM_ATTRS, 32, seed=0)
    true = render.perception(codes, NUM_ATTRS, train.NUM_TYPES, "true")
    proxy = render.perception(codes, NUM_ATTRS, train.NUM_TYPES, "nearest_recorded")
    for t in range(2):
        batch = _turn(ep, t)
        length = np.asarray(batch["navi_len"])
        on = np.arange(batch["navi_actions"].shape[1])[:, None] < length[None]     # [T, B]
        a = _views(walk, batch, true, batch["navi_actions"])
        b = _views(walk, batch, proxy, batch["navi_actions"])
        np.testing.assert_allclose(np.asarray(a)[on], np.asarray(b)[on], atol=1e-5)
        assert np.abs(np.asarray(a)[on]).sum() > 0          # objects are seen on the way
        on = (np.arange(batch["assem_actions"].shape[1])[:, None]
              < np.asarray(batch["assem_len"])[None])
        a, b = _assembly_views(batch, true), _assembly_views(batch, proxy)
        np.testing.assert_allclose(np.asarray(a)[on], np.asarray(b)[on], atol=1e-5)
    # A random walk leaves the demonstration: the proxy then shows other views.
    batch = _turn(ep, 0)
    a = _views(walk, batch, true, key=jax.random.key(1))
    b = _views(walk, batch, proxy, key=jax.random.key(1))
    assert np.abs(np.asarray(a) - np.asarray(b)).max() > 1.0


def test_rendered_views_only_on_synthetic_cities(tmp_path):
    c = default.get_config()
    c.data.rendered_views, c.data.tfds_config = True, "english"
    with pytest.raises(ValueError, match="data.rendered_views renders synthetic cities"):
        train.train_and_evaluate(c, str(tmp_path))


@pytest.mark.slow
def test_a_rendered_run_reports_the_true_view_and_the_proxy(tfds_dir, tmp_path):
    c = default.get_config()
    c.data.tfds_dir = tfds_dir
    c.data.rendered_views, c.data.render_width = True, 64
    c.model.embed_dim, c.model.action_dim, c.model.hidden = 16, 8, 32
    c.batch_size, c.num_steps, c.eval_every, c.log_every = 8, 2, 2, 1
    c.num_devices = 1
    c.data.dev_split = c.data.eval_splits = "val_unseen"
    c.eval.horizon, c.eval.batch_size, c.eval.num_figures = 16, 200, 0
    c.eval.perfect_navigation, c.eval.baselines = False, ""
    with xla_optimizations(False):
        res = train.train_and_evaluate(c, str(tmp_path))
    rows = res["val_unseen"]
    true, proxy = rows["vl"], rows[f"vl_{train.NEAREST_POSE['name']}"]
    assert set(true) == set(proxy)
    assert any(true[k] != proxy[k] for k in ("navi_ndtw", "assem_ndtw", "ctc7"))
    perception = res["provenance"]["perception"]
    assert perception == {"kind": "synthetic", "seed": 0, "width": 64}
    assert res["provenance"]["protocol"]["name"] == "official"


def test_the_proxy_bias_table_pairs_each_seed_by_hand(tmp_path):
    proxy_name = f"vl_{train.NEAREST_POSE['name']}"
    for seed, (true, proxy) in enumerate(((0.2, 0.3), (0.4, 0.4))):
        rows = {split: {"vl": dict.fromkeys(METRICS, true),
                        proxy_name: dict.fromkeys(METRICS, proxy)} for split in proxy_bias.SPLITS}
        res = {"agent": "vl", "config": {"seed": seed}, **rows,
               "provenance": {"code": {"revision": "abc"}}}
        (tmp_path / f"s{seed}").mkdir()
        (tmp_path / f"s{seed}" / "results.json").write_text(json.dumps(res))
    s = proxy_bias.summarize([str(tmp_path)])["agents"]["vl"]
    cell = s["val_unseen"]["navi_ndtw"]
    # true 0.2, 0.4 -> 0.3 +- 0.1; proxy 0.3, 0.4 -> 0.35 +- 0.05; paired 0.1, 0.0 -> 0.05 +- 0.05
    assert cell["true"] == pytest.approx([0.3, 0.1])
    assert cell["proxy"] == pytest.approx([0.35, 0.05])
    assert cell["diff"] == pytest.approx([0.05, 0.05])
    assert s["seeds"] == [0, 1] and s["revisions"] == ["abc"]
    table = proxy_bias.markdown({"agents": {"vl": s}}).splitlines()
    assert table[4].startswith("| vl, val_seen, proxy - true | 0.050 ± 0.050 |")
    with pytest.raises(FileNotFoundError, match="no s<seed>/results.json"):
        proxy_bias.summarize([str(tmp_path / "missing")])
