"""TFDS conventions of the builders: `import ttw_datasets` registers all of them, each cites its
paper and names the release's page, and each writes ArrayRecord by default (no TensorFlow)."""
import json
import subprocess
import sys

import pytest
import tensorflow_datasets as tfds

import ttw_datasets
from tests.conftest import ROOT

NAMES = ("ttw_localization", "talk_the_walk", "touchdown", "rxr", "arramon")
TITLES = {"ttw_localization": "Talk the Walk: Navigating New York City through Grounded Dialogue",
          "talk_the_walk": "Talk the Walk: Navigating New York City through Grounded Dialogue",
          "touchdown": "Touchdown: Natural Language Navigation and Spatial Reasoning",
          "rxr": "Room-Across-Room: Multilingual Vision-and-Language Navigation",
          "arramon": "ArraMon: A Joint Navigation-Assembly Instruction Interpretation Task"}
HOMEPAGES = {"ttw_localization": "https://github.com/facebookresearch/talkthewalk",
             "talk_the_walk": "https://github.com/facebookresearch/talkthewalk",
             "touchdown": "https://github.com/lil-lab/touchdown",
             "rxr": "https://github.com/google-research-datasets/RxR",
             "arramon": "https://github.com/hyounghk/ArraMon"}

REGISTRATION = f"""
import json, sys
sys.path.insert(0, {ROOT!r})
import tensorflow_datasets as tfds
def known(name):
    try:
        return tfds.builder_cls(name).__module__
    except Exception:
        return None
before = {{n: known(n) for n in {NAMES!r}}}
import ttw_datasets
print(json.dumps({{"before": before, "after": {{n: known(n) for n in {NAMES!r}}}}}))
"""


def test_importing_ttw_datasets_registers_every_builder():
    out = subprocess.run([sys.executable, "-c", REGISTRATION], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    found = json.loads(out.strip().splitlines()[-1])
    assert all(m is None for m in found["before"].values()), found["before"]
    for name, module in found["after"].items():
        assert module == f"ttw_datasets.{name}.{name}_dataset_builder", (name, module)


@pytest.mark.parametrize("name", NAMES)
def test_every_builder_cites_its_paper_and_the_release(name, tmp_path):
    info = getattr(ttw_datasets, name).Builder(data_dir=str(tmp_path)).info
    citation = " ".join(info.citation.split())
    assert citation.startswith("@") and citation.rstrip().endswith("}")
    assert TITLES[name] in citation
    assert info.homepage == HOMEPAGES[name]


def test_a_plain_download_and_prepare_writes_array_record(tmp_path):
    builder = ttw_datasets.ttw_localization.Builder(config="synthetic", data_dir=str(tmp_path))
    assert builder.info.file_format == tfds.core.FileFormat.ARRAY_RECORD
    builder.download_and_prepare()            # TFRecord would need TensorFlow here
    reread = tfds.builder("ttw_localization/synthetic", data_dir=str(tmp_path))
    assert reread.info.file_format == tfds.core.FileFormat.ARRAY_RECORD
    assert {s: len(v) for s, v in reread.as_data_source().items()} == {
        "train": 61, "valid": 20, "test": 10}
    # An explicit format is kept.
    explicit = ttw_datasets.arramon.Builder(data_dir=str(tmp_path / "other"),
                                            file_format="tfrecord")
    assert explicit.info.file_format == tfds.core.FileFormat.TFRECORD


def test_a_dataset_built_from_other_files_is_refused_and_killed_builds_are_cleaned(tmp_path):
    import json
    import shutil

    from tests.conftest import shared_path
    from ttw_jax.talk_the_walk.language import dataset as ttw_language

    maps_dir = tmp_path / "maps"
    shutil.copytree(shared_path("ttw", "maps"), maps_dir)
    tfds_dir = tmp_path / "tfds"
    stale = tfds_dir / "talk_the_walk" / "synthetic_real_maps" / "incomplete.ABC123_1.0.0"
    stale.mkdir(parents=True)
    ttw_language.prepare("synthetic_real_maps", str(tfds_dir), str(maps_dir))
    assert not stale.exists()                      # a killed build's leftovers are gone
    # Same files: the prepared dataset is used as it is.
    ttw_language.prepare("synthetic_real_maps", str(tfds_dir), str(maps_dir))
    # A fixed map (same landmarks, the file rewritten): refused, naming the file.
    path = maps_dir / "fidi_map.json"
    path.write_text(json.dumps(json.loads(path.read_text()), indent=1))
    with pytest.raises(ValueError, match=r"was built from other files than .*maps holds now "
                                         r"\(fidi_map.json changed\): delete that folder"):
        ttw_language.prepare("synthetic_real_maps", str(tfds_dir), str(maps_dir))
    (maps_dir / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match=r"notes.txt added; fidi_map.json changed"):
        ttw_language.prepare("synthetic_real_maps", str(tfds_dir), str(maps_dir))


def test_the_fingerprint_is_by_content(tmp_path):
    import os
    import shutil

    from ttw_jax.core import tfds as ttw_tfds
    src = tmp_path / "m"
    src.mkdir()
    (src / "a.txt").write_text("hello")
    (src / "b.txt").write_text("world")
    first = ttw_tfds.source_fingerprint(str(src))
    assert first["a.txt"][0] == 5 and first["a.txt"][3] == ttw_tfds.file_sha256(src / "a.txt")
    # an edit that keeps the size and the modification time: found by its content
    st = os.stat(src / "a.txt")
    (src / "a.txt").write_text("HELLO")
    os.utime(src / "a.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
    edited = ttw_tfds.source_fingerprint(str(src), first)
    assert edited["a.txt"][:2] == first["a.txt"][:2]
    assert ttw_tfds.fingerprint_changes(first, edited) == ["a.txt changed"]
    # the same bytes with a new modification time (a copy): no change
    copy = tmp_path / "copy"
    shutil.copytree(src, copy)
    os.utime(copy / "b.txt", ns=(1, 1))
    again = ttw_tfds.source_fingerprint(str(copy), edited)
    assert again["b.txt"][1] != edited["b.txt"][1]
    assert ttw_tfds.fingerprint_changes(edited, again) == []
    # a hash is reused (not read again) while the stat is the recorded one
    stale = {k: v[:3] + ["0" * 64] for k, v in again.items()}
    assert ttw_tfds.source_fingerprint(str(copy), stale)["a.txt"][3] == "0" * 64
    # an older record of [size, mtime] is compared by size and modification time
    legacy = {k: v[:2] for k, v in again.items()}
    assert ttw_tfds.fingerprint_changes(legacy, again) == []
