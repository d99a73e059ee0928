"""The natural-language guide and example extraction as section 4.2 (eq. 3) and the released code
define them, beside the earlier options: hand-computed attention, the separate action chain, the
shared mask head, short tourist utterances left out of the context, blocked FORWARDs as STAY."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.ttw_language import train as nl_train
from ttw_jax.talk_the_walk.language import models as nl_models
from ttw_jax.talk_the_walk.language import report as nl_report
from experiments.ttw_language.configs import default as nl_default
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.language import dialogues as td, evaluation as language
from ttw_jax.talk_the_walk.language.guide import NLGuide
from ttw_jax.talk_the_walk.language.losses import guide_loss, tourist_loss
from ttw_jax.talk_the_walk.language.tourist import NLTourist

pytestmark = pytest.mark.usefixtures("fast_compile")  # tiny models: compile fast

V, T_MAX, B, L = 12, 2, 4, 6
_, R_, F_ = td.ACTIONS


def guide_inputs(seed=0):
    r = np.random.default_rng(seed)
    message = r.integers(4, V, (B, L)).astype(np.int32)
    message_len = np.array([1, 3, 5, 6], np.int32)
    landmarks = r.integers(1, 11, (B, 4, 4, 2)).astype(np.int32)
    return message, message_len, landmarks


def init(model, seed=0):
    message, message_len, landmarks = guide_inputs(seed)
    return jax.jit(model.init)(jax.random.key(seed, impl="unsafe_rbg"), message, message_len,
                               landmarks)["params"]


@pytest.fixture(scope="module")
def default_guide():
    model = NLGuide(V, T_max=T_MAX, embed=4, hidden=3, features=4)
    return model, init(model)


# ------------------------------------------------------------------ a. attention scores h . c


def test_attention_weights_are_softmax_of_h_dot_c_by_hand():
    """h (1, 3, 2) set by hand; 2*hidden = 2. Hop 0 scores h . c_0 over the two valid tokens,
    hop 1 scores h . c_1 with c_1 = W [c_0; e_0] + b."""
    model = NLGuide(V, T_max=1, embed=4, hidden=1, features=4)
    params = init(model)
    params = dict(params, control0=jnp.array([2.0, 0.0]),
                  control_next={"kernel": jnp.zeros((4, 2)), "bias": jnp.array([0.0, 3.0])})
    h = jnp.array([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])
    valid = jnp.array([[True, True, False]])
    ext, att = model.apply({"params": params}, h, valid, method=lambda m, h, v: m.extract(
        h, v, 2, m.control0, m.control_next))
    e2 = np.exp(2.0)
    np.testing.assert_allclose(att[0, 0], [e2 / (e2 + 1), 1 / (e2 + 1), 0.0], rtol=1e-6)
    e3 = np.exp(3.0)
    np.testing.assert_allclose(att[0, 1], [1 / (e3 + 1), e3 / (e3 + 1), 0.0], rtol=1e-6)
    np.testing.assert_allclose(ext[0, 0], [e2 / (e2 + 1), 1 / (e2 + 1)], rtol=1e-6)
    # The earlier key projection: scores c . W h (here W swaps the two coordinates).
    keyed = model.clone(key_projection=True)
    kp = dict(init(keyed), control0=params["control0"], control_next=params["control_next"])
    kp["att_key"] = {"kernel": jnp.array([[0.0, 1.0], [1.0, 0.0]])}
    _, att_k = keyed.apply({"params": kp}, h, valid, method=lambda m, h, v: m.extract(
        h, v, 1, m.control0, m.control_next))
    np.testing.assert_allclose(att_k[0, 0], [1 / (1 + e2), e2 / (1 + e2), 0.0], rtol=1e-6)


def test_full_guide_attention_matches_the_bilstm_states(default_guide):
    """The guide's first observation and action hops equal softmax_valid(h . c_0) and
    softmax_valid(h . c_0^act) of its own BiLSTM states; no key map by default."""
    model, params = default_guide
    assert "att_key" not in params
    message, message_len, landmarks = guide_inputs()
    out = model.apply({"params": params}, message, message_len, landmarks)
    h = model.apply({"params": params}, message, message_len, method=lambda m, msg, n: m.encoder(
        m.word_emb(msg), seq_lengths=n)[1])
    valid = np.arange(L)[None] < message_len[:, None]
    for row, c in ((0, params["control0"]), (T_MAX + 1, params["act_control0"])):
        scores = np.where(valid, np.einsum("bld,d->bl", h, c), -np.inf)
        expected = np.exp(scores - scores.max(1, keepdims=True))
        expected /= expected.sum(1, keepdims=True)
        np.testing.assert_allclose(out["attention"][:, row], expected, rtol=1e-5, atol=1e-7)


# ------------------------------------------------------------------ b. the action chain


def test_actions_have_their_own_control_chain(default_guide):
    model, params = default_guide
    assert {"control0", "control_next", "act_control0", "act_control_next"} <= set(params)
    args = guide_inputs()
    att = lambda p: np.asarray(model.apply({"params": p}, *args)["attention"])
    base = att(params)
    assert base.shape == (B, 2 * T_MAX + 1, L)
    obs_rows, act_rows = slice(0, T_MAX + 1), slice(T_MAX + 1, None)
    moved_act = att(dict(params, act_control0=params["act_control0"] + 1.0))
    np.testing.assert_array_equal(moved_act[:, obs_rows], base[:, obs_rows])
    assert np.abs(moved_act[:, act_rows] - base[:, act_rows]).max() > 1e-4
    moved_obs = att(dict(params, control0=params["control0"] + 1.0))
    np.testing.assert_array_equal(moved_obs[:, act_rows], base[:, act_rows])
    assert np.abs(moved_obs[:, obs_rows] - base[:, obs_rows]).max() > 1e-4
    # The earlier shared chain: one control vector for both, so moving it moves the actions too.
    shared = model.clone(action_chain="shared")
    sp = init(shared)
    assert "act_control0" not in sp and "act_control_next" not in sp
    att_s = lambda p: np.asarray(shared.apply({"params": p}, *args)["attention"])
    moved = att_s(dict(sp, control0=sp["control0"] + 1.0))
    assert np.abs(moved[:, act_rows] - att_s(sp)[:, act_rows]).max() > 1e-4


# ------------------------------------------------------------------ c. the mask head


def test_one_mask_head_serves_every_step(default_guide):
    model, params = default_guide
    assert params["mask_linear"]["kernel"].shape == (6, 9)
    assert not [k for k in params if k.startswith("mask_") and k != "mask_linear"]
    a = jnp.arange(6.0)[None]
    logits = [model.apply({"params": params}, a, t, method=NLGuide.mask_logits)
              for t in range(T_MAX)]
    np.testing.assert_array_equal(logits[0], logits[1])
    np.testing.assert_allclose(logits[0], a @ params["mask_linear"]["kernel"]
                               + params["mask_linear"]["bias"], rtol=1e-6)
    per_step = model.clone(mask_head="per_step")
    pp = init(per_step)
    assert "mask_linear" not in pp and {"mask_0", "mask_1"} <= set(pp)
    l0, l1 = (per_step.apply({"params": pp}, a, t, method=NLGuide.mask_logits) for t in (0, 1))
    assert np.abs(np.asarray(l0) - np.asarray(l1)).max() > 1e-6


@pytest.mark.parametrize("key_projection,action_chain,mask_head,masc", [
    (False, "separate", "shared", True),     # the defaults (section 4.2, the released code)
    (True, "separate", "shared", True),      # each earlier option alone
    (False, "shared", "shared", True),
    (False, "separate", "per_step", True),
    (True, "shared", "per_step", True),      # the earlier guide
    (False, "separate", "shared", False)])   # no MASC: no action chain, no mask head
def test_guide_variants_shapes_and_gradients(key_projection, action_chain, mask_head, masc):
    model = NLGuide(V, T_max=T_MAX, embed=4, hidden=3, features=4, masc=masc,
                    key_projection=key_projection, action_chain=action_chain, mask_head=mask_head)
    params = init(model)
    assert ("att_key" in params) == key_projection
    assert ("act_control0" in params) == (masc and action_chain == "separate")
    assert ("mask_linear" in params) == (masc and mask_head == "shared")
    assert ("mask_0" in params) == (masc and mask_head == "per_step")
    message, message_len, landmarks = guide_inputs()
    batch = {"message": message, "message_len": message_len, "landmarks": landmarks,
             "target": np.array([0, 5, 10, 15], np.int32),
             "T": np.full((B,), T_MAX, np.int32)}
    out = model.apply({"params": params}, message, message_len, landmarks)
    assert out["logits"].shape == (B, 16) and out["logits_all"].shape == (B, T_MAX + 1, 16)
    assert out["attention"].shape == (B, (2 * T_MAX + 1) if masc else T_MAX + 1, L)
    grads = jax.grad(lambda p: guide_loss(model.apply, "fixed")(p, batch, None)[0])(params)
    for path, g in jax.tree_util.tree_leaves_with_path(grads):
        name = jax.tree_util.keystr(path)
        assert np.all(np.isfinite(g)), name
        if "T_head" not in name:
            assert np.abs(g).max() > 0, name


def test_unknown_guide_options_are_refused():
    for kwargs in ({"action_chain": "both"}, {"mask_head": "many"}):
        with pytest.raises(ValueError, match="must be one of"):
            init(NLGuide(V, T_max=T_MAX, embed=4, hidden=3, features=4, **kwargs))


# ------------------------------------------------------------------ d, e. example extraction


def episode(dialog):
    return {"neighborhood": "fidi", "boundaries": [0, 0, 3, 3], "start_location": [0, 2, 0],
            "target_location": [0, 3, 0],
            "dialog": [{"id": w, "text": t, "episode_done": False, "time": float(i)}
                       for i, (w, t) in enumerate(dialog)]}


def test_two_word_tourist_utterances_leave_the_context_guide_ones_stay():
    ep = episode([("Tourist", "i see a bank"), ("Guide", "go"), ("Tourist", "ok sure"),
                  ("Guide", td.EVALUATE), ("Guide", "ok"), ("Tourist", "now a bar here")])
    ex = td.utterance_examples([ep], context=3)
    assert [e["act"] for e in ex] == [0, 5]
    # "ok sure" (2 words) is dropped, the one-word guide utterances are kept
    assert ex[1]["message"] == [["Guide", "go"], ["Guide", "ok"], ["Tourist", "now a bar here"]]
    kept = td.utterance_examples([ep], context=3, drop_short_context=False)
    assert kept[1]["message"] == [["Tourist", "ok sure"], ["Guide", "ok"],
                                  ["Tourist", "now a bar here"]]


def test_blocked_forward_is_a_stay_and_observes_the_corner_again():
    # start (0, 2) facing north: FORWARD -> (0, 3); FORWARD blocked at max_y = 3; turn right,
    # FORWARD -> (1, 3)
    ep = episode([("Tourist", F_), ("Tourist", F_), ("Tourist", R_), ("Tourist", F_),
                  ("Tourist", "i see a shop here")])
    (ex,) = td.utterance_examples([ep])
    assert ex["moves"] == [0, td.STAY, 1] and td.MOVE_NAMES[td.STAY] == "STAY"
    assert ex["corners"] == [[0, 2], [0, 3], [0, 3], [1, 3]]
    (old,) = td.utterance_examples([ep], blocked_forward="move")
    assert old["moves"] == [0, 0, 1] and old["corners"] == ex["corners"]
    corners = np.zeros((8, 10, 1), np.int32)
    corners[0, 2], corners[0, 3], corners[1, 3] = 1, 2, 3
    nmap = maps.NeighborhoodMap("fidi", maps.BOUNDARIES["fidi"], corners)
    vocab = td.build_vocab(["i see a shop here"], min_count=1)
    arr = td.encode_examples([ex], {"fidi": nmap}, vocab, max_moves=3, utterance_len=8,
                             message_len=10)
    np.testing.assert_array_equal(arr["actions"][0], [0, td.STAY, 1])
    np.testing.assert_array_equal(arr["obs"][0, :, 0], [1, 2, 2, 3])


def test_tourist_embeds_the_stay_move():
    obs = jnp.ones((2, 3, 2), jnp.int32)
    actions = jnp.array([[td.STAY, 0], [1, td.STAY]], jnp.int32)
    inputs = jnp.ones((2, 4), jnp.int32)
    tourist = NLTourist(vocab_size=V, embed=4, hidden=4)
    assert tourist.num_actions == td.NUM_MOVE_IDS == 5
    params = tourist.init(jax.random.key(0), obs, actions, jnp.array([2, 2]), inputs)["params"]
    assert params["act_emb"]["embedding"].shape == (5, 4)
    batch = {"obs": obs, "actions": actions, "num_moves": jnp.array([2, 2]),
             "utterance": jnp.array([[6, 7, td.EOS, 0]] * 2), "utterance_len": jnp.array([3, 3])}
    g = jax.grad(lambda p: tourist_loss(tourist.apply)(p, batch, None)[0])(params)
    assert np.abs(g["act_emb"]["embedding"][td.STAY]).max() > 0      # STAY is learned
    assert np.abs(g["act_emb"]["embedding"][2:4]).max() == 0         # unused moves are not
    old = NLTourist(vocab_size=V, embed=4, hidden=4, num_actions=4)  # the earlier table
    old_params = old.init(jax.random.key(0), obs, actions % 4, jnp.array([2, 2]), inputs)
    assert old_params["params"]["act_emb"]["embedding"].shape == (4, 4)


# ------------------------------------------------------------------ trainer config


def test_defaults_are_the_released_choices_and_options_reach_the_models():
    c = nl_default.get_config()
    assert (c.guide.key_projection, c.guide.action_chain, c.guide.mask_head) == (
        False, "separate", "shared")
    assert c.data.drop_short_context is True and c.data.blocked_forward == "stay"
    assert c.eval.beam_sizes == "1,2,4,8"
    assert nl_models.build_tourist(c, V).num_actions == 5
    c.data.blocked_forward = "move"
    c.guide.key_projection, c.guide.action_chain, c.guide.mask_head = True, "shared", "per_step"
    assert nl_models.build_tourist(c, V).num_actions == 4
    g = nl_models.build_guide(c, V, True)
    assert (g.key_projection, g.action_chain, g.mask_head) == (True, "shared", "per_step")


@pytest.mark.parametrize("key,value", [("guide.action_chain", "both"),
                                       ("guide.mask_head", "all"),
                                       ("data.blocked_forward", "wall")])
def test_unknown_options_fail_before_any_work(tmp_path, key, value):
    c = nl_default.get_config()
    c.update_from_flattened_dict({key: value})
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        nl_train.train_and_evaluate(c, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_expected_T_by_hand():
    logits = jnp.log(jnp.array([[1.0, 3.0], [1.0, 1.0]]))   # p = (1/4, 3/4), (1/2, 1/2)
    np.testing.assert_allclose(language.expected_T(logits), [0.75, 0.5], rtol=1e-6)
    logits = jnp.log(jnp.array([[0.1, 0.2, 0.3, 0.4]]))
    np.testing.assert_allclose(language.expected_T(logits), [0.2 + 0.6 + 1.2], rtol=1e-6)


def test_format_results_shows_E_T_and_beam_sizes():
    split = lambda v: {s: v for s in maps.SPLITS}
    res = {"vocab_size": 10, "examples": split(5), "tourist": {"valid": {"ce": 1.0,
                                                                       "token_accuracy": 0.5}},
           "human": {"c1_masc": {**split(0.25), "expected_T": split(1.234)}},
           "generated": {"T0": {**split({d: 0.5 for d in language.DECODES}),
                                "beam_sizes": split({"1": 0.4, "8": 0.3})}},
           "full_task": {}}
    text = nl_report.format_results(res)
    assert "E[T] 1.23 (test)" in text
    assert "generated T0 beam 8   0.300 / 0.300 / 0.300" in text
