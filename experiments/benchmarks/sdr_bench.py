r"""LingUNet training throughput at the paper's SDR input shape.

  python -m experiments.benchmarks.sdr_bench [--batch_size=10] [--steps=2]

One run on the default JAX device: LingUNet (m=2, 128 channels, 300-d words, 300-unit BiLSTM) on
[batch, 100, 464, 128] feature maps with 40-token descriptions, KL loss against a Gaussian target,
Adam, through the project's data-parallel train step. Reports the parameter count (and the
architecture's closed-form count), compile time, training examples per second, the step's FLOPs
counted from its traced program (`experiments.benchmarks.flops`: the same on every backend; XLA's
own count, which depends on the backend, printed beside it for reference), XLA's memory analysis
of the compiled step, the device's peak memory where it reports one, and the
process's peak resident memory.
"""
from __future__ import annotations

import resource
import time

import jax
import numpy as np
import optax
from absl import app, flags
from flax.training import train_state

from experiments.benchmarks.flops import program_flops
from ttw_jax.core.train import data_parallel as dp
from ttw_jax.touchdown.sdr.losses import make_loss
from ttw_jax.touchdown.sdr.models import build_sdr_model, lingunet_num_params

FLAGS = flags.FLAGS
flags.DEFINE_integer("batch_size", 10, "Examples per step (the paper's 10).")
flags.DEFINE_integer("steps", 2, "Timed steps after compilation.")
flags.DEFINE_integer("vocab_size", 4000, "Vocabulary size (Touchdown's is about 4,000 words).")
flags.DEFINE_string("shape", "100,464,128", "Feature map H,W,C (the paper's 8 ResNet18 slices).")


def main(argv):
    del argv
    h, w, c = (int(x) for x in FLAGS.shape.split(","))
    b, vocab, tokens_len = FLAGS.batch_size, FLAGS.vocab_size, 40
    model = build_sdr_model("lingunet", vocab, levels=2, channels=128, stride=1, mlp_hidden=128,
                            embed_dim=300, hidden=300, dropout=0.5)
    rng = np.random.default_rng(0)
    batch = {"features": rng.normal(size=(b, h, w, c)).astype(np.float16),
             "center": rng.uniform(size=(b, 2)).astype(np.float32),
             "tokens": rng.integers(1, vocab, (b, tokens_len)).astype(np.int32),
             "token_len": np.full((b,), tokens_len, np.int32)}
    params = jax.jit(model.init)(jax.random.key(0), batch["tokens"][:1], batch["token_len"][:1],
                                 batch["features"][:1].astype(np.float32))
    n_params = sum(x.size for x in jax.tree_util.tree_leaves(params))
    formula = lingunet_num_params(vocab, c, channels=128, levels=2, embed_dim=300, hidden=300,
                                  mlp_hidden=128)
    mesh = dp.make_mesh(jax.devices()[:1])
    state = dp.replicate(train_state.TrainState.create(apply_fn=model.apply, params=params,
                                                       tx=optax.adam(5e-4)), mesh)
    step = dp.make_train_step(make_loss(model, sigma=3.0), mesh)
    device_batch = dp.shard_global(batch, dp.batch_sharded(mesh))
    t0 = time.perf_counter()
    compiled = step.lower(state, device_batch, jax.random.key(1)).compile()
    compile_s = time.perf_counter() - t0
    state, m = compiled(state, device_batch, jax.random.key(1))
    jax.block_until_ready(m)
    t0 = time.perf_counter()
    for i in range(FLAGS.steps):
        state, m = compiled(state, device_batch, jax.random.key(2 + i))
    jax.block_until_ready(m)
    per_step = (time.perf_counter() - t0) / FLAGS.steps
    flops = program_flops(step, state, device_batch, jax.random.key(1))   # traced
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    xla_flops = float(cost.get("flops", float("nan"))) if cost else float("nan")
    mem = compiled.memory_analysis()
    stats = jax.devices()[0].memory_stats() or {}
    gib = 1024 ** 3
    print(f"device: {jax.devices()[0].device_kind}; input [{b}, {h}, {w}, {c}], "
          f"{tokens_len} tokens, vocabulary {vocab}")
    print(f"parameters: {n_params:,} (closed form: {formula:,})")
    print(f"compile: {compile_s:.1f} s; train step: {per_step:.2f} s -> "
          f"{b / per_step:.2f} examples/s; {flops / 1e12:.2f} TFLOP/step (traced count) -> "
          f"{flops / per_step / 1e9:.1f} GFLOP/s")
    print(f"XLA's cost analysis on this backend (not used above): {xla_flops / 1e12:.2f} "
          f"TFLOP/step")
    if mem is not None:
        print(f"XLA memory analysis: arguments {mem.argument_size_in_bytes / gib:.2f} GiB, "
              f"outputs {mem.output_size_in_bytes / gib:.2f} GiB, temporaries "
              f"{mem.temp_size_in_bytes / gib:.2f} GiB")
    if "peak_bytes_in_use" in stats:
        print(f"device peak memory: {stats['peak_bytes_in_use'] / gib:.2f} GiB")
    print(f"process peak resident memory: "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2:.2f} GiB")


if __name__ == "__main__":
    app.run(main)
