"""The Talk The Walk release of the fuzz corpus (`tests/fuzz.py`): two real maps of
`../shared/data/ttw/maps` in the official layout `<nbh>/map.json`, and, as the project's writers
make them in the official layouts (not shipped there), two synthetic dialogues per split on those
maps with their configurations and the landmark-classification features (`resnetfeat.json`,
`<nbh>/text.json`, 4-dimensional vectors); each case damages one file or field.
"""
from __future__ import annotations

import json
import pathlib

from tests.conftest import shared_path
from tests.fuzz import DELETE, Case, Release, duplicate_item, edit_json, file_damage, set_field
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.landmarks import release as lr
from ttw_jax.talk_the_walk.language import dialogues as td
from ttw_jax.talk_the_walk.language.synthetic import synthetic_dialogues

NEIGHBORHOODS = ("hellskitchen", "fidi")   # two of the shared maps (small: fast cases)
DIALOGUES = td.DIALOGUE_FILES["train"]
CONFIGS = td.CONFIGURATION_FILES["train"]
MAP = "hellskitchen/map.json"
RESNET = lr.RESNET_FILE
TEXT = f"fidi/{lr.TEXT_FILE}"


def build(root: pathlib.Path) -> None:
    """The clean release, every file in one folder (as the release ships them)."""
    nmaps = []
    for name in NEIGHBORHOODS:
        real = shared_path("ttw", "maps", f"{name}_map.json")
        (root / name).mkdir(parents=True)
        (root / name / "map.json").write_bytes(pathlib.Path(real).read_bytes())
        nmaps.append(maps.load_map(real, name))
    for seed, split in enumerate(maps.SPLITS):
        episodes = synthetic_dialogues(nmaps, 2, seed, split=split)
        (root / td.DIALOGUE_FILES[split]).write_text(json.dumps(episodes))
        (root / td.CONFIGURATION_FILES[split]).write_text(json.dumps(
            [{k: ep[k] for k in ("neighborhood", "boundaries", "target_location")}
             for ep in episodes]))
    lr.write_synthetic_release(str(root), {m.name: m.corners for m in nmaps}, seed=0, dim=4)


def flags(root: pathlib.Path) -> dict:
    return {"data_dir": str(root), "maps_dir": str(root), "features_dir": str(root)}


def _location(field: str, make, index: int = 1):
    """Sets `field` of item `index` to `make(its window)`."""
    def edit(data):
        data[index][field] = make(data[index]["boundaries"])
    return edit_json(edit)


def _outside(field: str, index: int = 1):
    """Sets `field` of item `index` to the corner just east of its window."""
    return _location(field, lambda b: [b[2] + 1, b[1], 0], index)


def _window(shift: int):
    """Moves episode 1's window `shift` corners east (off the map when large)."""
    def edit(data):
        b = data[1]["boundaries"]
        data[1]["boundaries"] = [b[0] + shift, b[1], b[2] + shift, b[3]]
    return edit_json(edit)


def _fidi(edit_views, key: str | None = None):
    """Applies `edit_views(entry)` to view `key` (default: the first) of `fidi` in a ResNet or
    text file: the entry becomes the result (DELETE removes the key)."""
    def edit(data):
        views = data["fidi"] if "fidi" in data else data
        at = key or sorted(views)[0]
        value = edit_views(views[at])
        if value is DELETE:
            del views[at]
        else:
            views[at] = value
    return edit_json(edit)


def _first_key_renamed(data):
    views = data["fidi"] if "fidi" in data else data
    key = sorted(views)[0]
    views[key.replace("_", "-", 1)] = views.pop(key)


def dialogue_cases() -> list[Case]:
    """Each field of episode 1 of the train dialogues and of its first act, damaged in turn."""
    fields = {
        "neighborhood": {"deleted": DELETE, "a number": 5, "unknown": "mars", "null": None},
        "boundaries": {"deleted": DELETE, "3 numbers": [0, 0, 3], "not 4x4": [0, 0, 4, 4],
                       "a string": "0,0,3,3", "floats": [0.0, 0.0, 3.0, 3.0],
                       "1e300": [1e300, 0, 3, 3], "negative": [-1, -1, 2, 2]},
        "start_location": {"deleted": DELETE, "2 numbers": [0, 0], "NaN": [float("nan"), 0, 0],
                           "a string": "0,0,0"},
        "target_location": {"deleted": DELETE, "1e300": [1e300, 0, 0], "empty": []},
        "dialog": {"deleted": DELETE, "empty": [], "a string": "hello", "a number in it": [1],
                   "null": None},
        "dialog.0.id": {"deleted": DELETE, "unknown": "Robot", "a number": 0},
        "dialog.0.text": {"deleted": DELETE, "a number": 5, "unknown action": "ACTION:JUMP",
                          "a list": ["hi"]},
        "dialog.0.episode_done": {"deleted": DELETE, "a string": "yes", "a number": 1},
        "dialog.0.time": {"deleted": DELETE, "NaN": float("nan"), "inf": float("inf"),
                          "negative": -1.0, "a string": "noon", "null": None, "a bool": True},
    }
    cases = []
    for field, values in fields.items():
        shown = field.replace(".0.", "[0].")
        for what, value in values.items():
            cases.append(Case(f"{DIALOGUES}: episode 1: {shown} {what}", DIALOGUES,
                              set_field(1, field, value),
                              "episode 1: field '" + shown.replace("[", r"\[").replace("]", r"\]")))
    cases += [
        Case(f"{DIALOGUES}: episode 1: start_location outside the window", DIALOGUES,
             _outside("start_location"), "episode 1: field 'start_location': corner"),
        Case(f"{DIALOGUES}: episode 1: start_location orientation 4", DIALOGUES,
             _location("start_location", lambda b: [b[0], b[1], 4]),
             "episode 1: field 'start_location': orientation"),
        Case(f"{DIALOGUES}: episode 1: start_location bools", DIALOGUES,
             _location("start_location", lambda b: [b[0], b[1], True]),
             "episode 1: field 'start_location': expected a list of 3 integers"),
        Case(f"{DIALOGUES}: episode 1: target_location outside the window", DIALOGUES,
             _outside("target_location"), "episode 1: field 'target_location': corner"),
        Case(f"{DIALOGUES}: episode 1: the window off the map", DIALOGUES, _window(40),
             "episode 1: field 'boundaries': window"),
        Case(f"{DIALOGUES}: an episode repeated", DIALOGUES, duplicate_item(0),
             "episode 2: repeats episode 0"),
        Case(f"{DIALOGUES}: an episode not an object", DIALOGUES,
             edit_json(lambda data: data[:1] + [[1, 2]] + data[2:]),
             "episode 1: expected an object"),
        Case(f"{DIALOGUES}: no episode", DIALOGUES, edit_json(lambda data: []), "no episode"),
        Case(f"{DIALOGUES}: an object at the top", DIALOGUES,
             edit_json(lambda data: {"episodes": data}), "top level"),
    ]
    return cases


def _train_window(path: pathlib.Path) -> None:
    """Appends the first train configuration to the configuration file at `path`."""
    train = json.loads((path.parent / CONFIGS).read_text())
    edit_json(lambda data: data + train[:1])(path)


def configuration_cases() -> list[Case]:
    fields = {"neighborhood": {"deleted": DELETE, "unknown": "mars"},
              "boundaries": {"deleted": DELETE, "not 4x4": [0, 0, 5, 3], "1e300": [0, 0, 1e300, 3]},
              "target_location": {"deleted": DELETE, "NaN": [0, float("nan"), 0]}}
    cases = [Case(f"{CONFIGS}: entry 0: {field} {what}", CONFIGS, set_field(0, field, value),
                  f"configuration 0: field '{field}'")
             for field, values in fields.items() for what, value in values.items()]
    valid = td.CONFIGURATION_FILES["valid"]
    cases += [
        Case(f"{CONFIGS}: target_location outside the window", CONFIGS,
             _outside("target_location", 0), "configuration 0: field 'target_location': corner"),
        Case(f"{CONFIGS}: no configuration", CONFIGS, edit_json(lambda data: []),
             "no configuration"),
        Case(f"{valid}: a train window", valid, _train_window,
             r"configuration 2: field 'boundaries': window"),
    ]
    return cases


def map_cases() -> list[Case]:
    values = {"deleted": DELETE, "a string": "1", "a float": 1.5, "1e300": 1e300, "negative": -1,
              "too large": 100, "null": None}
    cases = [Case(f"{MAP}: entry 0: {field} {what}", MAP, set_field(0, field, value),
                  f"entry 0(: missing field '{field}'|, field '{field}'|, fields 'x'/'y')")
             for field in ("x", "y") for what, value in values.items()]
    cases += [
        Case(f"{MAP}: entry 0: orientation unknown", MAP, set_field(0, "orientation", "XX"),
             "entry 0, field 'orientation'"),
        Case(f"{MAP}: entry 0: orientation deleted", MAP, set_field(0, "orientation", DELETE),
             "entry 0: missing field 'orientation'"),
        Case(f"{MAP}: entry 0: type unknown", MAP, set_field(0, "type", "Castle"),
             "entry 0, field 'type'"),
        Case(f"{MAP}: entry 0: type empty", MAP, set_field(0, "type", ""), "entry 0, field 'type'"),
        Case(f"{MAP}: entry 0: type deleted", MAP, set_field(0, "type", DELETE),
             "entry 0: missing field 'type'"),
        Case(f"{MAP}: entry 1 not an object", MAP,
             edit_json(lambda data: data[:1] + ["landmark"] + data[2:]), "entry 1: expected"),
        Case(f"{MAP}: no landmark", MAP, edit_json(lambda data: []), "no landmark"),
        Case(f"{MAP}: an object at the top", MAP, edit_json(lambda data: {"landmarks": data}),
             "top level"),
    ]
    return cases


def feature_cases() -> list[Case]:
    key = r"neighbourhood 'fidi', key '\d+_\d+_[NESW][12]'"
    view = r"key '\d+_\d+_[NESW][12]'"

    def planted(value):
        return lambda vec: vec[:1] + [value] + vec[2:]

    cases = [Case(f"{RESNET}: fidi: {what}", RESNET, _fidi(edit), f"{key}: .*{problem}")
             for what, edit, problem in [
                 ("NaN", planted(float("nan")), r"non-finite value nan at index \(1,\)"),
                 ("inf", planted(float("inf")), "non-finite value inf"),
                 ("1e300", planted(1e300), "not finite as float32"),
                 ("-1e39", planted(-1e39), "not finite as float32"),
                 ("a string in it", planted("0.5"), "expected a non-empty flat list"),
                 ("null in it", planted(None), "expected a non-empty flat list"),
                 ("bools", lambda vec: [True] * len(vec), "expected a non-empty flat list"),
                 ("empty", lambda vec: [], "expected a non-empty flat list"),
                 ("nested", lambda vec: [vec], "expected a non-empty flat list"),
                 ("a number", lambda vec: 0.5, "expected a non-empty flat list"),
                 ("one number more", lambda vec: vec + [0.0], "expected 4 numbers")]]
    cases += [
        Case(f"{RESNET}: fidi: a relevant view missing", RESNET,
             _fidi(lambda vec: DELETE, lr.relevant_views(0, 0)[0]),
             r"neighbourhood 'fidi': no vector for view"),
        Case(f"{RESNET}: fidi: a key renamed", RESNET, edit_json(_first_key_renamed),
             r"neighbourhood 'fidi', key '\d+-\d+_[NESW][12]': expected a view key"),
        Case(f"{RESNET}: fidi missing", RESNET, set_field(None, "fidi", DELETE),
             "no neighbourhood 'fidi'"),
        Case(f"{RESNET}: fidi a list", RESNET, set_field(None, "fidi", []),
             "neighbourhood 'fidi': expected an object"),
        Case(f"{RESNET}: a list at the top", RESNET, edit_json(lambda data: [data]), "top level"),
    ]
    cases += [Case(f"{TEXT}: {what}", TEXT, _fidi(edit), f"{view}{problem}")
              for what, edit, problem in [
                  ("lex_recog a number", lambda e: [{"lex_recog": 5}],
                   ", entry 0, field 'lex_recog'"),
                  ("lex_recog deleted", lambda e: [{"text": "cafe"}],
                   ", entry 0, field 'lex_recog'"),
                  ("an entry a string", lambda e: ["cafe"], ", entry 0, field 'lex_recog'"),
                  ("entries an object", lambda e: {"lex_recog": "cafe"},
                   ": expected a list of entries")]]
    cases += [
        Case(f"{TEXT}: a key renamed", TEXT, edit_json(_first_key_renamed),
             r"key '\d+-\d+_[NESW][12]': expected a view key"),
        Case(f"{TEXT}: a list at the top", TEXT, edit_json(lambda data: [data]), "top level"),
    ]
    return cases


def cases() -> list[Case]:
    return ([c for f in (DIALOGUES, CONFIGS, MAP, RESNET, TEXT) for c in file_damage(f)]
            + dialogue_cases() + configuration_cases() + map_cases() + feature_cases())


RELEASE = Release("talk_the_walk", build, flags, cases)
