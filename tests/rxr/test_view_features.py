"""View-feature files as the VLN codebases ship them (`ttw_jax.rxr.view_features`): the
Matterport3DSimulator TSV and the per-viewpoint HDF5 written from arrays load equal to them in the
simulator's view order, through a cache keyed by content that is reused and never stale; every
kind of bad input gets an error naming the file, the line (or dataset) and the field; rows of
viewpoints a loaded graph lacks are refused or (`data.features_extra_viewpoints=skip`) skipped and
counted; and a split without the release's text features is refused naming the split and where
they were looked for."""
import base64
import json
import math
import os

import numpy as np
import pytest

from ttw_jax.core.pano_graph import NodeTable
from ttw_jax.rxr import training_data, view_features as vf
from ttw_jax.rxr.views import VIEW_ELEVATIONS, VIEW_HEADINGS

IDS = ["scanA/a0", "scanA/a1", "scanA/a2", "scanB/b0", "scanB/b1"]
D = 8


def features(n=len(IDS), d=D, seed=0):
    """[n, 36, d]: feature 0 of view v is v (the view order is visible), the rest random."""
    f = np.random.default_rng(seed).normal(size=(n, 36, d)).astype(np.float32)
    f[:, :, 0] = np.arange(36)
    return f


def nodes(ids=IDS):
    return NodeTable.from_ids(list(ids))


def write_features(path, ids, f):
    """Writes features [V, 36, D] of `ids` in the format of `path`'s suffix; returns `path`."""
    fmt = vf.file_format(path)
    if fmt == "npz":
        np.savez(path, ids=np.asarray(ids), features=f)
    else:
        (vf.write_tsv if fmt == "tsv" else vf.write_hdf5)(path, ids, f)
    return path


def test_the_view_order_is_the_simulators():
    # precompute_img_features.py: view 0 at heading 0, elevation -30; each view turns right
    # 30 degrees; every 12th view also looks up 30 degrees
    for v in range(36):
        assert VIEW_HEADINGS[v] == pytest.approx(math.radians(30 * (v % 12)))
        assert VIEW_ELEVATIONS[v] == pytest.approx(math.radians(30 * (v // 12) - 30))


@pytest.mark.parametrize("fmt", ["tsv", "hdf5", "npz"])
def test_files_written_from_arrays_load_equal_to_them(tmp_path, fmt):
    f = features()
    path = str(tmp_path / f"feats.{fmt}")
    if fmt == "tsv":
        vf.write_tsv(path, IDS, f)
        raw = open(path, "rb").read()
        assert raw.count(b"\r\n") == len(IDS) and raw.count(b"\t") == 5 * len(IDS)
        first = raw.split(b"\r\n")[0].split(b"\t")
        assert first[:5] == [b"scanA", b"a0", b"640", b"480", b"60"]
        np.testing.assert_array_equal(
            np.frombuffer(base64.b64decode(first[5]), "<f4").reshape(36, D), f[0])
    elif fmt == "hdf5":
        vf.write_hdf5(path, IDS, f)
    else:
        np.savez(path, ids=np.asarray([i.replace("/", "_") for i in IDS]), features=f)
    # the graph's node order differs from the file's, and holds a subset of it
    graph_ids = ["scanB/b1", "scanA/a2", "scanA/a0", "scanB/b0", "scanA/a1"]
    table = vf.feature_table(path, nodes(graph_ids), str(tmp_path / "cache"))
    want = f[[IDS.index(i) for i in graph_ids]]
    assert table.dtype == np.float32 and table.shape == (5, 36, D)
    tol = 0 if fmt == "npz" else 2e-3      # the cache stores float16
    np.testing.assert_allclose(table, want, rtol=tol, atol=tol)
    np.testing.assert_array_equal(table[:, :, 0], np.tile(np.arange(36), (5, 1)))


def test_the_cache_is_reused_and_never_stale(tmp_path, monkeypatch):
    path, cache = str(tmp_path / "f.tsv"), str(tmp_path / "cache")
    vf.write_tsv(path, IDS, features(seed=1))
    first = vf.feature_table(path, nodes(), cache)
    folder = vf.cache_folder(path, cache)
    assert sorted(os.listdir(folder)) == ["features.f16", "ids.json", "meta.json"]
    assert os.path.getsize(os.path.join(folder, "features.f16")) == len(IDS) * 36 * D * 2
    decoded = []
    real = vf.tsv_rows
    monkeypatch.setattr(vf, "tsv_rows", lambda *a, **k: decoded.append(1) or real(*a, **k))
    np.testing.assert_array_equal(vf.feature_table(path, nodes(), cache), first)
    assert decoded == []                                   # a restart decodes nothing
    vf.write_tsv(path, IDS, features(seed=2))              # new content, same size
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    again = vf.feature_table(path, nodes(), cache)
    assert decoded == [1]
    np.testing.assert_allclose(again, features(seed=2), atol=2e-3)
    assert not np.allclose(again, first, atol=2e-3)


def test_a_header_row_and_bare_newlines_are_accepted(tmp_path):
    path = str(tmp_path / "f.tsv")
    rows = [vf.encode_tsv_row(*i.split("/"), f).replace("\r\n", "\n")
            for i, f in zip(IDS, features())]
    open(path, "w").write("\t".join(vf.TSV_FIELDS) + "\n" + "".join(rows) + "\n")
    np.testing.assert_allclose(vf.feature_table(path, nodes(), str(tmp_path / "c")),
                               features(), atol=2e-3)


def write_rows(path, rows):
    open(path, "w", newline="").write("".join(rows))


def rows_of(f=None, ids=IDS):
    f = features() if f is None else f
    return [vf.encode_tsv_row(*i.split("/"), x) for i, x in zip(ids, f)]


def error(tmp_path, rows, graph=IDS, name="f.tsv"):
    path = str(tmp_path / name)
    write_rows(path, rows)
    with pytest.raises(vf.ViewFeatureError) as e:
        vf.feature_table(path, nodes(graph), str(tmp_path / "cache"))
    cache = tmp_path / "cache"
    assert not [d for d in os.listdir(cache) if ".tmp." in d]   # a failed conversion: no remains
    return str(e.value), path


def test_bad_tsv_rows_are_named_by_file_line_and_field(tmp_path):
    rows = rows_of()
    # a truncated file: the last row's base64 cut short
    head = rows[4].rsplit("\t", 1)[0] + "\t"
    blob = rows[4][len(head):]
    msg, path = error(tmp_path, rows[:4] + [head + blob[:402] + "\r\n"])
    assert msg.startswith(f"{path}:5: field 'features': not base64")
    msg, path = error(tmp_path, rows[:4] + [head + blob[:400] + "\r\n"])
    assert msg.startswith(f"{path}:5: field 'features': 300 bytes, not float32 [36, D] (a "
                          "multiple of 144; a truncated row?)")
    # a row with another feature size
    other = vf.encode_tsv_row("scanA", "a2", features(1, 2 * D)[0])
    msg, path = error(tmp_path, rows[:2] + [other] + rows[3:])
    assert msg.startswith(f"{path}:3: field 'features': [36, 16], but the rows before it are "
                          f"[36, {D}]")
    # 35 views of 8 features: not float32 [36, D]
    short = "\t".join(["scanA", "a2", "640", "480", "60", base64.b64encode(
        np.zeros((35, 8), "<f4").tobytes()).decode()]) + "\r\n"
    msg, path = error(tmp_path, rows[:2] + [short] + rows[3:])
    assert msg.startswith(f"{path}:3: field 'features': 1120 bytes, not float32 [36, D]")
    # a missing field, a non-numeric vfov
    msg, path = error(tmp_path, [rows[0], "scanA\ta1\t640\t480\t60\n"] + rows[2:])
    assert msg.startswith(f"{path}:2: 5 tab-separated fields, expected 6")
    msg, path = error(tmp_path, [rows[0].replace("\t60\t", "\tsixty\t")] + rows[1:])
    assert msg.startswith(f"{path}:1: field 'vfov' is b'sixty', not a number")
    # a duplicate row
    msg, path = error(tmp_path, rows + [rows[1]])
    assert msg == (f"{path}:6: fields 'scanId', 'viewpointId': viewpoint scanA/a1 is listed "
                   f"twice (first at {path}:2)")
    # non-finite features
    bad = features()
    bad[3, 7, 2] = np.nan
    msg, path = error(tmp_path, rows_of(bad))
    assert msg.startswith(f"{path}:4: field 'features': non-finite values (view 7)")


def test_viewpoints_missing_from_either_side_are_errors(tmp_path):
    # a row of a loaded scan whose viewpoint is not in its graph
    msg, path = error(tmp_path, rows_of(), graph=[i for i in IDS if i != "scanA/a1"])
    assert msg == (f"{path}:2: field 'viewpointId': a1 is not a viewpoint of scan scanA's "
                   "connectivity graph (included viewpoints; "
                   "--config.data.features_extra_viewpoints=skip skips such rows)")
    # rows of scans the graph does not hold are skipped; graph viewpoints without rows counted
    path = str(tmp_path / "g.tsv")
    write_rows(path, rows_of()[:3])
    table = vf.feature_table(path, nodes(IDS[:3]), str(tmp_path / "cache"))
    assert table.shape == (3, 36, D)
    with pytest.raises(vf.ViewFeatureError, match=r"g.tsv: 2 of the 5 viewpoints of the loaded "
                                                  r"scans have no features, e.g. \['scanB/b0'"):
        vf.feature_table(path, nodes(), str(tmp_path / "cache"))


def test_bad_hdf5_and_npz_files_are_named(tmp_path):
    import h5py
    path = str(tmp_path / "f.h5")
    with h5py.File(path, "w") as f:
        f["scanA_a0"] = np.zeros((36, 4), np.float32)
        f["scanA_a1"] = np.zeros((12, 4), np.float32)
    with pytest.raises(vf.ViewFeatureError, match=r"f.h5: dataset 'scanA_a1': float32 \(12, 4\), "
                                                  r"expected numbers \[36, D\]"):
        vf.feature_table(path, nodes(IDS[:2]), str(tmp_path / "c"))
    with h5py.File(path, "w") as f:
        f["scanAa0"] = np.zeros((36, 4), np.float32)
    with pytest.raises(vf.ViewFeatureError, match="dataset 'scanAa0': the name is not "
                                                  "'<scan>_<viewpoint>'"):
        vf.feature_table(path, nodes(IDS[:1]), str(tmp_path / "c2"))
    open(path, "wb").write(b"not hdf5")
    with pytest.raises(vf.ViewFeatureError, match="not a readable HDF5 file"):
        vf.feature_table(path, nodes(IDS[:1]), str(tmp_path / "c3"))
    npz = str(tmp_path / "f.npz")
    np.savez(npz, ids=np.asarray(["scanA/a0", "scanA/a0"]), features=np.zeros((2, 36, 4)))
    with pytest.raises(vf.ViewFeatureError, match=r"array 'ids': viewpoint scanA/a0 at rows 0 and 1"):
        vf.feature_table(npz, nodes(IDS[:1]), str(tmp_path / "c"))
    np.savez(npz, ids=np.asarray(["scanA/a0"]), features=np.zeros((1, 12, 4)))
    with pytest.raises(vf.ViewFeatureError, match=r"array 'features' is float64 \(1, 12, 4\)"):
        vf.feature_table(npz, nodes(IDS[:1]), str(tmp_path / "c"))


def test_unknown_suffixes_and_missing_files_name_the_accepted_formats(tmp_path):
    with pytest.raises(ValueError, match=r"unknown view-feature file type '.csv'; accepted: "
                                         r".h5, .hdf5, .npz, .tsv"):
        vf.file_format("x/feats.csv")
    with pytest.raises(FileNotFoundError, match="view-feature file missing: .*nope.tsv .*"
                                                "Matterport3DSimulator TSV"):
        vf.feature_table(str(tmp_path / "nope.tsv"), nodes(), str(tmp_path / "c"))


def test_meta_records_where_each_row_comes_from(tmp_path):
    path = str(tmp_path / "f.tsv")
    open(path, "w", newline="").write("\r\n".join([""] + [r.rstrip("\r\n") for r in rows_of()]))
    folder = vf.convert(path, str(tmp_path / "cache"), progress=False)
    meta = json.load(open(os.path.join(folder, "meta.json")))
    assert meta["where"] == [2, 3, 4, 5, 6] and meta["shape"] == [5, 36, D]
    assert json.load(open(os.path.join(folder, "ids.json"))) == IDS


def test_the_bfloat16_device_table_decodes_to_bfloat16_values():
    import jax.numpy as jnp
    import ml_dtypes
    from ttw_jax.rxr import views
    f = features(seed=3)
    bits = views.device_table(f, "bfloat16")
    assert bits.dtype == np.uint16 and bits.nbytes == f.nbytes // 2
    got = np.asarray(views.gather_views(jnp.asarray(bits), jnp.asarray([4, 1])))
    np.testing.assert_array_equal(got, f[[4, 1]].astype(ml_dtypes.bfloat16).astype(np.float32))
    np.testing.assert_array_equal(
        np.asarray(views.gather_views(jnp.asarray(views.device_table(f)), 2)), f[2])
    with pytest.raises(ValueError, match="must be one of"):
        views.device_table(f, "float16")


@pytest.mark.parametrize("fmt", ["tsv", "hdf5", "npz"])
def test_rows_of_viewpoints_the_graph_lacks_are_skipped_and_counted_when_asked(tmp_path, fmt,
                                                                              caplog):
    f = features()
    path = write_features(str(tmp_path / f"feats.{fmt}"), IDS, f)
    graph = ["scanA/a2", "scanB/b1"]            # scanA/a0, a1 and scanB/b0 are extra rows
    with pytest.raises(vf.ViewFeatureError, match="features_extra_viewpoints=skip"):
        vf.feature_table(path, nodes(graph), str(tmp_path / "c"))          # default: refuse
    with caplog.at_level("WARNING"):
        table = vf.feature_table(path, nodes(graph), str(tmp_path / "c"),
                                 extra_viewpoints="skip")
    np.testing.assert_allclose(table, f[[2, 4]], atol=2e-3)
    logged = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert len(logged) == 1 and logged[0].startswith(f"{path}: skipped 3 rows"), logged
    assert "e.g. ['scanA/a0', 'scanA/a1', 'scanB/b0']" in logged[0]
    with pytest.raises(ValueError, match=r"features_extra_viewpoints must be one of \('refuse', "
                                         r"'skip'\), got 'drop'"):
        vf.feature_table(path, nodes(graph), str(tmp_path / "c"), extra_viewpoints="drop")


def test_the_config_has_the_extra_viewpoints_option_and_the_trainer_passes_it(tmp_path):
    from experiments.rxr import train
    from experiments.rxr.configs import default
    c = default.get_config()
    assert c.data.features_extra_viewpoints == "refuse"
    assert "data.features_extra_viewpoints" in train.RESUMABLE_CHANGES   # the table is the same
    path = str(tmp_path / "f.tsv")
    vf.write_tsv(path, IDS, features())
    c.data.features, c.data.features_cache = path, str(tmp_path / "c")
    c.data.features_extra_viewpoints = "skip"
    table = training_data.view_feature_table(c, None, nodes(IDS[:2]))
    np.testing.assert_allclose(table, features()[:2], atol=2e-3)


def test_the_old_npz_only_reader_is_gone_and_a_tsv_reads_through_feature_table(tmp_path):
    from ttw_jax.rxr import views
    # `views.load_view_features` read .npz files only and failed on a TSV ("pickled (object)
    # data"); the one reader of every format is `view_features.feature_table`
    assert not hasattr(views, "load_view_features")
    path = str(tmp_path / "ResNet-152-imagenet.tsv")
    vf.write_tsv(path, IDS, features())
    np.testing.assert_allclose(vf.feature_table(path, nodes(), str(tmp_path / "c")), features(),
                               atol=2e-3)


@pytest.mark.parametrize("fmt", ["tsv", "hdf5"])
def test_another_file_of_the_same_size_and_mtime_is_converted_again(tmp_path, fmt):
    # `cp -p other.tsv feats.tsv`: the same shape, so the same size, and the same mtime
    path, cache = str(tmp_path / f"feats.{fmt}"), str(tmp_path / "cache")
    write_features(path, IDS, features(seed=1))
    st = os.stat(path)
    first = vf.feature_table(path, nodes(), cache)
    np.testing.assert_allclose(first, features(seed=1), atol=2e-3)
    write_features(path, IDS, features(seed=2))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (os.stat(path).st_size, os.stat(path).st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    again = vf.feature_table(path, nodes(), cache)
    np.testing.assert_allclose(again, features(seed=2), atol=2e-3)      # B's values, not A's
    meta = json.load(open(os.path.join(vf.cache_folder(path, cache), "meta.json")))
    assert meta["source"] == vf.fingerprint(path) and meta["source"]["size"] == st.st_size


def test_the_fingerprint_of_a_large_file_samples_its_start_middle_and_end(tmp_path, monkeypatch):
    monkeypatch.setattr(vf, "FINGERPRINT_WHOLE", 4096)
    monkeypatch.setattr(vf, "FINGERPRINT_CHUNK", 64)
    monkeypatch.setattr(vf, "FINGERPRINT_CHUNKS", 8)
    path = str(tmp_path / "big.tsv")
    data = bytearray(np.random.default_rng(0).integers(0, 256, 64 * 1024, np.uint8).tobytes())
    open(path, "wb").write(data)
    base = vf.fingerprint(path)
    assert base == vf.fingerprint(path) and base["size"] == len(data)
    last = len(data) - 64
    for offset in (0, last * 3 // 7, len(data) - 1):   # the first, a middle and the last chunk
        changed = bytearray(data)
        changed[offset] ^= 1
        open(path, "wb").write(changed)
        assert vf.fingerprint(path) != base, offset
    open(path, "wb").write(data + b"x")
    assert vf.fingerprint(path)["size"] == len(data) + 1


def test_a_split_without_text_features_is_refused_naming_the_split(tmp_path, monkeypatch):
    from tests.conftest import shared_path
    from experiments.rxr import train
    from experiments.rxr.configs import default
    from ttw_datasets.rxr.rxr_dataset_builder import SYNTHETIC_TRAIN_SCANS, SYNTHETIC_UNSEEN_SCANS
    from ttw_jax.rxr.synthetic import synthetic_split_records
    conn = shared_path("matterport", "connectivity")
    recs = synthetic_split_records(conn, SYNTHETIC_TRAIN_SCANS[:1], SYNTHETIC_UNSEEN_SCANS[:1],
                                   (("train", 6, 0), ("val_seen", 3, 1), ("val_unseen", 4, 2)))
    for split, rs in recs.items():      # the release's guides; val_unseen without text features
        for r in rs:
            r["annotator"] = "guide"
            r["text_features"] = None if split == "val_unseen" else np.ones((5, 8), np.float32)
    monkeypatch.setattr(training_data, "load_records",
                        lambda *a: ({s: list(r) for s, r in recs.items()}, {}))
    c = default.get_config()
    manual = str(tmp_path / "rxr")
    c.data.tfds_config, c.data.manual_dir, c.data.connectivity_dir = "guide", manual, conn
    c.data.text_features = True
    first = recs["val_unseen"][0]
    expected = os.path.join(manual, "text_features", "rxr_val_unseen",
                            f"{first['instruction_id']:06d}_{first['language'][:2]}"
                            "_text_features.npz")
    with pytest.raises(ValueError) as e:
        train.load_data(c, str(tmp_path))
    msg = str(e.value)
    assert msg.startswith(f"split val_unseen: 4 of 4 instructions have no text features under "
                          f"{os.path.join(manual, 'text_features', 'rxr_val_unseen')}{os.sep} "
                          "(expected {instruction_id:06d}_{lang}_text_features.npz; "
                          f"instruction {first['instruction_id']}'s were looked for at "
                          f"{expected}, "), msg
    assert f"e.g. instruction_id {[r['instruction_id'] for r in recs['val_unseen']]}" in msg
