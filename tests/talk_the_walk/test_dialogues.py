"""Talk The Walk dialogues: validation errors, replay, examples, vocabulary, arrays and the
synthetic generator (TF-free, no JAX)."""
import copy
import json
import re
from collections import Counter

import numpy as np
import pytest

from ttw_jax.core.vocab import tokenize
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.language import dialogues as td, synthetic as sd

L, R, F = td.ACTIONS


def act(who, text, t, done=False, **extra):
    return {"id": who, "text": text, "episode_done": done, "time": t, **extra}


# fidi: 8 x 10 corners; the window [2, 4, 5, 7]; start (3, 5) facing north.
DIALOG = [
    ("Guide", "hi, what do you see?"),            # 0
    ("Tourist", "i see a bank here"),             # 1  example 0
    ("Guide", "turn right and go forward"),       # 2
    ("Tourist", "ok"),                            # 3  short
    ("Tourist", R),                               # 4  facing east
    ("Tourist", F),                               # 5  (4, 5)
    ("Tourist", "hmm ok"),                        # 6  short: moves go on
    ("Tourist", F),                               # 7  (5, 5)
    ("Tourist", F),                               # 8  clamped at max_x = 5
    ("Tourist", L),                               # 9  facing north
    ("Tourist", F),                               # 10 (5, 6)
    ("Guide", td.EVALUATE),                       # 11 failed evaluation
    ("Guide", "not there yet"),                   # 12
    ("Tourist", "Now I see a Shop and a bar!"),   # 13 example 1
    ("Tourist", L),                               # 14 facing west
    ("Tourist", F),                               # 15 (4, 6)
    ("Tourist", L),                               # 16 facing south
    ("Tourist", F),                               # 17 (4, 5)
    ("Tourist", "a bank is here"),                # 18 example 2
    ("Guide", td.EVALUATE),                       # 19
]


def hand_episode():
    dialog = [act(w, t, 100.0 + i, done=(i == len(DIALOG) - 1)) for i, (w, t) in enumerate(DIALOG)]
    dialog[2]["location"] = [3, 5, 0]      # optional per-act key
    return {"neighborhood": "fidi", "boundaries": [2, 4, 5, 7], "start_location": [3, 5, 0],
            "target_location": [4, 5, 2], "dialog": dialog,
            "version": 2, "total_time": 19.0, "tourist_worker_id": "A1", "landmarks": []}


def hand_map():
    corners = np.zeros((8, 10, 2), np.int32)
    corners[..., 0] = maps.EMPTY_ID
    corners[3, 5] = [4, 0]      # bank (start)
    corners[4, 5] = [4, 0]      # bank
    corners[5, 6] = [2, 8]      # shop, bar
    corners[2, 4] = [1, 3]      # outside the visited corners, inside the window
    corners[0, 0] = [9, 9]      # outside the window
    return maps.NeighborhoodMap("fidi", maps.BOUNDARIES["fidi"], corners)


def test_replay_is_orientation_aware_and_clamped():
    locs = td.replay(hand_episode())
    assert len(locs) == len(DIALOG) + 1
    assert locs[0] == [3, 5, 0]
    assert locs[5] == [3, 5, 1] and locs[6] == [4, 5, 1] and locs[8] == [5, 5, 1]
    assert locs[9] == [5, 5, 1]          # clamped FORWARD
    assert locs[11] == [5, 6, 0] and locs[16] == [4, 6, 3] and locs[-1] == [4, 5, 2]
    assert td.step([0, 0, 2], F, [0, 0, 3, 3]) == [0, 0, 2]
    assert td.step([0, 0, 0], L, [0, 0, 3, 3]) == [0, 0, 3]


def test_utterance_examples_by_hand():
    ep = hand_episode()
    ex = td.utterance_examples([ep, ep], context=1)
    assert len(ex) == 6 and [e["episode"] for e in ex] == [0, 0, 0, 1, 1, 1]
    e0, e1, e2 = ex[:3]
    assert [e["act"] for e in (e0, e1, e2)] == [1, 13, 18]
    assert e0["target"] == (3 - 2) * 4 + (5 - 4) and e0["moves"] == [] and e0["corners"] == [[1, 1]]
    # moves since the previous example utterance, absolute; "hmm ok" does not reset them; the
    # FORWARD blocked by the edge (act 8) is STAY and its corner is observed again
    assert e1["moves"] == [1, 1, td.STAY, 0]
    assert e1["corners"] == [[1, 1], [2, 1], [3, 1], [3, 1], [3, 2]]
    assert e1["target"] == 3 * 4 + 2
    assert e2["moves"] == [3, 2] and e2["corners"] == [[3, 2], [2, 2], [2, 1]]
    assert e2["target"] == 2 * 4 + 1
    assert e1["neighborhood"] == "fidi" and e1["boundaries"] == [2, 4, 5, 7]
    assert e1["utterance"] == "Now I see a Shop and a bar!"
    assert e1["message"] == [["Tourist", "Now I see a Shop and a bar!"]]
    # context 3 / 5: guide utterances included, ACTION / EVALUATE not; the short tourist
    # utterances ("ok", "hmm ok") are left out of the context as in the released code
    e1_3 = td.utterance_examples([ep], context=3)[1]
    assert e1_3["message"] == [["Guide", "turn right and go forward"], ["Guide", "not there yet"],
                               ["Tourist", "Now I see a Shop and a bar!"]]
    e5 = td.utterance_examples([ep], context=5)
    assert e5[1]["message"] == [["Guide", "hi, what do you see?"], ["Tourist", "i see a bank here"],
                                ["Guide", "turn right and go forward"], ["Guide", "not there yet"],
                                ["Tourist", "Now I see a Shop and a bar!"]]
    assert e5[0]["message"] == [["Guide", "hi, what do you see?"], ["Tourist", "i see a bank here"]]
    # the earlier behaviour: short utterances stay in the context, a blocked FORWARD is a move
    old = td.utterance_examples([ep], context=5, drop_short_context=False, blocked_forward="move")
    assert old[1]["message"] == [["Guide", "turn right and go forward"], ["Tourist", "ok"],
                                 ["Tourist", "hmm ok"], ["Guide", "not there yet"],
                                 ["Tourist", "Now I see a Shop and a bar!"]]
    assert old[1]["moves"] == [1, 1, 1, 0] and old[1]["corners"] == e1["corners"]
    # min_words: "hmm ok" becomes an example with min_words=2, resets the moves, and is context
    ex2 = td.utterance_examples([ep], min_words=2, context=2)
    assert [e["act"] for e in ex2] == [1, 6, 13, 18]
    assert ex2[1]["moves"] == [1] and ex2[2]["moves"] == [1, td.STAY, 0]
    assert ex2[1]["message"] == [["Guide", "turn right and go forward"], ["Tourist", "hmm ok"]]
    with pytest.raises(ValueError, match="blocked_forward"):
        td.utterance_examples([ep], blocked_forward="wall")
    with pytest.raises(ValueError):
        td.utterance_examples([ep], context=0)


def test_vocabulary_and_tokenizer():
    v = td.build_vocab(["Go north, go", "go NORTH", "north b", "b c", "b"], min_count=3)
    assert v.words == td.SPECIAL_TOKENS + ("b", "go", "north")
    assert (td.PAD, td.UNK, td.BOS, td.EOS, td.TOURIST, td.GUIDE) == tuple(range(6))
    assert len(td.build_vocab(["a b"], min_count=1)) == 8
    assert td.encode_text(v, "GO north, c") == [7, 8, td.UNK, td.UNK]   # "," and "c" unknown
    assert td.decode(v, [td.BOS, 7, 8, td.EOS, 6, 0]) == "go north"
    assert td.decode(v, np.array([[6, td.UNK, 0, 7]])) == "b <unk>"


def test_encode_examples_by_hand():
    ep = hand_episode()
    nmap = hand_map()
    other = maps.NeighborhoodMap("x", (3, 3), np.zeros((10, 10, 3), np.int32))   # K = 3 wins
    texts = [t for _, t in DIALOG] * 3
    v = td.build_vocab(texts)
    ex = td.utterance_examples([ep], context=3)
    arr = td.encode_examples(ex, {"fidi": nmap, "x": other}, v, max_moves=3, utterance_len=5,
                             message_len=11)
    n = 3
    shapes = {"landmarks": (n, 4, 4, 3), "target": (n,), "obs": (n, 4, 3), "actions": (n, 3),
              "num_moves": (n,), "utterance": (n, 5), "utterance_len": (n,), "message": (n, 11),
              "message_len": (n,)}
    assert {k: a.shape for k, a in arr.items()} == shapes
    assert all(a.dtype == np.int32 for a in arr.values())
    window = np.pad(nmap.corners[2:6, 4:8], ((0, 0), (0, 0), (0, 1)))
    np.testing.assert_array_equal(arr["landmarks"], np.stack([window] * 3))
    np.testing.assert_array_equal(arr["target"], [5, 14, 9])
    np.testing.assert_array_equal(arr["num_moves"], [0, 3, 2])
    # example 1 has 4 moves (the third blocked: STAY): the last 3 are kept with their 4 corners
    np.testing.assert_array_equal(arr["actions"], [[0, 0, 0], [1, td.STAY, 0], [3, 2, 0]])
    bank, empty, shop_bar = [4, 0, 0], [maps.EMPTY_ID, 0, 0], [2, 8, 0]
    np.testing.assert_array_equal(arr["obs"][0], [bank, [0] * 3, [0] * 3, [0] * 3])
    np.testing.assert_array_equal(arr["obs"][1], [bank, empty, empty, shop_bar])
    np.testing.assert_array_equal(arr["obs"][2], [shop_bar, [maps.EMPTY_ID, 0, 0], bank, [0] * 3])
    # the utterance: at most 4 words, then EOS
    ids = [v.index[w] for w in tokenize("Now I see a Shop and a bar!")]
    np.testing.assert_array_equal(arr["utterance"][1], ids[:4] + [td.EOS])
    assert arr["utterance_len"].tolist() == [5, 5, 5]
    short = td.encode_examples(ex, {"fidi": nmap}, v, 0, 40, 60)
    assert short["utterance_len"][2] == 5 and short["obs"].shape == (3, 1, 2)
    assert td.decode(v, short["utterance"][2]) == "a bank is here"
    np.testing.assert_array_equal(short["obs"][:, 0, :], [[4, 0], [2, 8], [4, 0]])
    # the message: speaker tokens + words, the most recent 11 tokens ("yet", <tourist>, ...)
    full = ([td.GUIDE] + [v.index[w] for w in tokenize("not there yet")] +
            [td.TOURIST] + ids)
    np.testing.assert_array_equal(arr["message"][1], full[-11:])
    assert full[-10] == td.TOURIST and arr["message_len"].tolist()[1] == 11
    msg0 = [td.GUIDE] + td.encode_text(v, "hi, what do you see?") + [td.TOURIST] + \
        td.encode_text(v, "i see a bank here")
    np.testing.assert_array_equal(short["message"][0, :len(msg0)], msg0)
    assert short["message_len"][0] == len(msg0) and not short["message"][0, len(msg0):].any()
    with pytest.raises(KeyError, match="fidi"):
        td.encode_examples(ex, {"x": other}, v, 3, 5, 11)


def test_splits_by_window_key():
    ep = hand_episode()
    assert td.window_key(ep) == ("fidi", 2, 4)
    # fidi (2, 3): window (mx, my) = (1, 2) -> valid; (0, 3) -> test; (2, 0) -> train
    assert td.dialogue_split(ep) == "valid"
    assert td.dialogue_split({**ep, "boundaries": [0, 6, 3, 9]}) == "test"
    assert td.dialogue_split({**ep, "boundaries": [4, 0, 7, 3]}) == "train"


def write(path, data):
    path.write_text(json.dumps(data))
    return str(path)


def broken(**changes):
    """Two episodes, the second one changed by `changes` (field path -> value or DELETE)."""
    ep = hand_episode()
    for field, value in changes.items():
        target, key = ep, field
        m = re.fullmatch(r"dialog\[(\d+)\]\.(\w+)", field)
        if m:
            target, key = ep["dialog"][int(m.group(1))], m.group(2)
        if value is DELETE:
            del target[key]
        else:
            target[key] = value
    return [hand_episode(), ep]


DELETE = object()
BAD = [
    (dict(**{"dialog[3].text": 5}), re.escape("field 'dialog[3].text': expected a string (UTF-8), got 5")),
    (dict(neighborhood="mars"), "field 'neighborhood': unknown neighbourhood 'mars'"),
    (dict(neighborhood=3), "field 'neighborhood': expected a string"),
    (dict(boundaries=[2, 4, 6, 8]), "field 'boundaries': expected a 4x4-corner window"),
    (dict(boundaries=[6, 4, 9, 7]), "field 'boundaries': window .* lies outside fidi's 8x10"),
    (dict(boundaries=[2, 4, 5]), "field 'boundaries': expected a list of 4 integers"),
    (dict(start_location=[1, 5, 0]), "field 'start_location': corner \\(1, 5\\) lies outside"),
    (dict(target_location=[3, 5, 4]), "field 'target_location': orientation must be 0..3"),
    (dict(target_location=[3.0, 5, 1]), "field 'target_location': expected a list of 3 integers"),
    (dict(dialog=DELETE), "field 'dialog': missing required field"),
    (dict(dialog={}), "field 'dialog': expected a list of acts"),
    (dict(**{"dialog[0].id": "Bob"}), "field 'dialog\\[0\\].id': expected one of"),
    (dict(**{"dialog[4].text": "ACTION:JUMP"}), "field 'dialog\\[4\\].text': unknown action"),
    (dict(**{"dialog[2].text": F}), "field 'dialog\\[2\\].text': only the Tourist acts"),
    (dict(**{"dialog[5].episode_done": "no"}), "field 'dialog\\[5\\].episode_done': "
                                               "expected a boolean"),
    (dict(**{"dialog[6].time": "noon"}), "field 'dialog\\[6\\].time': expected a timestamp"),
    (dict(**{"dialog[7].time": DELETE}), "field 'dialog\\[7\\].time': missing required field"),
]


@pytest.mark.parametrize("changes,message", BAD)
def test_errors_name_file_episode_and_field(tmp_path, changes, message):
    path = write(tmp_path / "talkthewalk.train.json", broken(**changes))
    with pytest.raises(td.DialogueFormatError) as e:
        td.read_dialogues(path)
    assert re.search(message, str(e.value)), str(e.value)
    assert str(e.value).startswith(f"{path}: episode 1: ")


def test_numpy_integers_are_integers_and_times_must_be_finite():
    """The shared rule of `ttw_jax.core.records`: numpy integers are accepted where integers are
    (they used not to be), bools are not, a time must be a finite number >= 0 and a dialogue
    must have an act."""
    ep = hand_episode()
    ep["boundaries"] = [np.int64(v) for v in ep["boundaries"]]
    ep["start_location"] = list(np.asarray(ep["start_location"], np.int32))
    ep["dialog"][0]["time"] = np.float32(100.5)
    td.validate_dialogue(ep, "f.json", 0)
    for field, value, problem in [
            ("boundaries", [2, 4, 5, True], "field 'boundaries': expected a list of 4 integers"),
            ("time", float("nan"), "field 'dialog[0].time': expected a timestamp (a finite "
                                   "number >= 0), got nan"),
            ("time", float("inf"), "field 'dialog[0].time': expected a timestamp"),
            ("time", -1.0, "field 'dialog[0].time': expected a timestamp"),
            ("dialog", [], "field 'dialog': an empty dialogue (no act)")]:
        bad = hand_episode()
        (bad["dialog"][0] if field == "time" else bad)[field] = value
        with pytest.raises(td.DialogueFormatError,
                           match=re.escape(f"f.json: episode 0: {problem}")):
            td.validate_dialogue(bad, "f.json", 0)


def test_file_level_errors(tmp_path):
    ok = write(tmp_path / "ok.json", [hand_episode()])
    assert td.read_dialogues(ok) == [hand_episode()]        # optional keys kept, accepted
    bad = tmp_path / "bad.json"
    bad.write_text('[\n  {"neighborhood": "fidi",,}\n]')
    with pytest.raises(td.DialogueFormatError,
                       match=r"bad.json: invalid JSON at line 2, column 27"):
        td.read_dialogues(str(bad))
    with pytest.raises(td.DialogueFormatError, match="top level: expected a JSON list"):
        td.read_dialogues(write(tmp_path / "d.json", {"a": 1}))
    with pytest.raises(td.DialogueFormatError, match="episode 0: expected an object"):
        td.read_dialogues(write(tmp_path / "e.json", [[1]]))
    with pytest.raises(FileNotFoundError, match="facebookresearch/talkthewalk"):
        td.read_dialogues(str(tmp_path / "missing.json"))
    cfgs = [{"neighborhood": "fidi", "boundaries": [0, 0, 3, 3], "target_location": [1, 2, 0]}]
    assert td.read_configurations(write(tmp_path / "c.json", cfgs)) == cfgs
    bad_cfg = cfgs + [{**cfgs[0], "target_location": [4, 2, 0]}]
    path = write(tmp_path / "configurations.train.json", bad_cfg)
    with pytest.raises(td.DialogueFormatError,
                       match=re.escape(f"{path}: configuration 1: field 'target_location'")):
        td.read_configurations(path)


@pytest.fixture(scope="module")
def synthetic():
    nmaps = maps.synthetic_maps(0)
    return nmaps, sd.synthetic_dialogues(nmaps, 300, seed=5)


def test_synthetic_dialogues_are_valid_and_deterministic(synthetic):
    nmaps, dialogues = synthetic
    assert sd.synthetic_dialogues(nmaps, 300, seed=5) == dialogues
    assert sd.synthetic_dialogues(nmaps, 20, seed=6) != dialogues[:20]
    for i, ep in enumerate(dialogues):
        td.validate_dialogue(ep, "synthetic", i)
        assert json.loads(json.dumps(ep)) == ep
        assert {"version", "total_time", "tourist_worker_id", "guide_worker_id"} <= set(ep)
        b = ep["boundaries"]
        for x, y, o in td.replay(ep):
            assert b[0] <= x <= b[2] and b[1] <= y <= b[3] and 0 <= o < 4
        assert td.replay(ep)[-1][:2] == ep["target_location"][:2]
        assert ep["dialog"][-1]["text"] == td.EVALUATE and ep["dialog"][-1]["episode_done"]
        assert not any(a["episode_done"] for a in ep["dialog"][:-1])
        times = [a["time"] for a in ep["dialog"]]
        assert times == sorted(times)
    assert len({td.window_key(ep) for ep in dialogues}) > 40
    # some failed evaluations, some short replies, some wandering away and back
    assert sum(sum(a["text"] == td.EVALUATE for a in ep["dialog"]) > 1 for ep in dialogues) > 10
    short = [a for ep in dialogues for a in ep["dialog"]
             if a["id"] == "Tourist" and td.is_utterance(a) and len(tokenize(a["text"])) <= 2]
    assert len(short) > 50
    for split in maps.SPLITS:
        got = sd.synthetic_dialogues(nmaps, 30, seed=1, split=split)
        assert {td.dialogue_split(ep) for ep in got} == {split}


def test_synthetic_descriptions_are_grounded_but_noisy(synthetic):
    nmaps, dialogues = synthetic
    by_name = {m.name: m for m in nmaps}
    ex = td.utterance_examples(dialogues)
    assert len(ex) > 2 * len(dialogues)
    grounded = walked = walked_right = 0
    for e in ex:
        b, nmap = e["boundaries"], by_name[e["neighborhood"]]
        x, y = e["corners"][-1]
        types = set(sd.corner_types(nmap, b[0] + x, b[1] + y))
        grounded += bool(types & sd.mentioned_types(e["utterance"]))
        # "i walked <dir> ...": the direction of the last move that changed the corner
        m = re.search(r"\b(walked|came|went) (north|east|south|west)\b", e["utterance"].lower())
        changed = [t for t in range(len(e["moves"])) if e["corners"][t] != e["corners"][t + 1]]
        if m and changed:
            walked += 1
            walked_right += sd.DIRECTIONS.index(m.group(2)) == e["moves"][changed[-1]]
    assert 0.7 < grounded / len(ex) < 0.99
    assert walked > 50 and walked_right == walked
    # humans' casing and punctuation; tokenization lower-cases
    texts = td.dialogue_texts(dialogues)
    assert any(t[0].isupper() for t in texts) and any(" I " in t for t in texts)
    coffee = maps.LANDMARK_TYPES.index("Coffee Shop")
    assert sd.mentioned_types("I see a Cafe") == sd.mentioned_types("a coffee shop") == {coffee}
    assert sd.mentioned_types("There is nothing here") == {maps.EMPTY_ID}


def test_synthetic_vocabulary_is_small_and_frequent(synthetic):
    _, dialogues = synthetic
    texts = td.dialogue_texts(dialogues)
    counts = Counter(w for t in texts for w in tokenize(t))
    vocab = td.build_vocab(texts)
    assert 100 <= len(vocab) <= 200
    assert min(counts.values()) >= 3 and len(vocab) == len(counts) + len(td.SPECIAL_TOKENS)
    # the generator mutates nothing it is given
    nmaps = maps.synthetic_maps(0)
    before = copy.deepcopy([m.corners for m in nmaps])
    sd.synthetic_dialogues(nmaps, 5, seed=0)
    assert all((a == m.corners).all() for a, m in zip(before, nmaps))
