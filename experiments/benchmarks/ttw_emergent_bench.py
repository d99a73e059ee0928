r"""Benchmarks for Talk The Walk emergent-communication localization.

  python -m experiments.benchmarks.ttw_emergent_bench [--features=500] [--batch_size=128]

Reports, in one run on the default JAX device:
  (a) MASC train-step throughput at L=`features`, its achieved GFLOP/s (XLA's FLOP count of the
      compiled step) beside this machine's measured f32 matmul peak, and the im2col-GEMM MASC
      against a vmapped per-example convolution;
  (b) full-task (Algorithm 1) episodes per second for a batch of `episodes` episodes, on device;
  (c) the time of the exact T=3 Bayes upper bound over train/valid/test, with and without actions.
"""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import app, flags
from flax.training import train_state

from experiments.benchmarks.flops import program_flops
from experiments.benchmarks.measure import matmul_peak, timeit
from ttw_jax.core.train import data_parallel as dp
from ttw_jax.talk_the_walk import maps, walks
from ttw_jax.talk_the_walk.emergent.losses import localization_loss
from ttw_jax.talk_the_walk.emergent.model import Localizer
from ttw_jax.talk_the_walk.full_task import run_full_task
from ttw_jax.talk_the_walk.masc import masked_conv3x3
from ttw_jax.talk_the_walk.upper_bound import bayes_rate

FLAGS = flags.FLAGS
flags.DEFINE_integer("features", 500, "Message / embedding size L (the paper's 500).")
flags.DEFINE_integer("batch_size", 128, "Train-step batch size.")
flags.DEFINE_integer("T", 3, "Tourist moves.")
flags.DEFINE_integer("episodes", 1024, "Full-task batch size.")
flags.DEFINE_integer("compare_batch", 16, "Batch of the MASC implementation comparison (the "
                     "per-example convolution materialises a 9xLxL kernel per example).")
flags.DEFINE_integer("full_task_features", 128, "L of the model used in the full task.")
flags.DEFINE_string("maps_dir", "../shared/data/ttw/maps", "Real maps (synthetic if missing).")
flags.DEFINE_integer("repeats", 10, "Timed repetitions per measurement (fewer for the slow ones).")


def bench_train_step(table, repeats: int) -> dict:
    model = Localizer(T=FLAGS.T, features=FLAGS.features, num_landmark_ids=maps.NUM_LANDMARK_IDS)
    batch = walks.sample_batch(jax.random.key(0), jnp.asarray(table), FLAGS.batch_size, FLAGS.T)
    params = model.init({"params": jax.random.key(1)}, batch["obs"], batch["actions"],
                        batch["landmarks"])["params"]
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))
    mesh = dp.make_mesh()
    step = dp.make_train_step(localization_loss(model.apply, False), mesh, donate=False)
    state = dp.replicate(state, mesh)
    batch = jax.device_put(batch, dp.batch_sharded(mesh))
    key = jax.random.key(2)
    flops = program_flops(step, state, batch, key)
    seconds = timeit(lambda s: step(s, batch, key)[1], state, repeats=repeats)
    return {"step_ms": seconds * 1e3, "examples_per_s": FLAGS.batch_size / seconds,
            "gflop_per_step": flops / 1e9, "gflops": flops / seconds / 1e9}


def bench_masc_variants(repeats: int) -> dict:
    """Forward+backward of T MASC steps: one im2col GEMM vs a vmapped per-example convolution."""
    b, n, t = FLAGS.compare_batch, FLAGS.features, FLAGS.T
    u = jax.random.normal(jax.random.key(0), (b, 4, 4, n))
    masks = jax.nn.softmax(jax.random.normal(jax.random.key(1), (t, b, 9)))
    kernel = jax.random.normal(jax.random.key(2), (9, n, n)) / np.sqrt(n)

    def gemm(kernel, u):
        for i in range(t):
            u = masked_conv3x3(u, masks[i], kernel)
        return jnp.sum(u ** 2)

    def per_example(kernel, u):
        def conv1(x, m):  # x (4, 4, N), m (9,): its own masked kernel, then a convolution
            k = (m[:, None, None] * kernel).reshape(3, 3, n, n)
            return jax.lax.conv_general_dilated(x[None], k, (1, 1), "SAME",
                                                dimension_numbers=("NHWC", "HWIO", "NHWC"))[0]
        for i in range(t):
            u = jax.vmap(conv1)(u, masks[i])
        return jnp.sum(u ** 2)

    out = {}
    for name, f in (("im2col_gemm", gemm), ("vmapped_conv", per_example)):
        g = jax.jit(jax.grad(f))
        out[name + "_ms"] = timeit(g, kernel, u, repeats=max(1, repeats // 2)) * 1e3
    np.testing.assert_allclose(gemm(kernel, u), per_example(kernel, u), rtol=1e-3)
    return out


def bench_full_task(table, repeats: int) -> dict:
    model = Localizer(T=FLAGS.T, features=FLAGS.full_task_features,
                      num_landmark_ids=maps.NUM_LANDMARK_IDS)
    e = FLAGS.episodes
    lm = jnp.asarray(table[np.arange(e) % len(table)])
    target = jnp.asarray(np.arange(e) % 16, jnp.int32)
    ex = walks.sample_batch(jax.random.key(0), jnp.asarray(table), 2, FLAGS.T)
    params = model.init({"params": jax.random.key(1)}, ex["obs"], ex["actions"], ex["landmarks"])["params"]
    predict = lambda o, a, l: model.apply({"params": params}, o, a, l)["logits"]
    run = jax.jit(lambda k: run_full_task(k, predict, lm, target, FLAGS.T).success)
    seconds = timeit(run, jax.random.key(3), repeats=max(1, repeats // 5))
    return {"episodes_per_s": e / seconds, "env_steps_per_s": e * 150 / seconds, "batch_s": seconds}


def bench_upper_bound(tables) -> dict:
    out = {}
    for cond in (True, False):
        t = time.perf_counter()
        for s in maps.SPLITS:
            bayes_rate(tables[s], 3, condition_on_actions=cond)
        out["with_actions_s" if cond else "without_actions_s"] = time.perf_counter() - t
    return out


def main(_):
    try:
        data = maps.load_windows(FLAGS.maps_dir)
        source = FLAGS.maps_dir
    except FileNotFoundError:
        data, source = maps.load_windows(None), "synthetic"
    tables = {s: w.landmarks for s, w in data.items()}
    print(f"device: {jax.devices()[0].device_kind} x{jax.device_count()}, maps: {source}")
    peak = matmul_peak(quick=False)
    train = bench_train_step(tables["train"], FLAGS.repeats)
    print(f"(a) MASC train step, T={FLAGS.T}, L={FLAGS.features}, batch {FLAGS.batch_size}: "
          f"{train['step_ms']:.1f} ms/step, {train['examples_per_s']:.0f} examples/s, "
          f"{train['gflop_per_step']:.2f} GFLOP/step -> {train['gflops']:.1f} GFLOP/s = "
          f"{100 * train['gflops'] / peak:.0f}% of the measured matmul peak {peak:.1f} GFLOP/s")
    variants = bench_masc_variants(FLAGS.repeats)
    print(f"    MASC fwd+bwd, batch {FLAGS.compare_batch}: im2col GEMM {variants['im2col_gemm_ms']:.1f} ms vs vmapped per-example "
          f"conv {variants['vmapped_conv_ms']:.1f} ms "
          f"({variants['vmapped_conv_ms'] / variants['im2col_gemm_ms']:.1f}x)")
    ft = bench_full_task(tables["test"], FLAGS.repeats)
    print(f"(b) full task, {FLAGS.episodes} episodes x 150 steps, L={FLAGS.full_task_features}: "
          f"{ft['batch_s']:.2f} s -> {ft['episodes_per_s']:.0f} episodes/s "
          f"({ft['env_steps_per_s']:.0f} guide+env steps/s)")
    ub = bench_upper_bound(tables)
    print(f"(c) exact T=3 upper bound, train+valid+test: {ub['with_actions_s']:.2f} s with actions, "
          f"{ub['without_actions_s']:.2f} s without")


if __name__ == "__main__":
    app.run(main)
