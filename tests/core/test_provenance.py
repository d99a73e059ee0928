"""The provenance block of results.json: fingerprints, the title line, the refusals of the
evaluation contract, and the schema."""
import json

import ml_collections
import pytest

from ttw_jax.core.train import provenance as prov


def test_the_fingerprint_follows_names_sizes_heads_and_tails(tmp_path):
    (tmp_path / "a.json").write_text("x" * 10)
    big = tmp_path / "sub" / "b.bin"
    big.parent.mkdir()
    body = bytearray(5 * prov.SAMPLE_BYTES)
    big.write_bytes(bytes(body))
    first = prov.fingerprint(tmp_path)
    assert len(first) == 16 and prov.fingerprint(tmp_path) == first
    body[-1] = 1                              # the tail is read
    big.write_bytes(bytes(body))
    second = prov.fingerprint(tmp_path)
    assert second != first
    body[0] = 1                               # the head too
    big.write_bytes(bytes(body))
    assert prov.fingerprint(tmp_path) not in (first, second)
    (tmp_path / "a.json").rename(tmp_path / "c.json")     # and the names
    assert prov.fingerprint(tmp_path) != second
    assert prov.fingerprint(big) == prov.fingerprint(str(big))


def config(**kw):
    return ml_collections.ConfigDict(dict(seed=3, dtype="bfloat16", **kw))


def test_the_title_says_what_is_not_the_papers(tmp_path):
    (tmp_path / "R2R_val_seen.json").write_text("[]")
    real = prov.provenance(config(), data=prov.release_data(tmp_path), seeds=3)
    title = prov.title(real)
    assert not title.startswith("[") and str(tmp_path) in title and "3 seeds" in title
    assert "bfloat16" in title and real["dtype"] == "bfloat16"
    fake = prov.provenance(config(), data=prov.synthetic_data(3),
                           perception=prov.synthetic_perception(3, 32),
                           protocol=prov.protocol("nearest_recorded_pose", "no simulator"))
    assert prov.tags(fake) == ["synthetic data", "synthetic perception",
                               "proxy protocol 'nearest_recorded_pose', not the paper's"]
    assert prov.title(fake).startswith("[SYNTHETIC DATA, SYNTHETIC PERCEPTION, PROXY PROTOCOL")
    assert "single run" in prov.title(fake)
    with pytest.raises(ValueError, match="say why"):
        prov.protocol("nearest_recorded_pose")


def test_a_run_without_a_release_folder_names_its_prepared_data():
    assert prov.release_data("", "rxr/r2r") == {
        "kind": "release", "folder": "prepared TFDS data rxr/r2r", "fingerprint": None}


def test_every_field_and_the_config_hash():
    c = config(model=dict(hidden=4))
    p = prov.provenance(c, data=prov.synthetic_data(0), hidden_splits=["test"])
    assert set(p) == {"data", "perception", "protocol", "code", "config_hash", "device", "dtype",
                      "seeds", "hidden_splits"}
    assert p["perception"] == {"kind": "none"} and p["protocol"] == {"name": "official"}
    assert p["code"]["version"] and isinstance(p["code"].get("modified", False), bool)
    assert p["device"]["count"] >= 1 and p["device"]["platform"] == "cpu"
    c.model.hidden = 5
    assert prov.config_hash(c) != p["config_hash"]
    out = prov.finalize({"test": {"sr": 0.5}, "provenance": "old"}, p)
    assert list(out) == ["schema_version", "test", "provenance"]
    assert out["schema_version"] == prov.SCHEMA_VERSION and out["provenance"] is p


def test_synthetic_perception_with_a_release_needs_its_flag():
    prov.check_perception(False, True, False, "data.features=synthetic")   # synthetic data
    prov.check_perception(True, False, False, "data.features=synthetic")   # real features
    prov.check_perception(True, True, True, "data.features=synthetic")     # the flag
    with pytest.raises(ValueError, match=r"data.features=synthetic with an official release.*"
                                         r"--config.data.allow_synthetic_perception=True"):
        prov.check_perception(True, True, False, "data.features=synthetic")


def test_a_withheld_split_is_never_selected_on():
    prov.check_hidden({"test"}, {"data.dev_split": "val_seen", "eval": ["val_unseen"]})
    with pytest.raises(ValueError, match=r"data.dev_split uses 'test'; eval uses 'test': the "
                                         r"release withholds the references of \['test'\]"):
        prov.check_hidden({"test"}, {"data.dev_split": "test", "eval": ["val_seen", "test"]})


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"schema_version": prov.SCHEMA_VERSION + 1}))
    with pytest.raises(ValueError, match="newer than this ttw_jax reads"):
        prov.read_results(path)
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="holds a JSON object"):
        prov.read_results(path)
