"""Touchdown SDR models (LingUNet, UNet, Concat, ConcatConv, Text2Conv): normalised [B, H, W]
log-probabilities for odd sizes and strides, gradients reaching every parameter, batched kernels
against per-example loops, dropout, the paper config's uniform init, the parameter-count formula
and overfitting."""
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from experiments.touchdown_sdr import train as sdr_train
from experiments.touchdown_sdr.configs import default as sdr_default, paper as sdr_paper
from experiments.touchdown_sdr.train import SDR_FLOAT32_MODULES
from tests.helpers import assert_bfloat16_loss_close, override
from ttw_jax.core.train.precision import with_dtype
from ttw_jax.touchdown.sdr import models as sdr

pytestmark = pytest.mark.usefixtures("fast_compile_unless_slow")  # tiny models

VOCAB = 20
TEXT = dict(embed_dim=8, hidden=9)
SMALL = {
    "lingunet": dict(channels=6, mlp_hidden=8, **TEXT),
    "unet": dict(channels=6, mlp_hidden=8),
    "concat": dict(mlp_hidden=8, **TEXT),
    "concatconv": dict(mlp_hidden=8, **TEXT),
    "text2conv": dict(channels=4, mlp_hidden=8, **TEXT),
}
# (model, extra fields, (B, H, W, C)); the first of each model is its canonical test config.
CONFIGS = [
    ("lingunet", dict(stride=2, levels=3), (3, 11, 17, 4)),
    ("lingunet", dict(stride=1), (2, 9, 14, 3)),
    ("unet", dict(stride=2), (2, 9, 15, 5)),
    ("concat", {}, (2, 9, 15, 3)),
    ("concatconv", {}, (2, 12, 17, 4)),
    ("text2conv", {}, (2, 11, 19, 5)),
]


def key(seed):
    """PRNG keys for init/dropout: 'unsafe_rbg' compiles far faster on CPU than threefry."""
    return jax.random.key(seed, impl="unsafe_rbg")


def batch(b=2, h=9, w=15, c=3, seed=0):
    """tokens [b, 6] (0-padded after `lengths`), lengths [b], images [b, h, w, c]."""
    rng = np.random.default_rng(seed)
    lengths = np.asarray([5, 3, 1, 4][:b], np.int32)
    tokens = rng.integers(1, VOCAB, (b, 6)) * (np.arange(6)[None] < lengths[:, None])
    return (jnp.asarray(tokens, jnp.int32), jnp.asarray(lengths),
            jnp.asarray(rng.normal(size=(b, h, w, c)), jnp.float32))


def init(name, data, seed=0, **kw):
    """The model and its parameters from key(1) (folded with a learning test's `seed`)."""
    model = sdr.build_sdr_model(name, VOCAB, **{**SMALL[name], **kw})
    k = key(1) if seed == 0 else jax.random.fold_in(key(1), seed)
    return model, jax.jit(model.init)(k, *data)


@functools.cache
def canonical(name):
    """(model, params, data, jitted apply) for the model's first entry in CONFIGS."""
    _, kw, size = next(c for c in CONFIGS if c[0] == name)
    data = batch(*size)
    model, params = init(name, data, **kw)
    return model, params, data, jax.jit(model.apply, static_argnames="deterministic")


def nll(out, target):
    return -out[jnp.arange(out.shape[0]), target[:, 0], target[:, 1]].mean()


@pytest.mark.parametrize("index", range(len(CONFIGS)),
                         ids=[f"{n}-{'-'.join(f'{k}{v}' for k, v in kw.items())}-{s[1]}x{s[2]}"
                              for n, kw, s in CONFIGS])
def test_normalised_output_and_gradient_everywhere(index):
    name, kw, (b, h, w, _) = CONFIGS[index]
    if index == [c[0] for c in CONFIGS].index(name):
        model, params, data, _ = canonical(name)
    else:
        data = batch(*CONFIGS[index][2])
        model, params = init(name, data, **kw)
    target = jnp.asarray([[0, 0], [h - 1, w - 1], [h // 2, 3]][:b])

    @jax.jit
    def grad(p):
        def loss(p):
            out = model.apply(p, *data)
            return nll(out, target), out
        return jax.grad(loss, has_aux=True)(p)

    grads, out = grad(params)
    assert out.shape == (b, h, w)
    np.testing.assert_allclose(jnp.exp(out).sum((1, 2)), 1.0, atol=1e-5)
    flat = jax.tree_util.tree_flatten_with_path(grads)[0]
    assert len(flat) == len(jax.tree.leaves(params)) > 0
    dead = [jax.tree_util.keystr(path) for path, g in flat if not jnp.any(g != 0)]
    assert not dead, dead
    if name == "unet":
        assert set(params["params"]) == {"unet"}


def test_unet_ignores_tokens_lingunet_uses_them():
    for name, depends in (("unet", False), ("lingunet", True)):
        _, params, (tokens, lengths, images), apply = canonical(name)
        other = jnp.where(tokens > 0, tokens % (VOCAB - 1) + 1, 0).astype(jnp.int32)
        a = apply(params, tokens, lengths, images)
        b = apply(params, other, lengths, images)
        assert (not np.allclose(a, b, atol=1e-6)) == depends, name


def test_text_kernel_einsum_matches_loop():
    rng = np.random.default_rng(0)
    f, k = rng.normal(size=(3, 5, 7, 4)), rng.normal(size=(3, 4, 6))
    ref = np.stack([f[b] @ k[b] for b in range(3)])
    np.testing.assert_allclose(sdr.apply_text_kernels(jnp.asarray(f), jnp.asarray(k)), ref,
                               rtol=1e-4, atol=1e-4)


def test_per_example_conv_matches_loop():
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(3, 9, 11, 4)), jnp.float32)
    k = jnp.asarray(rng.normal(size=(3, 5, 5, 4, 2)), jnp.float32)
    ref = []
    for b in range(3):  # lax.conv: NCHW input, OIHW kernel
        y = jax.lax.conv(x[b].transpose(2, 0, 1)[None], k[b].transpose(3, 2, 0, 1), (1, 1), "SAME")
        ref.append(y[0].transpose(1, 2, 0))
    np.testing.assert_allclose(sdr.per_example_conv(x, k), np.stack(ref), rtol=1e-4, atol=1e-4)


def test_tiled_concat_dense_equals_dense_on_tiled_concat():
    rng = np.random.default_rng(2)
    x = jnp.asarray(rng.normal(size=(2, 4, 5, 3)), jnp.float32)
    t = jnp.asarray(rng.normal(size=(2, 6)), jnp.float32)
    p = {"params": {"kernel": jnp.asarray(rng.normal(size=(9, 7)), jnp.float32),
                    "bias": jnp.asarray(rng.normal(size=(7,)), jnp.float32)}}
    tiled = jnp.concatenate([x, jnp.broadcast_to(t[:, None, None], (2, 4, 5, 6))], -1)
    np.testing.assert_allclose(sdr.TiledConcatDense(7).apply(p, x, t),
                               nn.Dense(7).apply(p, tiled), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k, size", [(5, (2, 6, 7)), (3, (1, 1, 4)), (5, (3, 9, 2))])
def test_tiled_concat_conv_equals_conv_on_tiled_concat(k, size):
    b, h, w = size
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.normal(size=(b, h, w, 3)), jnp.float32)
    t = jnp.asarray(rng.normal(size=(b, 4)), jnp.float32)
    p = {"params": {"kernel": jnp.asarray(rng.normal(size=(k, k, 7, 5)), jnp.float32),
                    "bias": jnp.asarray(rng.normal(size=(5,)), jnp.float32)}}
    tiled = jnp.concatenate([x, jnp.broadcast_to(t[:, None, None], (b, h, w, 4))], -1)
    np.testing.assert_allclose(sdr.TiledConcatConv(5, k).apply(p, x, t),
                               nn.Conv(5, (k, k), padding="SAME").apply(p, tiled),
                               rtol=1e-4, atol=1e-4)


def test_concatconv_and_text2conv_follow_the_paper():
    # ConcatConv: one 5x5 convolution over [image; text] that keeps the C + T channels, then
    # the MLP on its output alone; Text2Conv: a kernel predictor without bias.
    _, params, (_, _, images), _ = canonical("concatconv")
    c, t = images.shape[-1], 2 * TEXT["hidden"]
    conv = params["params"]["conv"]
    assert conv["kernel"].shape == (5, 5, c + t, c + t) and conv["bias"].shape == (c + t,)
    assert params["params"]["mlp"]["hidden"]["kernel"].shape == (c + t, 8)
    _, params, (_, _, images), _ = canonical("text2conv")
    predictor = params["params"]["kernel_predictor"]
    assert set(predictor) == {"kernel"}
    assert predictor["kernel"].shape == (t, 5 * 5 * images.shape[-1] * 4)


def test_text_encoder_ignores_padding():
    tokens, lengths, _ = batch(3)
    enc = sdr.TextEncoder(VOCAB, **TEXT)
    p = jax.jit(enc.init)(key(0), tokens, lengths)
    apply = jax.jit(enc.apply)
    a = apply(p, tokens, lengths)
    assert a.shape == (3, 2 * TEXT["hidden"])
    junk = jnp.where(tokens > 0, tokens, 7)  # garbage after the lengths
    np.testing.assert_allclose(apply(p, junk, lengths), a, atol=1e-6)
    np.testing.assert_allclose(apply(p, jnp.pad(tokens, ((0, 0), (0, 3))), lengths), a,
                               atol=1e-6)


def test_dropout_only_when_not_deterministic():
    _, params, data, apply = canonical("lingunet")
    det = [apply(params, *data, rngs={"dropout": key(s)}) for s in (0, 1)]
    np.testing.assert_array_equal(det[0], det[1])
    drop = [apply(params, *data, deterministic=False, rngs={"dropout": key(s)}) for s in (0, 1)]
    assert not np.allclose(drop[0], drop[1], atol=1e-6)
    assert not np.allclose(drop[0], det[0], atol=1e-6)


@pytest.mark.parametrize("cfg", [
    dict(in_channels=128, channels=128, levels=2, embed_dim=300, hidden=300, mlp_hidden=128),
    dict(in_channels=5, channels=7, levels=3, embed_dim=6, hidden=9, mlp_hidden=11),
])
def test_param_count_formula(cfg):
    vocab, cfg = 37, dict(cfg)
    c_in = cfg.pop("in_channels")
    model = sdr.LingUNet(vocab, **cfg)
    shapes = jax.eval_shape(model.init, key(0), jnp.ones((1, 4), jnp.int32),
                            jnp.asarray([4]), jnp.zeros((1, 9, 11, c_in)))
    count = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(shapes))
    assert count == sdr.lingunet_num_params(vocab, c_in, **cfg)


def test_the_paper_config_draws_every_parameter_from_the_papers_interval():
    """configs/paper.py (App. D.2: "We initialize parameters by sampling uniformly from [-0.1,
    0.1]"): every parameter, weights and biases, of lingunet (Embed, LSTM, Conv, ConvT, Dense),
    concatconv (TiledConcatConv) and text2conv (the others use a subset of these layers) lies in
    [-0.1, 0.1] with the uniform's mean 0 and std 0.2 / sqrt(12); the default keeps flax's
    initialisers (zero biases, weights beyond 0.1)."""
    small = dict(model__channels=6, model__mlp_hidden=8, model__embed_dim=8, model__hidden=9)
    std = 0.2 / np.sqrt(12)
    for name in ("lingunet", "concatconv", "text2conv"):
        config = override(sdr_paper.get_config(), model__name=name, **small)
        model = sdr_train.build_model(config, VOCAB)
        data = batch(*next(c for c in CONFIGS if c[0] == name)[2])
        drawn = jax.tree_util.tree_leaves_with_path(jax.jit(model.init)(key(1), *data))
        values = np.concatenate([np.ravel(x) for _, x in drawn])
        biases = np.concatenate([np.ravel(x) for p, x in drawn
                                 if jax.tree_util.keystr(p).endswith("['bias']")])
        assert values.size > 1000 and biases.size > 20, name
        assert 0.099 < np.abs(values).max() <= 0.1, name
        assert abs(values.mean()) < 0.004 and abs(values.std() - std) < 0.003, name
        assert np.all(biases != 0) and abs(biases.std() - std) < 0.02, name
        assert all(np.ptp(np.asarray(x)) > 0 for _, x in drawn), name   # no constant array
    assert not sdr_default.get_config().model.uniform_init
    default = [(jax.tree_util.keystr(p), np.asarray(x))
               for p, x in jax.tree_util.tree_leaves_with_path(canonical("lingunet")[1])]
    assert all(not x.any() for p, x in default if p.endswith("['bias']"))
    assert max(np.abs(x).max() for _, x in default) > 0.1


def test_bad_configurations():
    with pytest.raises(ValueError, match="unknown SDR model"):
        sdr.build_sdr_model("lingunet2", VOCAB)
    with pytest.raises(TypeError, match="levles"):
        sdr.build_sdr_model("lingunet", VOCAB, levles=2)
    shared = dict(levels=3, channels=5, stride=2, mlp_hidden=7, embed_dim=8, hidden=9, dropout=0.1)
    unet = sdr.build_sdr_model("unet", VOCAB, **shared)  # text fields ignored
    concat = sdr.build_sdr_model("concat", VOCAB, uniform_init=True, **shared)  # conv fields too
    assert (unet.levels, unet.stride, unet.mlp_hidden) == (3, 2, 7)
    assert (concat.hidden, concat.dropout, concat.init_scale) == (9, 0.1, 0.1)
    model = sdr.LingUNet(VOCAB, levels=4, channels=4, mlp_hidden=4, **TEXT)  # 18 % 4 != 0
    with pytest.raises(ValueError, match="not divisible by levels=4"):
        jax.eval_shape(model.init, key(0), *batch())


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_lingunet_overfits_tiny_batch(dtype, learned, learning_seed):
    """Also in bfloat16, with the pixel-score heads in float32 as the trainer has them. Measured
    over 11 runs (seeds 0-4; 0-2 under --xla_cpu_max_isa=AVX2 and AVX; tests/learning_spread.py):
    the argmax pixel on the target for every view in all (bound 0.95)."""
    tokens, lengths, images = batch(4, 10, 13, 4, seed=3)
    target = jnp.asarray([[1, 2], [4, 11], [7, 5], [9, 0]])
    model, params = init("lingunet", (tokens, lengths, images), learning_seed, channels=8,
                         mlp_hidden=16)
    mixed = with_dtype(model, dtype, SDR_FLOAT32_MODULES)
    if dtype == "bfloat16":
        loss = lambda m: lambda p: (nll(m.apply(p, tokens, lengths, images), target),)
        assert_bfloat16_loss_close(loss(model), loss(mixed), params)
    model = mixed
    opt = optax.adam(1e-2)

    @jax.jit
    def train(params):
        def step(carry, _):
            p, s = carry
            g = jax.grad(lambda p: nll(model.apply(p, tokens, lengths, images), target))(p)
            u, s = opt.update(g, s, p)
            return (optax.apply_updates(p, u), s), None
        (params, _), _ = jax.lax.scan(step, (params, opt.init(params)), None, length=100)
        return model.apply(params, tokens, lengths, images)

    out = train(params)
    pred = jnp.argmax(out.reshape(4, -1), -1)
    learned(argmax_on_target=(jnp.mean(pred == target[:, 0] * 13 + target[:, 1]), ">", 0.95))
