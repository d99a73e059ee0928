"""What produced each Talk The Walk result (issue 53): the provenance block of every results file,
the landmark classifier's refusal of synthetic features for the release's maps, and the release's
hidden splits (none)."""
import json
import os
import subprocess
import sys

import pytest

from experiments.ttw_emergent import sweep, train as emergent
from experiments.ttw_emergent.configs import default as emergent_default
from experiments.ttw_landmarks import train as landmarks
from experiments.ttw_landmarks.configs import default as landmarks_default
from experiments.ttw_language import human as human_command, train as language
from experiments.ttw_language.configs import default as language_default
from tests.helpers import override
from ttw_jax.core.train import provenance as prov
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.landmarks import release

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIELDS = {"data", "perception", "protocol", "code", "config_hash", "device", "dtype", "seeds",
          "hidden_splits"}


def assert_provenance(written: dict, data_kind: str, perception: dict, seeds: int = 1) -> dict:
    """Every field of a written results file's provenance, of the right kind; returns it."""
    assert written["schema_version"] == prov.SCHEMA_VERSION
    p = written["provenance"]
    assert set(p) == FIELDS
    assert p["data"]["kind"] == data_kind
    if data_kind == "release":
        assert p["data"]["fingerprint"] == prov.fingerprint(p["data"]["folder"])
    else:
        assert isinstance(p["data"]["seed"], int)
    assert p["perception"] == perception
    assert p["protocol"] == {"name": "official"}
    assert isinstance(p["code"]["version"], str) and isinstance(p["code"]["modified"], bool)
    assert len(p["code"]["revision"]) == 40                        # a git checkout
    if "config" in written:
        assert p["config_hash"] == prov.config_hash(written["config"])
    assert len(p["config_hash"]) == 16
    assert p["device"]["platform"] == "cpu" and p["device"]["count"] >= 1
    assert p["device"]["processes"] == 1
    assert p["dtype"] == "float32" and p["seeds"] == seeds and p["hidden_splits"] == []
    return p


def read(path) -> dict:
    with open(path) as f:
        return json.load(f)


def test_the_release_hides_no_split():
    assert maps.HIDDEN_SPLITS == ()
    prov.check_hidden(maps.HIDDEN_SPLITS, {"valid (model selection)": "valid",
                                           "evaluation": maps.SPLITS})


# -- the landmark classifier: release features, or synthetic ones refused for the release's maps


def landmarks_config(**kw):
    return override(landmarks_default.get_config(), num_epochs=2, **kw)


def test_landmarks_refuse_synthetic_features_with_the_release_maps(tmp_path, real_maps_dir):
    c = landmarks_config(data__maps_dir=real_maps_dir)
    with pytest.raises(ValueError, match=r"data\.features_dir='' .*"
                                         r"data\.allow_synthetic_perception=True"):
        landmarks.train_and_evaluate(c, str(tmp_path))
    assert not os.listdir(tmp_path)                                # refused before any work
    landmarks.check_data(landmarks_config())                        # synthetic maps: no refusal
    landmarks.check_data(landmarks_config(data__maps_dir=real_maps_dir,
                                          data__features_dir=str(tmp_path)))


def test_landmarks_with_the_flag_say_synthetic_perception(tmp_path, real_maps_dir, capsys):
    c = landmarks_config(data__maps_dir=real_maps_dir, data__allow_synthetic_perception=True)
    landmarks.train_and_evaluate(c, str(tmp_path))
    p = assert_provenance(read(tmp_path / "results.json"), "release",
                          {"kind": "synthetic", "seed": 0, "width": 64})
    assert p["data"]["folder"] == real_maps_dir and prov.tags(p) == ["synthetic perception"]
    title = prov.title(p)
    assert title.startswith(f"[SYNTHETIC PERCEPTION] data: {real_maps_dir} [")
    assert "perception: synthetic (width 64)" in title
    assert title + "\n" in capsys.readouterr().out                 # printed above the table


def test_landmarks_name_the_release_feature_files_they_read(tmp_path, real_maps_dir):
    feats = str(tmp_path)
    c = landmarks_config(data__maps_dir=real_maps_dir, data__features_dir=feats)
    m = maps.load_maps(real_maps_dir, ["fidi"])[0]
    release.write_synthetic_release(feats, {m.name: m.corners}, seed=0, dim=8)
    resnet = os.path.join(feats, release.RESNET_FILE)
    assert landmarks.run_provenance(c, 8)["perception"] == {
        "kind": "file", "file": resnet, "fingerprint": prov.fingerprint(resnet), "width": 8}
    c.model.features = "resnet,textrecog"                          # text too: the folder
    p = landmarks.run_provenance(c, 8)
    assert (p["perception"]["file"], p["data"]["kind"], prov.tags(p)) == (feats, "release", [])


# -- emergent and natural-language models: the maps' landmark annotations, no perception input


def test_emergent_results_carry_their_provenance(trained, real_maps_dir):
    workdir, results = trained("ttw_emergent")
    written = read(os.path.join(workdir, "results.json"))
    assert written == json.loads(json.dumps(results))
    p = assert_provenance(written, "synthetic", prov.NONE)
    assert p["data"]["seed"] == written["config"]["data"]["synthetic_seed"]
    real = emergent.run_provenance(override(emergent_default.get_config(),
                                            data__maps_dir=real_maps_dir))
    assert real["data"] == prov.release_data(real_maps_dir) and prov.tags(real) == []


def test_language_results_carry_their_provenance(trained, real_maps_dir):
    workdir, _ = trained("ttw_language")
    assert_provenance(read(os.path.join(workdir, "results.json")), "synthetic", prov.NONE)
    c = override(language_default.get_config(), data__tfds_config="real",
                 data__manual_dir=real_maps_dir)
    p = language.run_provenance(c)
    assert p["data"] == prov.release_data(real_maps_dir) and p["perception"] == prov.NONE
    c.data.tfds_config = "synthetic_real_maps"                     # synthetic dialogues
    assert language.run_provenance(c)["data"] == prov.synthetic_data(0)


# -- the other results files: the emergent sweep, the human baselines, the bounds table


def test_the_sweep_file_carries_the_provenance_of_its_seeds(tmp_path):
    base = emergent_default.get_config()
    for seed in (0, 1):
        c = sweep.run_config(base, "masc", "continuous", seed)
        res = {"config": c.to_dict(), "best_step": 10, "last_step": 20}
        for split in maps.SPLITS:
            res[split] = {"accuracy": 0.5, "upper_bound": 0.9, "upper_bound_no_actions": 0.5}
        os.makedirs(tmp_path / f"masc_continuous_s{seed}")
        (tmp_path / f"masc_continuous_s{seed}" / "results.json").write_text(json.dumps(res))
    sweep.run_sweep(base, str(tmp_path), [0, 1], ["masc"], ["continuous"])
    p = assert_provenance(read(tmp_path / "sweep.json"), "synthetic", prov.NONE, seeds=2)
    assert p["config_hash"] == prov.config_hash(base)
    assert (tmp_path / "sweep.md").read_text().startswith(prov.title(p) + "\n\n")
    assert "2 seeds" in prov.title(p)


def test_the_human_baselines_carry_their_provenance():
    text, result = human_command.report(["valid"], synthetic=5, seed=3)
    p = assert_provenance(result, "synthetic", prov.NONE)
    assert p["data"]["seed"] == 3 and text.splitlines()[0] == prov.title(p)
    assert text.startswith("[SYNTHETIC DATA] ")


def test_the_bounds_table_starts_with_its_provenance(real_maps_dir):
    proc = subprocess.run([sys.executable, "-m", "experiments.ttw_emergent.bounds",
                           f"--maps_dir={real_maps_dir}", "--max_T=0", "--labels=final",
                           "--tourists=agnostic"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"data: {real_maps_dir} [{prov.fingerprint(real_maps_dir)}]; "
                            "perception: none; protocol: official;")
