"""Panoramas to the paper's features: the ResNet-18 equals torchvision's, the projection is
checked geometrically, and the whole extraction equals an independent reference (torchvision's
network on slices projected by rotation matrices and a per-pixel loop; the fixture is written by
`data/make_resnet_fixture.py`); the extraction command is resumable and names unreadable images;
extracted features feed the SDR and navigation launchers."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image

from ttw_jax.touchdown import extraction, projection, resnet

FIXTURE = os.path.join(os.path.dirname(__file__), "data", "resnet18_features.npz")


@pytest.fixture(scope="module")
def fixture():
    with np.load(FIXTURE) as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(scope="module")
def variables():
    return resnet.read_torchvision(FIXTURE)


def test_resnet18_equals_torchvision(fixture, variables):
    out = np.asarray(resnet.ResNet18().apply(variables, jnp.asarray(fixture["images"])))
    want = fixture["layer2"]
    assert out.shape == want.shape == (2, 5, 4, 128)       # 37 x 29 -> ceil(/ 8)
    assert np.abs(out - want).max() <= 1e-5 * np.abs(want).max()


def test_the_paper_slice_gives_the_paper_map():
    shapes = jax.eval_shape(lambda x: resnet.ResNet18().init_with_output(jax.random.key(0), x)[0],
                            jax.ShapeDtypeStruct((1, 800, 460, 3), jnp.float32))
    assert shapes.shape == (1, 100, 58, 128)                # x 8 slices = 100 x 464 x 128


def test_weights_files_are_read_by_torchvision_names(fixture, variables, tmp_path):
    from safetensors.numpy import save_file
    state = {k.removeprefix("state/"): v for k, v in fixture.items() if k.startswith("state/")}
    extra = dict(state, **{"fc.weight": np.zeros((1000, 512), np.float32),
                           "layer3.0.conv1.weight": np.zeros((256, 128, 3, 3), np.float32)})
    save_file(extra, str(tmp_path / "resnet18.safetensors"))
    again = resnet.read_torchvision(str(tmp_path / "resnet18.safetensors"))
    assert jax.tree_util.tree_all(jax.tree_util.tree_map(np.array_equal, again, variables))
    del state["layer2.0.downsample.1.running_var"]
    with pytest.raises(KeyError, match="no 'layer2.0.downsample.1.running_var'"):
        resnet.import_torchvision(state)
    state["layer2.0.downsample.1.running_var"] = np.ones(64, np.float32)
    with pytest.raises(ValueError, match="'layer2.0.downsample.1.running_var' has shape"):
        resnet.import_torchvision(state)
    with pytest.raises(FileNotFoundError, match="ResNet-18 weights file not found"):
        resnet.read_torchvision(str(tmp_path / "missing.safetensors"))


def test_perspective_rays():
    offset, pitch = projection.perspective_directions(3, 5, 90.0)
    assert offset[1, 2] == pitch[1, 2] == 0.0                 # the centre pixel looks ahead
    f = 2.5                                                     # (5 / 2) / tan(45)
    assert offset[1, 4] == pytest.approx(np.degrees(np.arctan(2.0 / f)))
    assert pitch[0, 2] == pytest.approx(np.degrees(np.arctan(1.0 / f)))   # row 0 looks up
    assert np.all(np.diff(offset, axis=1) > 0) and np.all(np.diff(pitch, axis=0) < 0)


def test_equirect_samples_reproduce_pixel_centres_and_wrap():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 255, (1, 6, 12, 3)).astype(np.uint8)
    rows, cols = np.mgrid[0:6, 0:12]
    heading = (cols + 0.5) * 30.0 - 180.0
    pitch = 90.0 - (rows + 0.5) * 30.0
    out = projection.sample_equirect(jnp.asarray(image), jnp.asarray(heading[None]),
                                     jnp.asarray(pitch[None]))
    np.testing.assert_allclose(np.asarray(out), image, atol=1e-3)
    # halfway between the last and the first column: their mean (the seam wraps)
    mid = projection.sample_equirect(jnp.asarray(image), jnp.asarray([[180.0]]),
                                     jnp.asarray([[pitch[2, 0]]]))
    np.testing.assert_allclose(np.asarray(mid)[0, 0],
                               (image[0, 2, 0].astype(float) + image[0, 2, 11]) / 2, atol=1e-3)


def test_a_line_at_a_heading_lands_in_its_slice_and_view():
    h, w = 64, 128
    pano = np.zeros((1, h, w, 3), np.uint8)
    col = 95                                   # heading (95.5 / 128) * 360 - 180 = 88.6
    pano[0, :, col] = 255
    rel = (col + 0.5) / w * 360 - 180
    slices = np.asarray(projection.slice_panoramas(jnp.asarray(pano), 8, (40, 24)))
    lit = slices[0, :, 20, :, 0].max(-1)       # slice k looks at yaw + 45 k
    assert np.argmax(lit) == 2 and (lit > 0).sum() == 1
    f = 12 / np.tan(np.radians(22.5))
    expect = 12 + f * np.tan(np.radians(rel - 90)) - 0.5
    assert abs(np.argmax(slices[0, 2, 20, :, 0]) - expect) <= 0.5
    band = projection.equirect_band(jnp.asarray(pano))
    assert band.shape == (1, 84, 504, 3) and band.dtype == jnp.uint8
    yaw = jnp.asarray([30.0])                  # the panorama's centre looks at heading 30
    view = np.asarray(projection.perspective_at_heading(band, yaw, jnp.asarray([0]),
                                                        jnp.asarray([30.0 + rel - 10])))
    f = 42 / np.tan(np.radians(30))
    assert abs(np.argmax(view[0, 42, :, 0]) - (42 + f * np.tan(np.radians(10)) - 0.5)) <= 1
    assert view.shape == (1, 84, 84, 3) and 0.0 <= view.min() and view.max() <= 1.0


def test_extraction_equals_the_independent_reference(fixture, variables):
    size = tuple(int(s) for s in fixture["slice_size"])
    want = fixture["features"]
    f32 = extraction.Extractor(variables, size, out_dtype=jnp.float32)
    got = np.asarray(f32.features(jnp.asarray(fixture["panoramas"])))
    assert got.shape == want.shape == (2, 5, 24, 128)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    f16 = np.asarray(extraction.Extractor(variables, size).features(
        jnp.asarray(fixture["panoramas"])))
    assert f16.dtype == np.float16
    np.testing.assert_allclose(f16.astype(np.float32), want, rtol=1e-3, atol=1e-3)


def _write_panoramas(folder, panoramas, names, suffix=".png"):
    os.makedirs(folder, exist_ok=True)
    for name, pano in zip(names, panoramas):
        Image.fromarray(pano).save(os.path.join(folder, name + suffix))


def test_extract_folder_writes_the_official_layout_resumes_and_names_bad_images(
        fixture, variables, tmp_path):
    size = tuple(int(s) for s in fixture["slice_size"])
    ex = extraction.Extractor(variables, size, out_dtype=jnp.float32)
    panos = str(tmp_path / "panos")
    names = ["pA", "pB", "pC"]
    _write_panoramas(panos, [fixture["panoramas"][0], fixture["panoramas"][1],
                             fixture["panoramas"][0]], names)
    out, rgb = str(tmp_path / "features"), str(tmp_path / "rgb")

    class Killed(Exception):
        pass

    def kill(done):
        raise Killed
    with pytest.raises(Killed):                 # killed after its first batch of 2
        extraction.extract_folder(ex, panos, out, rgb, batch_size=2, progress=False,
                                  on_batch=kill)
    assert sorted(os.listdir(out)) == ["pA.npy", "pB.npy"]
    counts = extraction.extract_folder(ex, panos, out, rgb, batch_size=2, progress=False)
    assert counts == {"done": 1, "skipped": 2, "panoramas": 3}
    for name, i in zip(names, (0, 1, 0)):
        got = np.load(os.path.join(out, f"{name}.npy"))
        assert got.shape == (5, 24, 128)
        assert np.abs(got - fixture["features"][i]).max() <= 1e-5 * np.abs(got).max()
        assert np.load(os.path.join(rgb, f"{name}.npy")).shape == (84, 504, 3)
    assert extraction.extract_folder(ex, panos, out, rgb, progress=False)["done"] == 0
    # damaged and non-panorama images: all named at once, the good one still written
    with open(os.path.join(panos, "pD.jpg"), "wb") as f:
        f.write(b"\xff\xd8\xff\xe0 not really a jpeg")
    Image.fromarray(np.zeros((10, 10, 3), np.uint8)).save(os.path.join(panos, "pE.png"))
    _write_panoramas(panos, [fixture["panoramas"][1]], ["pF"], ".jpg")
    with pytest.raises(extraction.UnreadableImages) as err:
        extraction.extract_folder(ex, panos, out, batch_size=2, progress=False)
    assert sorted(os.path.basename(p) for p in err.value.paths) == ["pD.jpg", "pE.png"]
    assert "not a readable image" in str(err.value) and "10 x 10 pixels" in str(err.value)
    assert os.path.isfile(os.path.join(out, "pF.npy"))
    with pytest.raises(FileNotFoundError, match="panorama folder missing"):
        extraction.extract_folder(ex, str(tmp_path / "nowhere"), out, progress=False)


@pytest.mark.slow
def test_extracted_features_feed_the_sdr_and_navigation_launchers(fixture, tmp_path, tfds_dir):
    from experiments.touchdown_nav import convert_features, train as nav_train
    from experiments.touchdown_nav.configs import rgb as rgb_config
    from experiments.touchdown_sdr import extract_features, train as sdr_train
    from tests.conftest import xla_optimizations
    from tests.experiments.trainers import TRAINERS
    from tests.helpers import override
    from ttw_datasets.touchdown import touchdown_dataset_builder as td_builder
    from ttw_jax.touchdown.dataset import load_touchdown_split_records
    from ttw_jax.touchdown.graph import write_graph_files
    from ttw_jax.touchdown.sdr.stream import write_synthetic_release

    weights = str(tmp_path / "resnet18.npz")
    np.savez(weights, **{k: v for k, v in fixture.items() if k.startswith("state/")})
    rng = np.random.default_rng(0)

    def panoramas(n):
        base = fixture["panoramas"][rng.integers(0, 2, n)].astype(np.int16)
        return np.clip(base + rng.integers(-20, 20, base.shape), 0, 255).astype(np.uint8)

    # SDR: a release's records, their panoramas as .jpg, the features extracted into it
    manual = str(tmp_path / "sdr")
    write_synthetic_release(manual, 20, seed=2, shape=(10, 56, 8))   # records; features below
    ids = sorted(n[:-4] for n in os.listdir(os.path.join(manual, "features")))
    for name in os.listdir(os.path.join(manual, "features")):
        os.remove(os.path.join(manual, "features", name))
    _write_panoramas(str(tmp_path / "sdr_panos"), panoramas(len(ids)), ids, ".jpg")
    out = extract_features.run(str(tmp_path / "sdr_panos"), weights,
                               os.path.join(manual, "features"), slice_size=(40, 24),
                               progress=False)
    assert out["done"] == 20 and out["panoramas_per_second"] > 0
    c = override(TRAINERS["touchdown_sdr"].config(tfds_dir), data__stream=True,
                 data__manual_dir=manual, data__feature_shape="5,24,128", num_steps=2,
                 eval_every=2, data__max_tokens=0)
    res = sdr_train.train_and_evaluate(c, str(tmp_path / "sdr_run"))
    assert res["best_step"] == 2 and res["test"]["examples"] == 2

    # navigation: every graph panorama, features as tables and RGB bands
    _, nodes, _, _ = load_touchdown_split_records("synthetic_navigation", ["test"],
                                                      tfds_dir=tfds_dir)
    _write_panoramas(str(tmp_path / "nav_panos"), panoramas(len(nodes.ids)), nodes.ids, ".jpg")
    extract_features.run(str(tmp_path / "nav_panos"), weights, str(tmp_path / "nav_features"),
                         str(tmp_path / "nav_rgb"), batch_size=64, slice_size=(40, 24),
                         progress=False)
    graph_dir = str(tmp_path / "graph")
    write_graph_files(graph_dir, *td_builder.Builder.builder_configs["synthetic_navigation"].grid())
    # the official features' two navigation layouts (the launchers' runs on such tables are
    # tests/touchdown/test_nav_train.py's and tests/experiments/test_paper_configs.py's)
    for layout, shape in (("rows", (24, 128)), ("images", (5, 24, 1))):
        table = str(tmp_path / f"nav_{layout}.npz")
        assert convert_features.convert(str(tmp_path / "nav_features"), graph_dir, table,
                                        layout=layout) == len(nodes.ids)
        with np.load(table) as z:
            assert z["features"].shape == (len(nodes.ids), *shape)
            assert sorted(z["panoids"].tolist()) == sorted(nodes.ids)
    # the RGB agent (Table 7) end to end on the extracted bands, on one device with XLA's
    # optimisations on: its CNN's gradient convolutions are loops XLA emits itself (this run
    # alone: 117 s on all 8 devices without them, 93 s on one, 45 s on one with them)
    table = str(tmp_path / "nav_rgb.npz")
    assert convert_features.convert(str(tmp_path / "nav_rgb"), graph_dir, table,
                                    layout="rgb") == len(nodes.ids)
    c = override(rgb_config.get_config(), data__features=table, data__tfds_dir=tfds_dir,
                 num_steps=2, eval_every=2, log_every=1, data__eval_splits="test",
                 eval__baselines="", batch_size=8, eval__num_figures=0, train_horizon=8,
                 eval__horizon=4, model__text_hidden=16, model__hidden=16, num_devices=1)
    with xla_optimizations(True):
        res = nav_train.train_and_evaluate(c, str(tmp_path / "nav_run_rgb"))
    assert res["best_step"] == 2 and res["test"]["episodes"] == 200
