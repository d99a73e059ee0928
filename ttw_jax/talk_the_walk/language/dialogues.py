"""Talk The Walk natural-language dialogues: validated reading, replay, examples and vocabulary.

A dialogue (one episode of the official `talkthewalk.{train,valid,test}.json`) is a dict with
`neighborhood`, `boundaries` [min_x, min_y, max_x, max_y] (corner coordinates of a 4x4 window),
`start_location` / `target_location` [x, y, orientation] (orientation 0..3 = N, E, S, W) and
`dialog`, a list of acts {"id": "Tourist" | "Guide", "text", "episode_done", "time"}. Tourist moves
are the texts of `ACTIONS`; the guide's evaluation request is `EVALUATE`. Other keys are accepted
and ignored.

Replay follows the official environment: turns rotate, FORWARD moves one corner in the facing
direction, clamped to the window. Every tourist utterance of at least `min_words` tokens (default
3, i.e. more than 2) is one example: the corner the tourist stands on, the moves since the
previous example utterance as absolute agnostic moves (a FORWARD facing N/E/S/W is UP/RIGHT/DOWN/
LEFT = its orientation; turns give no move), the corners visited and the last `context`
utterances (ACTION and EVALUATE acts excluded). As in the released code (`TalkTheWalkLanguage`,
`ActionAgnosticDictionary.encode_from_location`): a FORWARD blocked by the window edge is the move
`STAY` (the tourist's corner is observed again), and a tourist utterance too short to be an
example is left out of the dialogue context (guide utterances are all kept). The options
`blocked_forward="move"` (the facing direction) and `drop_short_context=False` give this module's
earlier behaviour.

With `orientation_aware=True` (the released `TalkTheWalkLanguage(orientation_aware=True)`) every
ACTION act is a move, as the environment's ids TURNLEFT / TURNRIGHT / FORWARD (4, 5, 6 of
`ttw_jax.talk_the_walk.env`), and the tourist observes its corner after each one (a turn observes
the same corner again, facing elsewhere); `encode_examples(orientation_aware=True)` then gives a
corner's landmarks only while the tourist faces away from the intersection (`env.VISIBLE`, as the
full task's orientation-aware tourist sees them), `[Empty]` otherwise.
"""
from __future__ import annotations

from collections import Counter
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from ttw_jax.core.records import (Fields, RecordFormatError, is_int, is_number, is_string, list_of,
                                  read_json_list)
from ttw_jax.core.vocab import Vocabulary, tokenize
from ttw_jax.talk_the_walk import env as grid, maps

TURNLEFT, TURNRIGHT, FORWARD = "ACTION:TURNLEFT", "ACTION:TURNRIGHT", "ACTION:FORWARD"
ACTIONS = (TURNLEFT, TURNRIGHT, FORWARD)
EVALUATE = "EVALUATE_LOCATION"
SPEAKERS = ("Tourist", "Guide")
# Vocabulary ids of the special tokens (never produced by `tokenize`, which splits on '<', '>').
SPECIAL_TOKENS = ("<pad>", "<unk>", "<bos>", "<eos>", "<tourist>", "<guide>")
PAD, UNK, BOS, EOS, TOURIST, GUIDE = range(len(SPECIAL_TOKENS))
SPEAKER_TOKEN = {"Tourist": TOURIST, "Guide": GUIDE}
# Agnostic move ids of the examples: 0 UP, 1 RIGHT, 2 DOWN, 3 LEFT (= the orientation walked) and
# STAY for a FORWARD blocked by the window edge (`blocked_forward="stay"`).
MOVE_NAMES = ("UP", "RIGHT", "DOWN", "LEFT", "STAY")
STAY = MOVE_NAMES.index("STAY")
NUM_MOVE_IDS = len(MOVE_NAMES)
BLOCKED_FORWARD = ("stay", "move")
# Orientation-aware examples: every ACTION act is a move, with the environment's action id.
AWARE_MOVES = {TURNLEFT: grid.TURNLEFT, TURNRIGHT: grid.TURNRIGHT, FORWARD: grid.FORWARD}
DIALOGUE_FILES = {s: f"talkthewalk.{s}.json" for s in maps.SPLITS}
CONFIGURATION_FILES = {s: f"configurations.{s}.json" for s in maps.SPLITS}
SOURCE_HINT = ("Talk The Walk dialogues come with the official release (github.com/"
               "facebookresearch/talkthewalk, scripts/download_data.sh); see BUILD.md.")


class DialogueFormatError(RecordFormatError):
    """A dialogue or configuration file exists but its content is not in the official schema."""


# ---------------------------------------------------------------------------------------------
# Reading and validation
# ---------------------------------------------------------------------------------------------

class _Checker(Fields):
    """Raises DialogueFormatError `{where}: field '{field}': {problem}`."""

    def __init__(self, rec: Mapping, where: str):
        super().__init__(rec, where, DialogueFormatError)

    def require(self, keys: Sequence[str], obj: Mapping | None = None, prefix: str = "") -> None:
        for key in keys:
            if key not in (self.rec if obj is None else obj):
                raise self.fail(prefix + key, "missing required field")

    def neighborhood(self, value) -> str:
        if not isinstance(value, str):
            raise self.fail("neighborhood", f"expected a string, got {value!r}")
        if value not in maps.BOUNDARIES:
            raise self.fail("neighborhood", f"unknown neighbourhood {value!r}; known: "
                                            f"{maps.NEIGHBORHOODS}")
        return value

    def boundaries(self, value, nbh: str) -> list[int]:
        if not list_of(is_int, 4, 4)(value):
            raise self.fail("boundaries", f"expected a list of 4 integers [min_x, min_y, max_x, "
                                          f"max_y], got {value!r}")
        min_x, min_y, max_x, max_y = value
        if max_x - min_x != maps.WINDOW - 1 or max_y - min_y != maps.WINDOW - 1:
            raise self.fail("boundaries", f"expected a {maps.WINDOW}x{maps.WINDOW}-corner window "
                                          f"(max = min + {maps.WINDOW - 1}), got {value}")
        bx, by = maps.BOUNDARIES[nbh]
        width, height = 2 * bx + 4, 2 * by + 4
        if min_x < 0 or min_y < 0 or max_x >= width or max_y >= height:
            raise self.fail("boundaries", f"window {value} lies outside {nbh}'s {width}x{height} "
                                          f"corners")
        return value

    def location(self, field: str, value, bounds: Sequence[int]) -> list[int]:
        if not list_of(is_int, 3, 3)(value):
            raise self.fail(field, f"expected a list of 3 integers [x, y, orientation], "
                                   f"got {value!r}")
        x, y, o = value
        if not (bounds[0] <= x <= bounds[2] and bounds[1] <= y <= bounds[3]):
            raise self.fail(field, f"corner ({x}, {y}) lies outside the window {list(bounds)}")
        if not 0 <= o < 4:
            raise self.fail(field, f"orientation must be 0..3 (N, E, S, W), got {o}")
        return value


def validate_dialogue(ep, path: str, index: int) -> None:
    """Checks one episode; DialogueFormatError naming `path`, the episode index and the field
    (e.g. `f: episode 3: field 'dialog[2].text': expected a string, got 5`) otherwise."""
    if not isinstance(ep, dict):
        raise DialogueFormatError(f"{path}: episode {index}: expected an object, "
                                  f"got {type(ep).__name__}")
    check = _Checker(ep, f"{path}: episode {index}")
    check.require(("neighborhood", "boundaries", "start_location", "target_location", "dialog"))
    nbh = check.neighborhood(ep["neighborhood"])
    bounds = check.boundaries(ep["boundaries"], nbh)
    check.location("start_location", ep["start_location"], bounds)
    check.location("target_location", ep["target_location"], bounds)
    dialog = ep["dialog"]
    if not isinstance(dialog, list):
        raise check.fail("dialog", f"expected a list of acts, got {type(dialog).__name__}")
    if not dialog:
        raise check.fail("dialog", "an empty dialogue (no act)")
    for j, act in enumerate(dialog):
        field = f"dialog[{j}]"
        if not isinstance(act, dict):
            raise check.fail(field, f"expected an object, got {type(act).__name__}")
        check.require(("id", "text", "episode_done", "time"), act, f"{field}.")
        if act["id"] not in SPEAKERS:
            raise check.fail(f"{field}.id", f"expected one of {SPEAKERS}, got {act['id']!r}")
        text = act["text"]
        if not is_string(text):
            raise check.fail(f"{field}.text", f"expected a string (UTF-8), got {text!r}")
        if text.startswith("ACTION:"):
            if text not in ACTIONS:
                raise check.fail(f"{field}.text", f"unknown action {text!r}; known: {ACTIONS}")
            if act["id"] != "Tourist":
                raise check.fail(f"{field}.text", f"only the Tourist acts, got {text!r} "
                                                  f"from the {act['id']}")
        if not isinstance(act["episode_done"], bool):
            raise check.fail(f"{field}.episode_done",
                             f"expected a boolean, got {act['episode_done']!r}")
        if not is_number(act["time"]) or act["time"] < 0:
            raise check.fail(f"{field}.time", f"expected a timestamp (a finite number >= 0), "
                                              f"got {act['time']!r}")


def validate_configuration(cfg, path: str, index: int) -> None:
    """Checks one entry of `configurations.{split}.json` ({neighborhood, boundaries,
    target_location}); DialogueFormatError naming the file, entry index and field otherwise."""
    if not isinstance(cfg, dict):
        raise DialogueFormatError(f"{path}: configuration {index}: expected an object, "
                                  f"got {type(cfg).__name__}")
    check = _Checker(cfg, f"{path}: configuration {index}")
    check.require(("neighborhood", "boundaries", "target_location"))
    nbh = check.neighborhood(cfg["neighborhood"])
    bounds = check.boundaries(cfg["boundaries"], nbh)
    check.location("target_location", cfg["target_location"], bounds)


def _read_validated(path: str, what: str, validate) -> list:
    items = read_json_list(path, f"{what}s", DialogueFormatError, f"(a {what} file) {SOURCE_HINT}")
    for i, item in enumerate(items):
        validate(item, path, i)
    return items


def read_dialogues(path: str) -> list[dict]:
    """The validated episodes of a `talkthewalk.{split}.json` file, in file order."""
    return _read_validated(path, "dialogue", validate_dialogue)


def read_configurations(path: str) -> list[dict]:
    """The validated entries of a `configurations.{split}.json` file, in file order."""
    return _read_validated(path, "configuration", validate_configuration)


# ---------------------------------------------------------------------------------------------
# Windows and splits
# ---------------------------------------------------------------------------------------------

def window_key(ep: Mapping) -> tuple[str, int, int]:
    """(neighbourhood, min_x, min_y) of an episode's (or configuration's) window."""
    b = ep["boundaries"]
    return ep["neighborhood"], int(b[0]), int(b[1])


def dialogue_split(ep: Mapping) -> str:
    """'train', 'valid' or 'test': the official rule applied to the window key
    (neighbourhood, min_x // 2, min_y // 2)."""
    nbh, min_x, min_y = window_key(ep)
    return maps.window_split(min_x // 2, min_y // 2, maps.BOUNDARIES[nbh])


# ---------------------------------------------------------------------------------------------
# Replay and examples
# ---------------------------------------------------------------------------------------------

_DELTAS = ((0, 1), (1, 0), (0, -1), (-1, 0))  # orientation / agnostic move -> (dx, dy)


def step(loc: Sequence[int], action: str, bounds: Sequence[int]) -> list[int]:
    """The location [x, y, orientation] after a Tourist ACTION text (FORWARD clamped to
    `bounds` = [min_x, min_y, max_x, max_y])."""
    x, y, o = loc
    if action == TURNLEFT:
        return [x, y, (o - 1) % 4]
    if action == TURNRIGHT:
        return [x, y, (o + 1) % 4]
    if action == FORWARD:
        dx, dy = _DELTAS[o]
        return [min(max(x + dx, bounds[0]), bounds[2]), min(max(y + dy, bounds[1]), bounds[3]), o]
    raise ValueError(f"unknown action {action!r}; known: {ACTIONS}")


def replay(ep: Mapping) -> list[list[int]]:
    """Locations [x, y, orientation] (neighbourhood corner coordinates): the start, then the
    location after each act (len(dialog) + 1 entries; utterances leave it unchanged)."""
    loc = list(ep["start_location"])
    out = [loc]
    for act in ep["dialog"]:
        if act["id"] == "Tourist" and act["text"] in ACTIONS:
            loc = step(loc, act["text"], ep["boundaries"])
        out.append(loc)
    return out


def is_utterance(act: Mapping) -> bool:
    """True for a spoken act (not an ACTION, not EVALUATE_LOCATION)."""
    return act["text"] not in ACTIONS and act["text"] != EVALUATE


def dialogue_texts(dialogues: Iterable[Mapping]) -> list[str]:
    """Every utterance text of both speakers (ACTION and EVALUATE acts excluded): the texts to
    build a vocabulary from."""
    return [act["text"] for ep in dialogues for act in ep["dialog"] if is_utterance(act)]


def utterance_examples(dialogues: Sequence[Mapping], context: int = 1, min_words: int = 3,
                       drop_short_context: bool = True, blocked_forward: str = "stay",
                       orientation_aware: bool = False) -> list[dict]:
    """One example per tourist utterance of >= `min_words` tokens (`tokenize`), in dialogue
    order. Each is a dict of plain Python values:
      episode, act: indices of the dialogue and of the utterance in its `dialog`;
      neighborhood, boundaries: the window;
      utterance: the tourist's text;
      target: the tourist's corner (x - min_x) * 4 + (y - min_y);
      moves: absolute agnostic moves (0 UP, 1 RIGHT, 2 DOWN, 3 LEFT) of the FORWARD acts since
        the previous example utterance (or the start); a FORWARD blocked by the window edge is
        `STAY` (blocked_forward "stay", the released code) or its facing direction ("move");
        With `orientation_aware`, every ACTION act instead: `AWARE_MOVES` ids (env TURNLEFT /
        TURNRIGHT / FORWARD), a blocked FORWARD included (`blocked_forward` does not apply);
      corners: len(moves) + 1 window-relative [x, y]: the corner before the first move, then
        after each move (a blocked FORWARD, or a turn, repeats the corner);
      orientations: len(moves) + 1 orientations (0..3 = N, E, S, W) the tourist faces at those
        observations;
      message: the last `context` utterances as [speaker, text] ("Tourist" / "Guide"), ending
        with this one; with `drop_short_context` (the released code) tourist utterances of
        fewer than `min_words` tokens are not part of the dialogue context.
    """
    if context < 1:
        raise ValueError(f"context must be >= 1, got {context}")
    if blocked_forward not in BLOCKED_FORWARD:
        raise ValueError(f"blocked_forward must be one of {BLOCKED_FORWARD}, "
                         f"got {blocked_forward!r}")
    examples = []
    for ei, ep in enumerate(dialogues):
        bounds = ep["boundaries"]
        loc = list(ep["start_location"])

        def rel(loc):
            return [loc[0] - bounds[0], loc[1] - bounds[1]]

        moves, corners, orientations, history = [], [rel(loc)], [loc[2]], []
        for j, act in enumerate(ep["dialog"]):
            text = act["text"]
            if act["id"] == "Tourist" and text in ACTIONS:
                before, loc = loc, step(loc, text, bounds)
                if orientation_aware:
                    moves.append(AWARE_MOVES[text])
                elif text == FORWARD:
                    blocked = loc[:2] == before[:2]
                    moves.append(STAY if blocked and blocked_forward == "stay" else loc[2])
                else:
                    continue   # an agnostic tourist's turn: no move, no observation
                corners.append(rel(loc))
                orientations.append(loc[2])
                continue
            if text == EVALUATE:
                continue
            is_example = act["id"] == "Tourist" and len(tokenize(text)) >= min_words
            if is_example or act["id"] != "Tourist" or not drop_short_context:
                history.append([act["id"], text])
            if is_example:
                x, y = rel(loc)
                examples.append({
                    "episode": ei, "act": j, "neighborhood": ep["neighborhood"],
                    "boundaries": list(bounds), "utterance": text,
                    "target": x * maps.WINDOW + y, "moves": moves, "corners": corners,
                    "orientations": orientations,
                    "message": [list(m) for m in history[-context:]]})
                moves, corners, orientations = [], [rel(loc)], [loc[2]]
    return examples


# ---------------------------------------------------------------------------------------------
# Vocabulary and arrays
# ---------------------------------------------------------------------------------------------

def build_vocab(texts: Iterable[str], min_count: int = 3) -> Vocabulary:
    """`SPECIAL_TOKENS` (ids PAD=0 .. GUIDE=5), then the `tokenize` words of `texts` seen at
    least `min_count` times, by decreasing count (ties alphabetical)."""
    counts = Counter(w for t in texts for w in tokenize(t))
    kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    return Vocabulary((*SPECIAL_TOKENS, *kept))


def encode_text(vocab: Vocabulary, text: str, index: Mapping[str, int] | None = None,
                tokenizer: Callable[[str], list[str]] = tokenize) -> list[int]:
    """Word ids of the `tokenizer` words of `text` (UNK for unknown words), no special tokens."""
    index = vocab.index if index is None else index
    return [index.get(w, UNK) for w in tokenizer(text)]


def decode(vocab: Vocabulary, ids) -> str:
    """The words of `ids` up to the first EOS or PAD (BOS skipped), joined by spaces."""
    words = []
    for i in np.asarray(ids).reshape(-1).tolist():
        if i in (EOS, PAD):
            break
        if i != BOS:
            words.append(vocab.words[i] if 0 <= i < len(vocab) else SPECIAL_TOKENS[UNK])
    return " ".join(words)


def window_landmarks(nmap: maps.NeighborhoodMap, bounds: Sequence[int], k: int) -> np.ndarray:
    """(4, 4, k) int32 landmark ids of the window at (bounds[0], bounds[1]), zero-padded."""
    block = nmap.corners[bounds[0]:bounds[0] + maps.WINDOW, bounds[1]:bounds[1] + maps.WINDOW]
    return np.pad(block, ((0, 0), (0, 0), (0, k - block.shape[-1]))).astype(np.int32)


def move_names(orientation_aware: bool = False) -> tuple[str, ...]:
    """Names of the example move ids: `MOVE_NAMES`, or the environment's action names (whose
    TURNLEFT / TURNRIGHT / FORWARD are the orientation-aware moves)."""
    return grid.ACTION_NAMES if orientation_aware else MOVE_NAMES


def encode_examples(examples: Sequence[Mapping], maps_by_name: Mapping[str, maps.NeighborhoodMap],
                    vocab: Vocabulary, max_moves: int, utterance_len: int,
                    message_len: int, orientation_aware: bool = False,
                    tokenizer: Callable[[str], list[str]] = tokenize) -> dict[str, np.ndarray]:
    """Padded int32 arrays of `utterance_examples` output; N examples, S = max_moves (the last
    S moves are kept), K = the widest corner of `maps_by_name`:
      landmarks (N, 4, 4, K): the window's landmark ids; target (N,);
      obs (N, S+1, K): landmarks of the visited corners, obs[i, :num_moves[i]+1] valid, rest 0;
        with `orientation_aware` (examples made with it), a corner's landmarks only where the
        tourist faced away from the intersection (`env.VISIBLE`), else `[Empty]`;
      actions (N, S): agnostic moves 0..3 or STAY (4) (aware: `AWARE_MOVES`), rest 0;
      num_moves (N,);
      utterance (N, Lu): the tourist's word ids then EOS (at most Lu-1 words), 0-padded;
        utterance_len (N,) (EOS included);
      message (N, Lm): speaker token + word ids of each message utterance, concatenated, the
        most recent Lm tokens kept (cut on the left), 0-padded; message_len (N,) (>= 1).
    Words are split by `tokenizer` (`tokenize`, or the release's `release_dict.split_tokenize`).
    """
    if utterance_len < 1 or message_len < 1 or max_moves < 0:
        raise ValueError("utterance_len and message_len must be >= 1 and max_moves >= 0")
    k = max(m.corners.shape[-1] for m in maps_by_name.values())
    n, s = len(examples), max_moves
    out = {"landmarks": np.zeros((n, maps.WINDOW, maps.WINDOW, k), np.int32),
           "target": np.zeros((n,), np.int32),
           "obs": np.zeros((n, s + 1, k), np.int32),
           "actions": np.zeros((n, s), np.int32),
           "num_moves": np.zeros((n,), np.int32),
           "utterance": np.zeros((n, utterance_len), np.int32),
           "utterance_len": np.zeros((n,), np.int32),
           "message": np.zeros((n, message_len), np.int32),
           "message_len": np.zeros((n,), np.int32)}
    index = vocab.index
    for i, ex in enumerate(examples):
        nbh = ex["neighborhood"]
        if nbh not in maps_by_name:
            raise KeyError(f"no map for neighbourhood {nbh!r} (example {i}); have "
                           f"{sorted(maps_by_name)}")
        window = window_landmarks(maps_by_name[nbh], ex["boundaries"], k)
        out["landmarks"][i] = window
        out["target"][i] = ex["target"]
        moves = list(ex["moves"])[-s:] if s else []
        corners = list(ex["corners"])[-(len(moves) + 1):]
        out["num_moves"][i] = len(moves)
        out["actions"][i, :len(moves)] = moves
        for t, (x, y) in enumerate(corners):
            out["obs"][i, t] = window[x, y]
        if orientation_aware:
            facing = list(ex["orientations"])[-(len(moves) + 1):]
            x0, y0 = ex["boundaries"][:2]   # the corner's side of its intersection: absolute parity
            for t, ((x, y), o) in enumerate(zip(corners, facing)):
                if not grid.VISIBLE[(x0 + x) % 2, (y0 + y) % 2, o]:
                    out["obs"][i, t] = 0
                    out["obs"][i, t, 0] = maps.EMPTY_ID
        words = encode_text(vocab, ex["utterance"], index, tokenizer)[:utterance_len - 1] + [EOS]
        out["utterance"][i, :len(words)] = words
        out["utterance_len"][i] = len(words)
        tokens = [t for speaker, text in ex["message"]
                  for t in [SPEAKER_TOKEN[speaker]] + encode_text(vocab, text, index, tokenizer)]
        tokens = tokens[-message_len:]
        out["message"][i, :len(tokens)] = tokens
        out["message_len"][i] = len(tokens)
    return out
