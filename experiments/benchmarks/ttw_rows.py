"""`run_all`'s Talk The Walk rows: the exact bound, the full task at L = 500, the MASC step."""
from __future__ import annotations

import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training import train_state

from experiments.benchmarks.flops import program_flops
from experiments.benchmarks.measure import ANCHORS, SHARED, pct, row, sig, timeit


def ttw_tables(maps_dir: str = os.path.join(SHARED, "ttw", "maps")):
    """({split: landmark table}, what) of the maps in `maps_dir`, or of synthetic maps where
    that folder is missing."""
    from ttw_jax.talk_the_walk import maps
    try:
        data, what = maps.load_windows(maps_dir), "the 4 real maps"
    except FileNotFoundError:
        data, what = maps.load_windows(None), "synthetic maps"
    return {s: w.landmarks for s, w in data.items()}, what


def bench_ttw_bound(tables, what) -> list[dict]:
    from ttw_jax.talk_the_walk import maps
    from ttw_jax.talk_the_walk.upper_bound import bayes_rate
    t = time.perf_counter()
    for s in maps.SPLITS:
        bayes_rate(tables[s], 3, condition_on_actions=True)
    secs = time.perf_counter() - t
    ref = ANCHORS["ttw_bound_reference_s"]
    return [row(f"Talk The Walk exact bound, T=3 with actions, {what}, train+valid+test "
                "(compilation included)", f"{sig(secs)} s",
                f"{ref:.0f} s (reference implementation, recorded anchor)", f"{sig(ref / secs)}x")]


def localizer(features: int, table):
    from ttw_jax.talk_the_walk import maps, walks
    from ttw_jax.talk_the_walk.emergent.model import Localizer
    model = Localizer(T=3, features=features, num_landmark_ids=maps.NUM_LANDMARK_IDS)
    ex = walks.sample_batch(jax.random.key(0), jnp.asarray(table), 2, 3)
    params = model.init({"params": jax.random.key(1)}, ex["obs"], ex["actions"],
                        ex["landmarks"])["params"]
    return model, params


def bench_ttw_full_task(tables, peak, quick) -> list[dict]:
    from ttw_jax.talk_the_walk.full_task import full_task_episodes, run_full_task
    model, params = localizer(500, tables["test"])
    lm, tg = full_task_episodes(tables["test"], 1 if quick else 4)
    e, slots = (64, 16) if quick else (len(tg), 32)
    lm, tg = jnp.asarray(lm[:e]), jnp.asarray(tg[:e])
    predict = lambda o, a, l: model.apply({"params": params}, o, a, l)["logits"]
    ex = (jnp.zeros((slots, 4, 3), jnp.int32), jnp.zeros((slots, 3), jnp.int32), lm[:slots])
    flops_per_call = program_flops(jax.jit(predict), *ex)
    out = {}
    for s in (slots,) if quick else (slots, e):
        run = jax.jit(lambda k, s=s: run_full_task(k, predict, lm, tg, 3, slots=s))
        res = jax.block_until_ready(run(jax.random.key(3)))   # compiles
        t = time.perf_counter()
        jax.block_until_ready(run(jax.random.key(3)))
        out[s] = (time.perf_counter() - t, res)
    secs, res = out[slots]
    live_steps = float(jnp.sum(jnp.minimum(res.steps + 1, 150)))
    useful = flops_per_call / slots * live_steps / secs / 1e9
    official = 1 / ANCHORS["ttw_full_task_official_s"]
    return [
        row(f"Talk The Walk full task, MASC T=3, L=500, {e} episodes (random-init guide, mean "
            f"{live_steps / e:.0f} guide steps per episode), {slots} slots", f"{sig(e / secs)} episodes/s",
            f"{official:.2f} episodes/s (official loop, 0.52 s/episode, recorded anchor)",
            f"{sig(e / secs / official)}x", pct(useful, peak) + " (live steps)"),
    ] + ([] if quick else [
        row("... every episode in its own slot until the last ends (no refill)",
            f"{sig(e / out[e][0])} episodes/s", "", f"slots {sig(out[e][0] / secs)}x faster")])


def masc_step(tables, b: int, dtype: str = "float32", features: int = 500):
    """(step, state, batch, key) of the MASC train step, T=3, L=`features`, batch `b`, on one
    device, computing in `dtype`."""
    from ttw_jax.core.train import data_parallel as dp
    from ttw_jax.core.train.precision import with_dtype
    from ttw_jax.talk_the_walk import walks
    from ttw_jax.talk_the_walk.emergent.losses import localization_loss
    model, params = localizer(features, tables["train"])
    model = with_dtype(model, dtype)
    batch = walks.sample_batch(jax.random.key(0), jnp.asarray(tables["train"]), b, 3)
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))
    mesh = dp.make_mesh(jax.devices()[:1])
    step = dp.make_train_step(localization_loss(model.apply, False), mesh, donate=False)
    return (step, dp.replicate(state, mesh), jax.device_put(batch, dp.batch_sharded(mesh)),
            jax.random.key(2))


def bench_masc_step(tables, peak, quick) -> list[dict]:
    from ttw_jax.talk_the_walk.masc import masked_conv3x3
    b = 32 if quick else 128
    step, state, batch, key = masc_step(tables, b)
    flops = program_flops(step, state, batch, key)
    secs = timeit(lambda s: step(s, batch, key)[1], state, repeats=2 if quick else 5)
    # The MASC convolution alone, forward + backward: one im2col GEMM vs a vmapped conv.
    n, bb = 500, 8 if quick else 16
    u = jax.random.normal(jax.random.key(0), (bb, 4, 4, n))
    masks = jax.nn.softmax(jax.random.normal(jax.random.key(1), (3, bb, 9)))
    kernel = jax.random.normal(jax.random.key(2), (9, n, n)) / np.sqrt(n)

    def gemm(kernel, u):
        for i in range(3):
            u = masked_conv3x3(u, masks[i], kernel)
        return jnp.sum(u ** 2)

    def per_example(kernel, u):
        def conv1(x, m):
            k = (m[:, None, None] * kernel).reshape(3, 3, n, n)
            return jax.lax.conv_general_dilated(x[None], k, (1, 1), "SAME",
                                                dimension_numbers=("NHWC", "HWIO", "NHWC"))[0]
        for i in range(3):
            u = jax.vmap(conv1)(u, masks[i])
        return jnp.sum(u ** 2)

    ours = timeit(jax.jit(jax.grad(gemm)), kernel, u, repeats=2)
    ref = timeit(jax.jit(jax.grad(per_example)), kernel, u, repeats=1)
    return [row(f"MASC train step, T=3, L=500, batch {b}", f"{sig(secs * 1e3)} ms/step", "", "",
                pct(flops / secs / 1e9, peak)),
            row(f"MASC convolution forward+backward, batch {bb}: one im2col GEMM",
                f"{sig(ours * 1e3)} ms", f"{sig(ref * 1e3)} ms (vmapped per-example conv, same run)",
                f"{sig(ref / ours)}x")]
