"""`run_all`'s Touchdown SDR rows: LingUNet at the paper's shape, Text2Conv against LingUNet."""
from __future__ import annotations

import jax
import numpy as np
import optax
from flax.training import train_state

from experiments.benchmarks.flops import program_flops
from experiments.benchmarks.measure import ANCHORS, pct, row, sig, timeit


def sdr_step(name: str, shape, batch: int, dtype: str = "float32", **model_kw):
    """(jitted train step, state, batch, key) of SDR model `name` on random [batch, *shape],
    computing in `dtype` (`ttw_jax.core.train.precision`)."""
    from ttw_jax.core.train import data_parallel as dp
    from ttw_jax.core.train.precision import with_dtype
    from ttw_jax.touchdown.sdr.losses import make_loss
    from ttw_jax.touchdown.sdr.models import build_sdr_model
    h, w, c = shape
    vocab = model_kw.pop("vocab_size", 4000)
    model = with_dtype(build_sdr_model(name, vocab, **model_kw), dtype)
    rng = np.random.default_rng(0)
    data = {"features": rng.normal(size=(batch, h, w, c)).astype(np.float16),
            "center": rng.uniform(size=(batch, 2)).astype(np.float32),
            "tokens": rng.integers(1, vocab, (batch, 40)).astype(np.int32),
            "token_len": np.full((batch,), 40, np.int32)}
    params = jax.jit(model.init)(jax.random.key(0), data["tokens"][:1], data["token_len"][:1],
                                 data["features"][:1].astype(np.float32))
    mesh = dp.make_mesh(jax.devices()[:1])
    state = dp.replicate(train_state.TrainState.create(apply_fn=model.apply, params=params,
                                                       tx=optax.adam(5e-4)), mesh)
    step = dp.make_train_step(make_loss(model, sigma=3.0), mesh, donate=False)
    return step, state, dp.shard_global(data, dp.batch_sharded(mesh)), jax.random.key(1)


class _XlaConvs:
    """Within the block, the SDR models use XLA's convolutions (their formulation before this
    project's `same_conv`), for the comparison row."""

    def __enter__(self):
        from ttw_jax.touchdown.sdr import models
        self.models, self.saved = models, (models.fast_conv, models.per_example_conv)
        models.fast_conv = jax.lax.conv_general_dilated
        models.per_example_conv = lambda x, k: jax.vmap(lambda a, b: jax.lax.conv_general_dilated(
            a[None], b, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))[0])(x, k)
        return self

    def __exit__(self, *exc):
        self.models.fast_conv, self.models.per_example_conv = self.saved


PAPER = dict(levels=2, channels=128, stride=1, mlp_hidden=128, embed_dim=300, hidden=300,
             dropout=0.5)


def faster(r: float) -> str:
    """'ours 2.2x faster' for r = XLA's time / ours, 'XLA's ... faster' for r < 1."""
    return f"ours {sig(r)}x faster" if r >= 1 else f"XLA's {sig(1 / r)}x faster"


def bench_lingunet(peak, quick) -> list[dict]:
    shape, b = ((100, 116, 128), 2) if quick else ((100, 464, 128), 10)
    step, state, batch, key = sdr_step("lingunet", shape, b, **PAPER)
    flops = program_flops(step, state, batch, key)   # the traced program: any backend's count
    with _XlaConvs():
        xla_step, *_ = sdr_step("lingunet", shape, b, **PAPER)
    secs = timeit(lambda s: step(s, batch, key)[1], state, repeats=1 if quick else 2)
    work = f"LingUNet train step, [{b}, {', '.join(map(str, shape))}], m=2, 128 channels"
    rows = []
    if quick:
        rows.append(row(work + " (quick: a quarter of the paper's width)", f"{sig(secs)} s/step",
                        "", "", pct(flops / secs / 1e9, peak)))
    else:
        ref = ANCHORS["lingunet_official_s"]
        rows.append(row(work + " (the paper's shape and batch)", f"{sig(secs)} s/step",
                        f"{ref:.0f} s/step (official PyTorch LingUNet, recorded anchor)",
                        f"{sig(ref / secs)}x", pct(flops / secs / 1e9, peak)))
        xla_secs = timeit(lambda s: xla_step(s, batch, key)[1], state, repeats=1)
        rows.append(row("... with XLA's convolutions (before)", f"{sig(xla_secs)} s/step", "",
                        faster(xla_secs / secs), pct(flops / xla_secs / 1e9, peak)))
    return rows


def bench_text2conv(quick) -> list[dict]:
    """Both at the synthetic SDR shape and the CPU default config's sizes."""
    shape, b = (25, 116, 12), 16
    sizes = dict(levels=2, mlp_hidden=16, embed_dim=64, hidden=64, dropout=0.5, vocab_size=200)
    times = {}
    for name, channels in (("lingunet", 16), ("text2conv", 32)):
        step, state, batch, key = sdr_step(name, shape, b, channels=channels, **sizes)
        times[name] = timeit(lambda s: step(s, batch, key)[1], state, repeats=3 if quick else 10)
    work = f"Text2Conv train step, [{b}, {', '.join(map(str, shape))}] (synthetic SDR, default config)"
    rows = [row(work, f"{sig(times['text2conv'] * 1e3)} ms/step",
                f"LingUNet {sig(times['lingunet'] * 1e3)} ms/step (same run, same shape)",
                f"{sig(times['text2conv'] / times['lingunet'])}x LingUNet's time")]
    if not quick:
        with _XlaConvs():
            step, state, batch, key = sdr_step("text2conv", shape, b, channels=32, **sizes)
            before = timeit(lambda s: step(s, batch, key)[1], state, repeats=3)
        rows.append(row("... Text2Conv with a vmapped per-example conv (before)",
                        f"{sig(before * 1e3)} ms/step", "",
                        f"{sig(before / times['lingunet'])}x LingUNet's time"))
    return rows


def bench_extraction(peak, quick) -> list[dict]:
    """Panoramas to features (`experiments.touchdown_sdr.extract_features`' device work): eight
    800 x 460 slices of 3,000 x 1,500 panoramas through ResNet-18 up to layer2, float32, random
    weights (the time does not depend on them); reading and writing the files not included."""
    from ttw_jax.touchdown import extraction, resnet
    size, b = ((200, 116), 1) if quick else ((800, 460), 2)
    shape = (b, 750, 1500, 3) if quick else (b, 1500, 3000, 3)
    panos = jax.numpy.asarray(np.random.default_rng(0).integers(0, 256, shape, np.uint8))
    variables = jax.jit(resnet.ResNet18("layer2").init)(
        jax.random.key(0), np.zeros((1, 64, 64, 3), np.float32))
    ex = extraction.Extractor(variables, slice_size=size)
    flops = program_flops(ex.features, panos)
    secs = timeit(ex.features, panos, repeats=1 if quick else 3)
    work = (f"ResNet-18 features of {b} panorama(s) {shape[2]} x {shape[1]}, 8 slices "
            f"{size[0]} x {size[1]}, f32" + (" (quick: a quarter of the paper's slice)"
                                              if quick else " (the paper's sizes)"))
    return [row(work, f"{sig(b / secs)} panoramas/s ({sig(secs / b)} s each)", "", "",
                pct(flops / secs / 1e9, peak))]
