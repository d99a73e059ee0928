"""RxR episode arrays: gold actions along the reference path, token alignment of timed words,
pose-trace masks per step, text features; view geometry and synthetic view features; the
grounding term of the mixed loss."""
import math

import jax
import jax.numpy as jnp
import ml_collections
import ml_dtypes
import numpy as np
import pytest

from ttw_jax.core.pano_graph import NodeTable, build_graph
from ttw_jax.core.vocab import TruncationWarning, Vocabulary
from ttw_jax.rxr import views
from ttw_jax.rxr.episodes import episodes, gold_actions, token_positions
from ttw_jax.rxr.graph import geodesic_table
from ttw_jax.rxr.losses import mixed_loss
from ttw_jax.rxr.rcm import RCMAgent

pytestmark = pytest.mark.usefixtures("fast_compile_unless_slow")  # tiny models


def square():
    """4 viewpoints of scan 's' on a 2 m square: a(0,0) b(0,2) c(2,2) d(2,0), linked around."""
    pos = np.asarray([[0, 0, 0], [0, 2, 0], [2, 2, 0], [2, 0, 0]], float)
    src, dst = [], []
    for i in range(4):
        for j in ((i + 1) % 4, (i - 1) % 4):
            src.append(i)
            dst.append(j)
    delta = pos[dst] - pos[src]
    heading = np.mod(np.arctan2(delta[:, 0], delta[:, 1]), 2 * math.pi)
    graph = build_graph(4, np.asarray(src), np.asarray(dst), heading.astype(np.float32),
                        np.linalg.norm(delta, axis=1), pos,
                        elevations=np.zeros(len(src), np.float32))
    return graph, NodeTable.from_ids([f"s/{v}" for v in "abcd"])


def record(**kw):
    r = dict(instruction_id=7, path_id=3, scan="s", path=["a", "b", "c"], heading=0.25,
             instruction="Go north, then turn right.", language="en-US", annotator="guide",
             timed_words=[],
             step_words=None, step_views=None, text_features=None)
    r.update(kw)
    return r


def test_gold_actions_follow_the_reference_path():
    graph, nodes = square()
    # a's neighbours sorted by heading: b (0, north), d (pi/2, east); b's: c (pi/2), a (pi)
    assert gold_actions(graph, [0, 1, 2], "x") == [1, 1, 0]
    assert gold_actions(graph, [0, 3, 2], "x") == [2, 1, 0]   # d's: c (0), a (3pi/2)
    with pytest.raises(ValueError, match="instruction 9: .* not linked"):
        gold_actions(graph, [0, 2], "instruction 9")


def test_episode_arrays():
    graph, nodes = square()
    vocab = Vocabulary.build(["go north then turn right", "walk"])
    with pytest.warns(TruncationWarning, match="2 of 2 instructions .* more than 6 tokens "
                                               r"\(longest 7\)"):
        ep = episodes([record(), record(instruction_id=8, path=["c"], language="hi-IN")], nodes,
                      graph, vocab, ["en-US", "hi-IN"], max_tokens=6, max_path=4)
    np.testing.assert_array_equal(ep["path"], [[0, 1, 2, -1], [2, -1, -1, -1]])
    np.testing.assert_array_equal(ep["gold"], [[1, 1, 0, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(ep["path_len"], [3, 1])
    np.testing.assert_array_equal(ep["start"], [0, 2])
    np.testing.assert_array_equal(ep["language"], [0, 1])
    np.testing.assert_allclose(ep["heading"], [0.25, 0.25])
    # "go north , then turn right ." -> 7 tokens cut to 6, with a warning (see below)
    assert list(ep["token_len"]) == [6, 6]
    assert "word_mask" not in ep and "text_features" not in ep
    with pytest.raises(ValueError, match="exceeds max_path=2"):
        episodes([record()], nodes, graph, vocab, ["en-US"], 6, 2)
    with pytest.raises(ValueError, match="language 'te-IN'"):
        episodes([record(language="te-IN")], nodes, graph, vocab, ["en-US"], 6, 4)
    with pytest.raises(ValueError, match="instruction 9, field 'path': unknown viewpoint id "
                                         "'s/z' .*scan s"):
        episodes([record(instruction_id=9, path=["a", "z"])], nodes, graph, vocab, ["en-US"], 6, 4)


def test_token_positions_align_timed_words():
    text = "Go north, then turn right."
    # tokens: go north , then turn right .
    assert token_positions(text, ["Go", "north,", "then", "turn", "right."]) == [
        [0], [1, 2], [3], [4], [5, 6]]
    assert token_positions(text, ["go", "umm", "right"]) == [[0], [], [5]]


def test_pose_trace_masks_become_token_masks():
    graph, nodes = square()
    vocab = Vocabulary.build(["go north then turn right"])
    step_words = np.asarray([[1, 1, 0, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 0, 1]], bool)
    step_views = np.zeros((3, 36), bool)
    step_views[0, 12] = step_views[2, [15, 16]] = True
    rec = record(timed_words=["Go", "north,", "then", "turn", "right."], step_words=step_words,
                 step_views=step_views)
    ep = episodes([rec, record(instruction_id=9)], nodes, graph, vocab, ["en-US"], 8, 4)
    np.testing.assert_array_equal(ep["has_masks"], [True, False])
    np.testing.assert_array_equal(ep["has_word_mask"], [True, False])
    # b_t: the words spoken at or before step t (running OR; padded steps keep the last)
    np.testing.assert_array_equal(ep["word_mask"][0].astype(int), [
        [1, 1, 1, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1, 1, 1, 0]])
    assert not ep["word_mask"][1].any()
    np.testing.assert_array_equal(np.nonzero(ep["view_mask"][0])[1], [12, 15, 16])


def test_text_features_and_their_subword_masks():
    graph, nodes = square()
    vocab = Vocabulary.build(["go"])
    sub = np.zeros((3, 9), bool)
    sub[0, 0] = sub[1, [1, 2]] = sub[2, 8] = True      # subword 8 is cut (max_tokens 6)
    recs = [record(text_features=np.arange(15.0).reshape(3, 5)),
            record(text_features=np.ones((9, 5)), step_views=np.zeros((3, 36), bool),
                   step_subwords=sub)]
    with pytest.warns(TruncationWarning, match="1 of 2 instructions' text features"):
        ep = episodes(recs, nodes, graph, vocab, ["en-US"], 6, 4, text_features=True)
    assert ep["text_features"].shape == (2, 6, 5)
    assert ep["text_features"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(ep["text_features"][0, :3].astype(np.float32),
                                  np.arange(15.0).reshape(3, 5))
    assert list(ep["token_len"]) == [3, 6] and ep["text_features"][0, 3:].sum() == 0
    assert not ep["tokens"].any()                      # the features replace the words
    np.testing.assert_array_equal(ep["has_word_mask"], [False, True])
    np.testing.assert_array_equal(ep["word_mask"][1, :3].astype(int), [
        [1, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0], [1, 1, 1, 0, 0, 0]])
    # asked for and missing: refused, naming the instruction
    with pytest.raises(ValueError, match=r"1 of 2 instructions have no text features .*, e.g. "
                                         r"instruction_id \[9\]"):
        episodes([recs[0], record(instruction_id=9)], nodes, graph, vocab, ["en-US"], 6, 4,
                 text_features=True)
    # present but not asked for: the words are used
    ep = episodes(recs[:1], nodes, graph, vocab, ["en-US"], 8, 4)
    assert "text_features" not in ep and ep["token_len"][0] == 7


def test_view_geometry():
    assert views.NUM_VIEWS == 36
    assert int(views.nearest_view(0.0, 0.0)) == 12
    assert int(views.nearest_view(math.radians(44), math.radians(-89))) == 1
    assert int(views.nearest_view(math.radians(359), math.radians(29))) == 24
    h, e = jnp.asarray([math.radians(95.0)]), jnp.asarray([0.0])
    assert int(views.nearest_view(h, e)[0]) == 15
    np.testing.assert_allclose(np.asarray(views.angle_features(math.pi / 2, 0.0)), [1, 0, 0, 1],
                               atol=1e-7)


def test_synthetic_view_features_show_each_neighbour_in_its_view():
    graph, _ = square()
    landmarks = np.asarray([0, 1, 2, 3])
    f = views.synthetic_view_features(graph, landmarks, 4, 16, noise=0.0, seed=0)
    assert f.shape == (4, 36, 16)
    # from a: b is north (view 12), d is east (view 15); the embeddings are unit vectors
    emb_b, emb_d = f[0, 12], f[0, 15]
    assert abs(np.linalg.norm(emb_b) - 1) < 1e-6 and abs(np.linalg.norm(emb_d) - 1) < 1e-6
    np.testing.assert_allclose(f[2, 18], f[0, 15])   # c sees d to the south (view 18)
    assert np.abs(np.delete(f[0], [12, 15], axis=0)).sum() == 0


def test_grounding_loss_enters_the_mixed_loss():
    graph, nodes = square()
    vocab = Vocabulary.build(["go north then turn right"])
    sw = np.eye(3, 5, dtype=bool)
    sv = np.zeros((3, 36), bool)
    sv[:, 12] = True
    ep = episodes([record(timed_words=["go", "north", "then", "turn", "right"], step_words=sw,
                          step_views=sv)] * 2, nodes, graph, vocab, ["en-US"], 8, 4)
    model = RCMAgent(len(vocab), 8, 16)
    params = jax.jit(model.init)(jax.random.key(0), jnp.ones((2, 3), jnp.int32), jnp.full((2,), 3),
                                 jnp.zeros((2, 36, 4)), jnp.zeros((2, graph.max_degree, 6)),
                                 jnp.ones((2, graph.max_degree), bool))
    keys = ("start", "heading", "path", "path_len", "gold", "tokens", "token_len", "word_mask",
            "view_mask", "has_masks", "has_word_mask")
    batch = {k: jnp.asarray(ep[k]) for k in keys}
    consts = (jax.device_put(graph), jnp.zeros((4, 36, 0)),
              jax.device_put(geodesic_table(graph, np.zeros(4, np.int32))))
    cfg = dict(horizon=4, bc_every=1, gamma=0.9, stop_reward=1.0, entropy_weight=0.0,
               success_radius=3.0, grounding_steps="cloned")

    def run(**kw):
        loss = mixed_loss(model, ml_collections.ConfigDict(dict(cfg, **kw)))
        return jax.jit(loss)(params, batch, jax.random.key(0), *consts)
    l1, m1 = run(visual_grounding=1.0, textual_grounding=1.0)
    l0, m0 = run(visual_grounding=0.0, textual_grounding=0.0)
    assert "grounding_loss" in m1 and "grounding_loss" not in m0
    assert float(m1["grounding_loss"]) > 0
    np.testing.assert_allclose(float(l1 - l0), float(m1["grounding_loss"]), rtol=1e-5)
    # each attention has its own weight; their losses add up to the combined one
    lv, mv = run(visual_grounding=2.0, textual_grounding=0.0)
    lt, mt = run(visual_grounding=0.0, textual_grounding=1.0)
    assert "textual_grounding_loss" not in mv and "visual_grounding_loss" not in mt
    np.testing.assert_allclose(float(lv - l0), 2 * float(mv["visual_grounding_loss"]), rtol=1e-5)
    np.testing.assert_allclose(float(mv["visual_grounding_loss"] + mt["textual_grounding_loss"]),
                               float(m1["grounding_loss"]), rtol=1e-5)
    # every row cloned: the cloned rows' steps are the steps on the gold path
    lg, mg = run(visual_grounding=1.0, textual_grounding=1.0, grounding_steps="on_gold_path")
    np.testing.assert_allclose(float(lg), float(l1), rtol=1e-6)
    # no row cloned: "cloned" grounds nothing, "on_gold_path" at least the start (step 0)
    _, mc = run(visual_grounding=1.0, textual_grounding=0.0, bc_every=0)
    _, mo = run(visual_grounding=1.0, textual_grounding=0.0, bc_every=0,
                grounding_steps="on_gold_path")
    assert float(mc["visual_grounding_loss"]) == 0 and float(mo["visual_grounding_loss"]) > 0


def test_on_the_gold_path_until_the_agent_first_leaves_it():
    from ttw_jax.rxr.losses import on_gold_path
    path = jnp.asarray([[0, 1, 2, -1], [5, 6, -1, -1], [7, 8, 9, -1]])           # [B=3, R=4]
    path_len = jnp.asarray([3, 2, 3])
    nodes = jnp.asarray([[0, 5, 7], [1, 6, 3], [2, 6, 9], [2, 6, 9], [2, 6, 9]])   # [T=5, B]
    done = jnp.asarray([[0, 0, 0], [0, 0, 0], [0, 1, 0], [1, 1, 0], [1, 1, 0]], bool)
    on = on_gold_path(nodes, path, path_len, done)
    # row 0 follows the path, stops after step 2; row 1 stops at its goal at step 1; row 2
    # leaves the path at step 1 (node 3) and comes back at step 2: not on it any more
    np.testing.assert_array_equal(np.asarray(on), np.asarray(
        [[1, 1, 1], [1, 1, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0]], bool))


def test_evaluation_keeps_the_guides_and_groups_results_as_the_paper():
    from ttw_jax.rxr.dataset import evaluated_records
    from ttw_jax.rxr.evaluation import group_means, language_group
    recs = [record(instruction_id=1), record(instruction_id=1, annotator="follower"),
            record(instruction_id=2, annotator="r2r")]
    assert [(r["instruction_id"], r["annotator"]) for r in evaluated_records(recs, ["guide"])] \
        == [(1, "guide"), (2, "r2r")]
    assert [r["annotator"] for r in evaluated_records(recs, ["follower"])] == ["follower", "r2r"]
    assert len(evaluated_records(recs, ["guide", "follower"])) == 3
    with pytest.raises(ValueError, match="non-empty subset"):
        evaluated_records(recs, ["leader"])
    assert [language_group(x) for x in ("en-IN", "en-US", "hi-IN", "te-IN", "en")] == \
        ["en", "en", "hi", "te", "en"]
    # SR 1, 0, 1, 0 on en-IN, en-US, en-US, hi-IN: en = (1 + 0 + 1) / 3, hi = 0
    per = {k: np.asarray([1.0, 0.0, 1.0, 0.0]) for k in ("pl", "ne", "sr", "spl", "ndtw", "sdtw")}
    groups = np.asarray(["en", "en", "en", "hi"])
    got = group_means(per, groups, ["en", "hi", "te"])
    assert set(got) == {"en", "hi"} and got["en"]["sr"] == pytest.approx(2 / 3)
    assert got["hi"]["ndtw"] == 0.0


def test_an_unknown_viewpoint_names_where_the_record_comes_from():
    graph, nodes = square()
    vocab = Vocabulary.build(["walk"])
    with pytest.raises(ValueError, match=r"^R2R_val_seen.json: entry 4: instruction 9, field "
                                         r"'path': unknown viewpoint id 's/z'"):
        episodes([record(instruction_id=9, path=["a", "z"])], nodes, graph, vocab, ["en-US"], 6,
                 4, locate=lambda rec: "R2R_val_seen.json: entry 4")
