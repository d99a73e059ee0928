"""Every Talk The Walk experiment on one folder laid out as the official release (the extracted
`talkthewalk.tgz`): the real fidi map as `fidi/map.json` (../shared/data/ttw/maps), synthetic
dialogues `talkthewalk.{train,valid,test}.json` on it with their `configurations.*.json`, the
landmark-classification features `resnetfeat.json` and `fidi/text.json`, and the `dict.txt`
that `ttw/dict.py` writes. Landmark classification, the human baselines, the language `paper`
config (tiny sizes, one or two epochs a stage) and the emergent `paper` config (enumerated walks, one
epoch) each run a few steps on it; the checks are of what each read and how long it trained."""
import json
import os
import shutil

import numpy as np
import pytest

from experiments.ttw_emergent import train as emergent_train
from experiments.ttw_emergent.configs import paper as emergent_paper
from experiments.ttw_landmarks import train as landmarks_train
from experiments.ttw_landmarks.configs import default as landmarks_default
from experiments.ttw_language import human as human_command, train as language_train
from experiments.ttw_language.configs import paper as language_paper
from tests.conftest import shared_path, xla_optimizations
from ttw_jax.talk_the_walk import maps, walks
from ttw_jax.talk_the_walk.landmarks import release as landmark_release
from ttw_jax.talk_the_walk.language import dialogues as td, release_dict
from ttw_jax.talk_the_walk.language.synthetic import synthetic_dialogues

pytestmark = pytest.mark.slow   # end to end on release-format files

NBH = "fidi"                              # 8 x 10 corners: 6 train, 4 valid, 2 test windows
DIALOGUES = {"train": (14, 0), "valid": (4, 1), "test": (4, 2)}   # split: (number, seed)


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f)


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> str:
    """The release folder: every file an experiment reads, in the release's layout."""
    data = str(tmp_path_factory.mktemp("talkthewalk") / "data")
    nested = maps.map_paths(data, NBH)[0]                      # <nbh>/map.json, as released
    os.makedirs(os.path.dirname(nested))
    shutil.copy(maps.find_map_file(shared_path("ttw", "maps"), NBH), nested)
    nmaps = maps.load_maps(data)
    for split, (num, seed) in DIALOGUES.items():
        episodes = synthetic_dialogues(nmaps, num, seed, split=split)
        write_json(os.path.join(data, td.DIALOGUE_FILES[split]), episodes)
        write_json(os.path.join(data, td.CONFIGURATION_FILES[split]),
                   [{k: ep[k] for k in ("neighborhood", "boundaries", "target_location")}
                    for ep in episodes])
    landmark_release.write_synthetic_release(data, {m.name: m.corners for m in nmaps}, seed=0,
                                             dim=8)
    with open(os.path.join(data, release_dict.DICT_FILE), "w", encoding="utf-8") as f:
        f.write(release_dict.format_dict(release_dict.build_dict_file(data)))
    return data


def test_landmark_classification(release, tmp_path):
    c = landmarks_default.get_config()
    c.data.maps_dir = c.data.features_dir = release
    c.num_epochs = 2
    res = landmarks_train.train_and_evaluate(c, str(tmp_path))
    assert sum(res["corners"].values()) == 8 * 10            # every fidi corner, one example
    assert 1 <= res["best_epoch"] <= 2
    assert release in json.dumps(res["provenance"])


def test_human_baselines(release):
    _, out = human_command.report(("train", "valid", "test"), data_dir=release)
    counts = {s: out[s]["dialogues"] for s in DIALOGUES}
    assert counts == {s: n for s, (n, _) in DIALOGUES.items()}
    assert out["all"]["dialogues"] == sum(counts.values())
    assert out["all"]["success_rate"] == 100.0     # percent: every dialogue ends on its target


def test_language_paper_config(release, tmp_path):
    c = language_paper.get_config()
    c.data.manual_dir, c.data.tfds_dir = release, str(tmp_path / "tfds")
    c.tourist.embed = c.tourist.hidden = c.tourist.context_features = 8
    c.tourist.decoder_hidden = 16
    c.guide.embed = c.guide.hidden = 8
    c.guide.features = 16                                     # 2 x hidden (no obs projection)
    c.tourist.num_epochs = 2
    c.guide.num_epochs = c.generated.num_epochs = 1
    c.tourist.batch_size = c.guide.batch_size = 16
    c.generated.batch_size = 128
    c.contexts, c.compare_masc, c.generated.Ts, c.pg.T = "1", False, "1", 1
    c.num_devices = 1
    c.pg.num_steps = 0                                        # ours, not the release's: skipped
    c.data.generated_len = 8
    c.eval.num_walks = c.eval.batch_size = 32
    c.eval.beam_sizes = ""                                    # Table 12's sweep: not needed here
    c.generated.human_trajectories = False    # a fixed-set stage like the tourist's: time saved
    c.full_task.splits = ""                   # evaluation only, run by the trainer's contract test
    workdir = str(tmp_path / "run")
    with xla_optimizations(False):
        res = language_train.train_and_evaluate(c, workdir)

    assert res["dialogues"] == {s: n for s, (n, _) in DIALOGUES.items()}
    dict_path = os.path.join(release, release_dict.DICT_FILE)
    assert res["vocab_source"] == dict_path                   # dict.txt read as shipped
    words = release_dict.released_vocab(release_dict.read_dict(dict_path)).words
    with open(os.path.join(workdir, "vocab.json"), encoding="utf-8") as f:
        assert tuple(json.load(f)) == words
    per_epoch = {"tourist": -(-res["examples"]["train"] // 16)}
    assert res["tourist"]["steps_per_epoch"] == per_epoch["tourist"]
    assert res["tourist"]["last_step"] == 2 * per_epoch["tourist"]     # no early stop
    assert 1 <= res["tourist"]["best_epoch"] <= 2
    assert res["human"]["c1_masc"]["last_step"] == per_epoch["tourist"]  # same examples, batch
    train_windows = len(maps.windows(maps.load_maps(release), "train").landmarks)
    assert train_windows == 6
    walks_per_epoch = walks.enumeration_size(1, num_windows=train_windows)[0]   # 6 * 16 * 4
    assert res["generated"]["T1"]["last_step"] == -(-walks_per_epoch // 128) == 3
    valid_evals = [json.loads(line) for line in open(os.path.join(workdir, "tourist",
                                                                  "metrics.jsonl"))]
    assert [m["step"] for m in valid_evals if "valid/ce" in m] == [per_epoch["tourist"],
                                                                   2 * per_epoch["tourist"]]
    assert release in json.dumps(res["provenance"])


def test_emergent_paper_config(release, tmp_path):
    c = emergent_paper.get_config()
    c.data.maps_dir = release
    c.T, c.model.features, c.batch_size, c.num_epochs = 1, 16, 64, 1
    c.num_devices = 1
    c.full_task.splits, c.write_plots = "", False
    with xla_optimizations(False):
        res = emergent_train.train_and_evaluate(c, str(tmp_path))
    assert res["steps_per_epoch"] == 6 * 16 * 4 // 64 and res["last_step"] == 6
    assert res["test"]["examples"] == 2 * 16 * 4                # the 2 test windows, enumerated
    assert np.isfinite(res["valid"]["accuracy"])
