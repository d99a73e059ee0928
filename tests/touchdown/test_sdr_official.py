"""The official LingUNet (`lingunet_official`): its forward pass equals the outputs the official
`sdr/model.py` produced (`data/official_lingunet.npz`, written by
`data/make_official_lingunet.py` with torch, random weights) to 1e-5, its parameter count is the
official model's, its levels start from identical weights as the official code's do (an option),
its checkpoints import and export losslessly, and an imported checkpoint is evaluated by the
trainer with the official loader's vocabulary."""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.touchdown_sdr import train
from experiments.touchdown_sdr.configs import default
from tests.helpers import override
from ttw_jax.touchdown.sdr import official, training_data as sdr_data
from ttw_jax.touchdown.sdr.models import build_sdr_model, lingunet_num_params

FIXTURE = os.path.join(os.path.dirname(__file__), "data", "official_lingunet.npz")


@pytest.fixture(scope="module")
def fixture():
    with np.load(FIXTURE) as z:
        return {k: z[k] for k in z.files}


def small_model(s):
    return official.OfficialLingUNet(s["vocab"], s["m"], s["channels"], s["mlp_hidden"],
                                     s["mlp_layers"], s["embed"], s["hidden"],
                                     kernel_size=s["kernel"])


def test_forward_equals_the_official_code(fixture):
    s = json.loads(str(fixture["sizes"]))
    params = official.import_state_dict(official.read_checkpoint(FIXTURE))
    images = fixture["images"].transpose(0, 2, 3, 1)            # NCHW -> the project's NHWC
    out = small_model(s).apply(params, jnp.asarray(fixture["tokens"], jnp.int32),
                               jnp.asarray(fixture["lengths"], jnp.int32), images)
    assert out.shape == fixture["log_probs"].shape == (3, 7, 13)
    np.testing.assert_allclose(np.asarray(out), fixture["log_probs"], atol=1e-5, rtol=0)
    # the variable lengths matter: a different padding length gives the same outputs
    tokens = np.pad(fixture["tokens"], ((0, 0), (0, 3)))
    again = small_model(s).apply(params, jnp.asarray(tokens, jnp.int32),
                                 jnp.asarray(fixture["lengths"], jnp.int32), images)
    np.testing.assert_allclose(np.asarray(again), fixture["log_probs"], atol=1e-5, rtol=0)


def test_parameter_count_is_the_official_models(fixture):
    model = build_sdr_model("lingunet_official", 4000, levels=2, channels=128, mlp_hidden=128,
                            embed_dim=300, hidden=300)
    shapes = jax.eval_shape(model.init, jax.random.key(0), jnp.ones((1, 4), jnp.int32),
                            jnp.ones((1,), jnp.int32), jnp.ones((1, 8, 8, 128)))
    assert official.num_params(shapes) == int(fixture["paper_num_params"]) == 14_589_632
    # the project's LingUNet (the paper's text) at the same sizes
    assert lingunet_num_params(4000, 128) == 14_537_952


@pytest.mark.usefixtures("fast_compile_unless_slow")   # three tiny initialisations
def test_identical_levels_start_the_levels_from_one_draw():
    """The official `LingUNet` deep-copies one convolution and one text-kernel Linear for its
    levels (`clones`), so they start identical: `identical_levels` (on in the default config)
    ties them, PyTorch's bounds kept; the transposed convolutions are drawn one by one there too;
    a first convolution of another input width is drawn on its own; off, every level is."""
    tokens, lengths = jnp.ones((2, 5), jnp.int32), jnp.asarray([5, 3], jnp.int32)

    def init(identical, width):
        config = override(default.get_config(), model__name="lingunet_official",
                          model__identical_levels=identical, model__levels=3, model__channels=6,
                          model__mlp_hidden=5, model__embed_dim=4, model__hidden=6)
        model = train.build_model(config, 20)
        return jax.jit(model.init)(jax.random.key(0, impl="unsafe_rbg"), tokens, lengths,
                                   jnp.zeros((2, 5, 7, width)))["params"]

    def same(p, a, b):
        return all(np.array_equal(p[a][k], p[b][k]) for k in ("kernel", "bias"))

    assert default.get_config().model.identical_levels
    on = init(True, 6)
    assert all(same(on, f"{layer}_0", f"{layer}_{i}") for layer in ("conv", "text2conv")
               for i in (1, 2))
    assert not same(on, "deconv_1", "deconv_2")
    assert 0.07 < np.abs(on["conv_1"]["kernel"]).max() <= 1 / np.sqrt(6 * 25)
    narrow = init(True, 4)
    assert not same(narrow, "conv_0", "conv_1") and same(narrow, "conv_1", "conv_2")
    assert same(narrow, "text2conv_0", "text2conv_2")
    off = init(False, 6)
    assert not any(same(off, f"{layer}_{i}", f"{layer}_{j}") for layer in ("conv", "text2conv")
                   for i, j in ((0, 1), (0, 2), (1, 2)))


def test_checkpoints_import_and_export_losslessly(fixture, tmp_path):
    state = official.read_checkpoint(FIXTURE)
    assert "rnn.lstm.weight_ih_l0_reverse" in state and "deconv_layers.1.weight" in state
    back = official.export_state_dict(official.import_state_dict(state))
    assert sorted(back) == sorted(state)
    for k, v in state.items():
        np.testing.assert_array_equal(back[k], v)
    from safetensors.numpy import save_file
    save_file(back, str(tmp_path / "ckpt.safetensors"))
    again = official.read_checkpoint(str(tmp_path / "ckpt.safetensors"))
    assert all(np.array_equal(again[k], state[k]) for k in state)
    with pytest.raises(KeyError, match="has no 'rnn.embedding.weight'"):
        official.import_state_dict({k: v for k, v in state.items() if "embedding" not in k})
    with pytest.raises(ValueError, match="not '.ckpt'"):
        official.read_checkpoint(str(tmp_path / "model.ckpt"))


def test_the_official_vocabulary_and_tokenization():
    v = official.OfficialVocabulary(["The bear, by a Door.", "the door"])
    assert v.words == ["<pad>", "<unk>", "the", "bear,", "by", "a", "door.", "door"]
    ids, lengths = v.encode(["a door. Cat", "the"], 4)
    assert ids.tolist() == [[5, 6, 1, 0], [2, 0, 0, 0]] and lengths.tolist() == [3, 1]


@pytest.mark.slow
def test_the_trainer_evaluates_an_imported_checkpoint(tmp_path):
    from tests.experiments.trainers import TRAINERS
    from ttw_jax.touchdown.sdr.stream import write_synthetic_release
    manual = str(tmp_path / "release")
    write_synthetic_release(manual, 40, seed=1, shape=(10, 56, 8))
    vocab = sdr_data.official_vocabulary(manual)
    model = official.OfficialLingUNet(len(vocab), 2, 8, 8, 1, 16, 8)
    params = model.init(jax.random.key(3), jnp.ones((2, 4), jnp.int32), jnp.full((2,), 4),
                        jnp.ones((2, 10, 56, 8)))
    np.savez(tmp_path / "ckpt.npz", **official.export_state_dict(params))
    c = override(TRAINERS["touchdown_sdr"].config(str(tmp_path / "tfds")),
                 model__name="lingunet_official", model__channels=8, model__mlp_hidden=8,
                 model__embed_dim=16, model__hidden=8, model__checkpoint=str(tmp_path / "ckpt.npz"),
                 num_steps=0, data__stream=True, data__manual_dir=manual,
                 data__feature_shape="10,56,8", data__max_tokens=0)
    res = train.train_and_evaluate(c, str(tmp_path / "run"))
    assert res["best_step"] == 0 and res["num_params"] == official.num_params(params)
    data = train.load_data(c, str(tmp_path / "run2"))
    test = data["splits"]["test"]
    assert test["tokens"].max() < len(vocab)
    from ttw_jax.touchdown.sdr.evaluation import evaluate, make_predictor
    direct = evaluate(make_predictor(model), params, test, 64)[0]
    assert res["test"]["lingunet_official"]["acc_80"] == pytest.approx(direct["acc_80"])
    assert res["test"]["lingunet_official"]["distance"] == pytest.approx(direct["distance"])
    # a checkpoint of other sizes is refused, naming the arrays
    c2 = override(c, model__hidden=16)
    with pytest.raises(ValueError, match="does not fit model.name=lingunet_official"):
        train.train_and_evaluate(c2, str(tmp_path / "run3"))
