"""`talk_the_walk.validate.validate_release`: a sound release (synthetic maps in both layouts,
dialogues, configurations and landmark features in one folder, as the release ships them) has no
problem, one with planted damage has every planted file named once, each in one line, and the
real maps have none."""
import json
import os

from tests.conftest import SHARED_DATA
from tests.fuzz import edit_json, flip_bytes, set_field
from tests.talk_the_walk import fuzz_cases
from ttw_jax.talk_the_walk import maps, validate
from ttw_jax.talk_the_walk.landmarks import release as lr
from ttw_jax.talk_the_walk.language import dialogues as td
from ttw_jax.talk_the_walk.language.synthetic import synthetic_dialogues

NESTED = ("hellskitchen", "williamsburg")     # `<nbh>/map.json`; the others `<nbh>_map.json`


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f)


def release(tmp_path):
    """(folder, {split: dialogues}): every file of the release in one folder."""
    data = str(tmp_path / "release")
    nmaps = maps.synthetic_maps(0)
    for m in nmaps:
        write_json(maps.map_paths(data, m.name)[0 if m.name in NESTED else 1], maps.to_map_json(m))
    episodes = {}
    for seed, split in enumerate(maps.SPLITS):
        episodes[split] = synthetic_dialogues(nmaps, 4, seed, split=split)
        write_json(os.path.join(data, td.DIALOGUE_FILES[split]), episodes[split])
        write_json(os.path.join(data, td.CONFIGURATION_FILES[split]),
                   [{k: ep[k] for k in ("neighborhood", "boundaries", "target_location")}
                    for ep in episodes[split]])
    lr.write_synthetic_release(data, {m.name: m.corners for m in nmaps}, seed=0, dim=8)
    return data, episodes


def test_a_sound_release_has_no_problem(tmp_path):
    data, _ = release(tmp_path)
    assert validate.validate_release(data) == ([], 6)
    assert validate.validate_release(data, data, data) == ([], 6 + 5 + 1 + 5)


def test_every_planted_damage_is_named(tmp_path):
    data, episodes = release(tmp_path)
    join = lambda *p: os.path.join(data, *p)   # noqa: E731
    lost = episodes["train"][0]["neighborhood"]
    lost_path = maps.find_map_file(data, lost)
    os.remove(lost_path)
    bad = next(n for n in maps.NEIGHBORHOODS if n != lost)
    bad_map = maps.find_map_file(data, bad)
    entries = json.load(open(bad_map))
    entries[0]["orientation"] = "XX"
    write_json(bad_map, entries)
    valid = join(td.DIALOGUE_FILES["valid"])
    text = open(valid).read()
    open(valid, "w").write(text[:len(text) // 2])
    test = join(td.DIALOGUE_FILES["test"])
    eps = episodes["test"]
    eps[1]["start_location"] = [eps[1]["boundaries"][2] + 1, eps[1]["boundaries"][1], 0]
    write_json(test, eps)
    config = join(td.CONFIGURATION_FILES["valid"])
    write_json(config, json.load(open(config)) + [json.load(
        open(join(td.CONFIGURATION_FILES["train"])))[0]])
    resnet = join(lr.RESNET_FILE)
    feats = json.load(open(resnet))
    key = sorted(feats["fidi"])[0]
    feats["fidi"][key][0] = float("nan")
    write_json(resnet, feats)
    text_file = join("eastvillage", lr.TEXT_FILE)
    views = json.load(open(text_file))
    first = sorted(views)[0]
    views[first] = [{"text": "cafe"}]
    write_json(text_file, views)

    problems, checked = validate.validate_release(data, data, data)
    assert all("\n" not in p for p in problems)
    n = len(json.load(open(config))) - 1
    expected = [f"{valid}: invalid JSON at line 1",
                f"{test}: episode 1: field 'start_location': corner",
                f"{config}: configuration {n}: field 'boundaries': window ",
                f"{bad_map}: entry 0, field 'orientation': expected one of ('NW', 'SW', 'NE', "
                "'SE'), got 'XX'",
                f"{data}: no map for 1 neighbourhoods the dialogues use ('{lost}' in "
                f"{join(td.DIALOGUE_FILES['train'])})",
                f"{resnet}: neighbourhood 'fidi', key '{key}': non-finite value nan at index (0,)",
                f"{text_file}: key '{first}', entry 0, field 'lex_recog'"]
    for needle in expected:
        assert sum(p.startswith(needle) for p in problems) == 1, (needle, problems)
    for planted in (valid, test, config, bad_map, lost_path, resnet, text_file):
        assert sum(planted in p for p in problems) == 1, (planted, problems)
    assert len(problems) == len(expected)
    assert checked == 6 + 4 + 1 + 5


def test_missing_views_and_folders_are_named(tmp_path):
    data, _ = release(tmp_path)
    resnet = os.path.join(data, lr.RESNET_FILE)
    feats = json.load(open(resnet))
    del feats["fidi"][lr.relevant_views(0, 0)[0]]
    write_json(resnet, feats)
    problems, _ = validate.validate_release(data, data, data)
    assert problems == [f"{resnet}: neighbourhood 'fidi': no vector for view "
                        f"'{lr.relevant_views(0, 0)[0]}' of corner (0, 0)"]
    nowhere = str(tmp_path / "nowhere")
    problems, checked = validate.validate_release(nowhere, nowhere, nowhere)
    assert checked == 0 and len(problems) == 3
    assert all(p.startswith(f"{nowhere}: not a folder. ") for p in problems)
    os.mkdir(nowhere)
    problems, _ = validate.validate_release(nowhere)
    assert len(problems) == 1 and problems[0].startswith(
        f"{nowhere}: no dialogue file (expected any of talkthewalk.train.json")


def test_the_real_maps_have_no_problem():
    real = os.path.join(SHARED_DATA, "ttw", "maps")
    assert os.path.isdir(real), f"shared data missing: {real}"
    assert validate.validate_release(real, real) == ([], 4)


def test_five_planted_faults_one_a_damaged_dialogue_file_are_all_named(tmp_path):
    """One pass over the fuzz corpus's small release (real maps) names each of 5 faults in 5
    files: flipped bytes in a dialogue file, an episode with `dialog: []` in another, an unknown
    landmark type in a map, a float64 1e300 (infinite as float32) in `resnetfeat.json` and a
    number for a recognised text in `<nbh>/text.json`."""
    fuzz_cases.build(tmp_path)
    train, valid = (tmp_path / td.DIALOGUE_FILES[s] for s in ("train", "valid"))
    nmap, resnet = tmp_path / "fidi" / "map.json", tmp_path / lr.RESNET_FILE
    text = tmp_path / "hellskitchen" / lr.TEXT_FILE
    flip_bytes(at=0.5)(train)
    set_field(0, "dialog", [])(valid)
    set_field(0, "type", "Castle")(nmap)
    set_field(None, "hellskitchen.0_0_W1.2", 1e300)(resnet)
    edit_json(lambda views: views.update({k: [{"lex_recog": 5}] for k in sorted(views)[:1]}))(text)
    problems, _ = validate.validate_release(str(tmp_path), str(tmp_path), str(tmp_path))
    expected = [f"{train}: unreadable", f"{valid}: episode 0: field 'dialog': an empty dialogue",
                f"{nmap}: entry 0, field 'type': unknown landmark type 'Castle'",
                f"{resnet}: neighbourhood 'hellskitchen', key '0_0_W1': value 1e+300 at index "
                "(2,) is not finite as float32", f"{text}: key "]
    assert [sum(p.startswith(e) for p in problems) for e in expected] == [1] * 5, problems
    assert len(problems) == 5
