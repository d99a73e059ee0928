"""The released code's natural-language settings: `configs/paper.py` against the released argparse
defaults, the guide's T head on the last token and its map scored without an observation
projection, the tourist's decoder and context sizes, orientation-aware examples, and both labels
and the orientation-aware tourist through the whole trainer (slow). Fresh message randomness at
every full-task step is tested in `test_language_train.py`."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.ttw_language import train as nl_train
from ttw_jax.talk_the_walk.language import training_data as nl_data
from ttw_jax.talk_the_walk.language import models as nl_models
from experiments.ttw_language.configs import default as nl_default, paper as nl_paper
from tests.conftest import xla_optimizations
from tests.experiments.trainers import TRAINERS
from ttw_jax.talk_the_walk import env as grid, maps
from ttw_jax.talk_the_walk.language import dialogues as td
from ttw_jax.talk_the_walk.language.guide import NLGuide
from ttw_jax.talk_the_walk.language.tourist import NLTourist, sample_decode

pytestmark = pytest.mark.usefixtures("fast_compile")  # tiny models: compile fast

V, B, L = 12, 4, 6
L_, R_, F_ = td.ACTIONS


def shapes(tree) -> dict:
    return {jax.tree_util.keystr(p): tuple(v.shape)
            for p, v in jax.tree_util.tree_leaves_with_path(tree)}


# ------------------------------------------------------------------ configs/paper.py


def test_paper_config_is_the_released_defaults():
    c = nl_paper.get_config()
    # ttw/train/predict_location_language.py (the human-utterance guide)
    assert c.guide.T_max == 2                 # --T, default 2
    assert c.guide.embed == 128               # --embed-sz, default 128
    assert 2 * c.guide.hidden == 256          # --hidden-sz, default 256, split over the two
                                              # directions: ttw/models/language.py GuideLanguage
                                              # nn.LSTM(inp_emb_sz, hidden_sz // 2,
                                              #         bidirectional=True)
    assert c.guide.features == 256            # GuideLanguage CBoW(11, hidden_sz), MASC(hidden_sz)
    assert c.guide.T_input == "last_token"    # T_prediction_fn(hidden_states[.., last index])
    assert c.guide.obs_projection is False    # torch.bmm(landmarks, tourist_obs_msg), no Linear
    assert c.guide.batch_size == 512          # --batch-sz, default 512
    # ttw/train/predict_location_generated.py (the generated-utterance guides)
    assert c.generated.T_max == 3             # GuideLanguage(128, 256, ..., apply_masc=True, T=3)
    assert c.generated.batch_size == 512      # --batch-sz, default 512
    # ttw/train/train_tourist.py (TouristLanguage)
    assert c.tourist.embed == 128             # --act-emb-sz, --obs-emb-sz, --decoder-emb-sz: 128
    assert c.tourist.hidden == 128            # --act-hid-sz, --obs-hid-sz, default 128
    assert c.tourist.decoder_hidden == 1024   # --decoder-hid-sz, default 1024
    assert c.tourist.context_features == 128  # context_linear: Linear(act_hid_sz + obs_hid_sz,
                                              # decoder_emb_sz = 128)
    assert c.tourist.batch_size == 128        # --batch-sz, default 128
    # the budgets: train_tourist.py range(1, --num-epochs 100); predict_location_language.py
    # --num-epochs 50; predict_location_generated.py --num-epochs 20; pg keeps ours (steps)
    assert (c.tourist.num_epochs, c.guide.num_epochs, c.generated.num_epochs) == (99, 50, 20)
    assert c.pg.num_epochs == 0
    assert c.data.vocab == "released"         # ttw/dict.py's dict.txt, min_freq 3
    assert c.data.min_count == 3
    # every released optimizer is optim.Adam(params): PyTorch's default learning rate
    assert c.tourist.learning_rate == c.guide.learning_rate == c.generated.learning_rate == 1e-3
    c.data.manual_dir = "/path/to/talkthewalk/data"   # the release (checked: named, not read)
    nl_train.check_config(c)                           # the sizes are consistent


def test_paper_config_needs_the_release(tmp_path):
    """The paper's data are the release's human dialogues: without them the run is refused
    before anything is written, naming the files."""
    c = nl_paper.get_config()
    assert c.data.tfds_config == "real"
    with pytest.raises(ValueError, match=r"data.tfds_config='real' reads talkthewalk.train.json, "
                                         r"talkthewalk.valid.json, talkthewalk.test.json and "
                                         r"<nbh>/map.json from data.manual_dir, which is empty"):
        nl_train.train_and_evaluate(c, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_paper_sizes_reach_the_models():
    c = nl_paper.get_config()
    human, generated = (nl_models.build_guide(c, V, True, generated=g) for g in (False, True))
    assert (human.T_max, generated.T_max) == (2, 3)
    g = shapes(jax.eval_shape(lambda k: nl_models.init_guide(human, k, 7, 3), jax.random.key(0)))
    assert g["['word_emb']['embedding']"] == (V, 128)
    assert g["['encoder']['forward_rnn']['cell']['ii']['kernel']"] == (128, 128)
    assert g["['encoder']['backward_rnn']['cell']['hi']['kernel']"] == (128, 128)
    assert g["['T_head']['kernel']"] == (256, 3)
    assert g["['map_emb']['Embed_0']['embedding']"] == (maps.NUM_LANDMARK_IDS, 256)
    assert g["['conv']['kernel']"] == (9, 256, 256)
    assert not [k for k in g if "obs_proj" in k]
    tourist = nl_models.build_tourist(c, V)
    obs, act = jnp.ones((2, 3, 3), jnp.int32), jnp.zeros((2, 2), jnp.int32)
    t = shapes(jax.eval_shape(lambda k: tourist.init(k, obs, act, jnp.array([2, 2]),
                                                     jnp.ones((2, 4), jnp.int32)),
                              jax.random.key(0)))
    assert t["['params']['word_emb']['embedding']"] == (V, 128)
    assert t["['params']['obs_emb']['Embed_0']['embedding']"] == (maps.NUM_LANDMARK_IDS, 128)
    assert t["['params']['act_emb']['embedding']"] == (td.NUM_MOVE_IDS, 128)
    assert t["['params']['obs_rnn']['cell']['hi']['kernel']"] == (128, 128)
    assert t["['params']['act_rnn']['cell']['hi']['kernel']"] == (128, 128)
    assert t["['params']['context_proj']['kernel']"] == (256, 128)
    assert t["['params']['decoder']['cell']['ii']['kernel']"] == (128 + 128, 1024)
    assert t["['params']['decoder']['cell']['hi']['kernel']"] == (1024, 1024)
    assert t["['params']['out']['kernel']"] == (1024, V)


def test_default_config_keeps_this_projects_choices():
    c = nl_default.get_config()
    assert (c.guide.T_input, c.guide.obs_projection) == ("final_states", True)
    assert (c.tourist.decoder_hidden, c.tourist.context_features) == (0, 0)
    assert c.generated.T_max == c.guide.T_max == 3
    assert (c.data.label, c.data.orientation_aware) == ("final", False)
    tourist = nl_models.build_tourist(c, V)
    assert (tourist.decoder_size, tourist.context_features) == (c.tourist.hidden, 0)
    c.data.orientation_aware = True
    assert nl_models.build_tourist(c, V).num_actions == grid.NUM_ACTIONS == 7


@pytest.mark.parametrize("key,value,match", [
    ("data.label", "end", r"data\.label must be one of"),
    ("guide.T_input", "first", r"guide\.T_input must be one of"),
    ("guide.obs_projection", False, r"guide\.obs_projection=False needs"),
    ("generated.T_max", 2, r"generated\.T_max = 2 is below the walk length\(s\) \[3\]"),
    ("data.vocab", "mine", r"data\.vocab must be one of \('ours', 'released'\)")])
def test_inconsistent_options_fail_before_any_work(tmp_path, key, value, match):
    c = nl_default.get_config()   # features 64, hidden 64: no room for obs_projection=False
    c.update_from_flattened_dict({key: value})
    with pytest.raises(ValueError, match=match):
        nl_train.train_and_evaluate(c, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------ the guide's released options


def guide_inputs(seed=0):
    r = np.random.default_rng(seed)
    return (r.integers(4, V, (B, L)).astype(np.int32), np.array([1, 3, 5, 6], np.int32),
            r.integers(1, 11, (B, 4, 4, 2)).astype(np.int32))


def init(model, seed=0):
    return jax.jit(model.init)(jax.random.key(seed), *guide_inputs(seed))["params"]


def encoder_states(model, params, message, message_len):
    return model.apply({"params": params}, message, message_len, method=lambda m, msg, n: m.encoder(
        m.word_emb(msg), seq_lengths=n)[1])


def test_T_head_reads_the_last_tokens_states_or_the_final_ones():
    message, message_len, landmarks = guide_inputs()
    rows = np.arange(B)
    for T_input in ("last_token", "final_states"):
        model = NLGuide(V, T_max=2, embed=4, hidden=3, features=4, T_input=T_input)
        params = init(model)
        h = np.asarray(encoder_states(model, params, message, message_len))   # (B, L, 6)
        if T_input == "last_token":   # both directions at the last token
            x = h[rows, message_len - 1]
        else:                         # forward at the last token, backward at the first
            x = np.concatenate([h[rows, message_len - 1, :3], h[:, 0, 3:]], axis=-1)
        out = model.apply({"params": params}, message, message_len, landmarks)
        expected = x @ params["T_head"]["kernel"] + params["T_head"]["bias"]
        np.testing.assert_allclose(out["T_logits"], expected, rtol=1e-5, atol=1e-6)


def test_without_observation_projection_the_extractions_score_the_map():
    """At T = 0 no MASC step is involved: logits[c] = <sig(g_0) * u_c, sig(g'_0) * e_0>, e_0 the
    first observation hop over the BiLSTM states, u_c the map's bag of landmark embeddings."""
    model = NLGuide(V, T_max=1, embed=4, hidden=3, features=6, obs_projection=False)
    params = init(model)
    assert "obs_proj" not in params
    message, message_len, landmarks = guide_inputs()
    out = model.apply({"params": params}, message, message_len, landmarks, T=np.zeros(B, np.int32))
    h = np.asarray(encoder_states(model, params, message, message_len))
    e0 = np.einsum("bl,bld->bd", np.asarray(out["attention"][:, 0]), h)
    u = np.asarray(model.apply({"params": params}, landmarks,
                               method=lambda m, lm: m.map_emb(lm))).reshape(B, 16, 6)
    sig = lambda x: 1 / (1 + np.exp(-np.asarray(x)))
    expected = np.einsum("bcf,bf->bc", u * sig(params["map_gates"][0]),
                         e0 * sig(params["obs_gates"][0]))
    np.testing.assert_allclose(out["logits"], expected, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="features must be 6, got 4"):
        init(model.clone(features=4))


# ------------------------------------------------------------------ the tourist's released sizes


def test_tourist_decoder_and_context_are_sized_apart():
    tourist = NLTourist(vocab_size=V, embed=4, hidden=3, decoder_hidden=7, context_features=5)
    obs, actions = jnp.ones((B, 3, 2), jnp.int32), jnp.zeros((B, 2), jnp.int32)
    num_moves = jnp.array([0, 1, 2, 2])
    params = jax.jit(tourist.init)(jax.random.key(0), obs, actions, num_moves,
                                   jnp.ones((B, 4), jnp.int32))["params"]
    p = shapes(params)
    assert p["['context_proj']['kernel']"] == (6, 5)
    assert p["['decoder']['cell']['ii']['kernel']"] == (4 + 5, 7)
    ctx = tourist.apply({"params": params}, obs, actions, num_moves, method=NLTourist.context)
    assert ctx.shape == (B, 5)
    c, h = tourist.apply({"params": params}, ctx, method=NLTourist.init_carry)
    assert c.shape == h.shape == (B, 7)
    tokens, lengths = sample_decode(tourist, params, obs, actions, num_moves, jax.random.key(1), 5)
    assert tokens.shape == (B, 5) and bool(jnp.all((lengths >= 1) & (lengths <= 5)))


# ------------------------------------------------------------------ orientation-aware examples


def episode(dialog, start=(0, 2, 0)):
    return {"neighborhood": "fidi", "boundaries": [0, 0, 3, 3], "start_location": list(start),
            "target_location": [0, 3, 0],
            "dialog": [{"id": w, "text": t, "episode_done": False, "time": float(i)}
                       for i, (w, t) in enumerate(dialog)]}


def test_orientation_aware_examples_keep_every_action_and_see_as_the_full_task_tourist():
    # start (0, 2) facing N; turn right (E); FORWARD -> (1, 2); turn left (N); FORWARD -> (1, 3);
    # FORWARD blocked at max_y = 3
    ep = episode([("Tourist", R_), ("Tourist", F_), ("Tourist", L_), ("Tourist", F_),
                  ("Tourist", F_), ("Tourist", "i see a bar and a shop")])
    (aware,) = td.utterance_examples([ep], orientation_aware=True)
    assert aware["moves"] == [grid.TURNRIGHT, grid.FORWARD, grid.TURNLEFT, grid.FORWARD,
                              grid.FORWARD]
    assert aware["corners"] == [[0, 2], [0, 2], [1, 2], [1, 2], [1, 3], [1, 3]]
    assert aware["orientations"] == [0, 1, 1, 0, 0, 0]
    (agnostic,) = td.utterance_examples([ep])
    assert agnostic["moves"] == [1, 0, td.STAY] and agnostic["orientations"] == [0, 1, 0, 0]
    assert [td.move_names(True)[a] for a in aware["moves"]] == [
        "TURNRIGHT", "FORWARD", "TURNLEFT", "FORWARD", "FORWARD"]

    corners = np.zeros((8, 10, 2), np.int32)
    corners[..., 0] = maps.EMPTY_ID
    corners[0, 2], corners[1, 2], corners[1, 3] = [1, 2], [3, 0], [4, 5]
    nmap = maps.NeighborhoodMap("fidi", maps.BOUNDARIES["fidi"], corners)
    vocab = td.build_vocab(["i see a bar and a shop"], min_count=1)
    arr = td.encode_examples([aware], {"fidi": nmap}, vocab, max_moves=5, utterance_len=8,
                             message_len=10, orientation_aware=True)
    np.testing.assert_array_equal(arr["actions"][0], aware["moves"])
    # SW corner (0, 2) is seen facing S or W, SE (1, 2) facing E or S, NE (1, 3) facing N or E
    empty = [maps.EMPTY_ID, 0]
    np.testing.assert_array_equal(arr["obs"][0], [empty, empty, [3, 0], empty, [4, 5], [4, 5]])
    window = jnp.asarray(arr["landmarks"][0])
    for t, ((x, y), o) in enumerate(zip(aware["corners"], aware["orientations"])):
        seen = grid.observe(window, grid.reset(window, jnp.array([x, y]), jnp.array(o)), True)
        np.testing.assert_array_equal(arr["obs"][0, t], seen)
    plain = td.encode_examples([aware], {"fidi": nmap}, vocab, max_moves=5, utterance_len=8,
                               message_len=10)
    np.testing.assert_array_equal(plain["obs"][0, :, 0], [1, 1, 3, 3, 4, 4])


# ------------------------------------------------------------------ the trainer, end to end


def tiny_config(tfds_dir, **overrides):
    c = TRAINERS["ttw_language"].config(tfds_dir)
    for stage, steps in ((c.tourist, 4), (c.guide, 2), (c.generated, 2), (c.pg, 2)):
        stage.num_steps, stage.eval_every = steps, steps
    c.eval.beam_sizes, c.eval.num_walks, c.eval.batch_size = "1", 32, 32
    c.update_from_flattened_dict(overrides)
    return c


def record_walks(monkeypatch) -> list:
    """Records the label / tourist of every random-walk batch and full-task run of the trainer."""
    seen = []
    sample_batch = nl_train.localization.sample_batch
    full_task = nl_train.language.evaluate_full_task

    def sample(*args, label="final", orientation_aware=False, **kwargs):
        seen.append(("walks", label, orientation_aware))
        return sample_batch(*args, label=label, orientation_aware=orientation_aware, **kwargs)

    def evaluate(*args, **kwargs):
        seen.append(("full_task", kwargs.get("label", "final"),
                     kwargs.get("orientation_aware", False)))
        return full_task(*args, **kwargs)

    monkeypatch.setattr(nl_train.localization, "sample_batch", sample)
    monkeypatch.setattr(nl_train.language, "evaluate_full_task", evaluate)
    return seen


def check_results(res, workdir):
    assert set(res["full_task"]) >= {"T1", "T1_policy_gradient"}
    for r in res["full_task"].values():
        assert 0.0 <= r["test"]["success_rate"] <= 1.0
    for s in maps.SPLITS:
        assert all(0.0 <= v <= 1.0 for v in res["generated"]["T1"][s].values())
    assert os.path.exists(os.path.join(workdir, "samples.md"))


@pytest.mark.slow
def test_start_label_aware_tourist_and_released_options_run_end_to_end(tfds_dir, tmp_path,
                                                                       monkeypatch):
    """One run (suite time) through every stage and the full task with label=start, the
    orientation-aware tourist and the paper config's model options at tiny sizes (T head on the
    last token, no observation projection, a wider decoder behind a context map, human guides
    reading up to T = 2). The final label and the agnostic tourist run in the trainer's contract
    run (`tests/experiments/trainers.py`)."""
    c = tiny_config(tfds_dir, **{"data.label": "start", "data.orientation_aware": True,
                                 "guide.T_max": 2, "guide.T_input": "last_token",
                                 "guide.obs_projection": False, "guide.features": 16,
                                 "tourist.decoder_hidden": 24, "tourist.context_features": 8})
    data = nl_data.load_data(c, str(tmp_path))
    train = data["human"][1]["train"]
    moves = train["actions"][np.arange(train["actions"].shape[1]) < train["num_moves"][:, None]]
    assert set(np.unique(moves)) == {grid.TURNLEFT, grid.TURNRIGHT, grid.FORWARD}
    seen = record_walks(monkeypatch)
    with xla_optimizations(False):
        res = nl_train.train_and_evaluate(c, str(tmp_path))
    check_results(res, str(tmp_path))
    assert "human_trajectories_T1" in res["full_task"]
    assert {kind for kind, _, _ in seen} == {"walks", "full_task"}
    assert set(seen) == {("walks", "start", True), ("full_task", "start", True)}
    assert all(v <= 2 for v in res["human"]["c1_masc"]["expected_T"].values())
    with open(os.path.join(tmp_path, "samples.md"), encoding="utf-8") as f:
        text = f.read()
    assert "FORWARD" in text and "STAY" not in text
