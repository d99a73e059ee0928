r"""One size of the streaming benchmark (`stream_bench`): Touchdown SDR with `data.stream=True`.

  python -m experiments.benchmarks.sdr_stream_bench --panoramas=250 --data_dir=... [--steps=12]
      [--prefetch=2] [--feature_shape=100,464,128]

Writes (once) `--panoramas` synthetic scenes as the official release (`features/<panoid>.npy`
float16 [100, 464, 128], 11.9 MB each, one record each) under `--data_dir`, then trains LingUNet
at the default (CPU) config, batch 8, on batches streamed from the files by grain, and prints one
`RESULT {json}` line: examples/s over the timed steps, the time each step waited for its batch
(`dp.StreamSampler`; `--prefetch=0` reads each batch when the step asks for it, N > 0 reads N
batches ahead onto the devices) and the process's peak resident memory.
"""
from __future__ import annotations

import os
import time

import jax
import numpy as np
from absl import app, flags
from flax.training import train_state

from experiments.benchmarks.stream_common import child_main, peak_rss_mb, run_dir, timed_steps
from experiments.touchdown_sdr import train
from experiments.touchdown_sdr.configs import default
from ttw_jax.core.stream import BatchStream
from ttw_jax.core.train import data_parallel as dp
from ttw_jax.core.train.run import make_optimizer
from ttw_jax.touchdown.sdr.losses import make_loss
from ttw_jax.touchdown.sdr.stream import write_synthetic_release

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", "/tmp/ttw_stream_bench", "Where the synthetic release is kept.")
flags.DEFINE_integer("panoramas", 250, "Panoramas (one record each).")
flags.DEFINE_integer("steps", 12, "Timed training steps.")
flags.DEFINE_integer("prefetch", 2, "Batches read ahead onto the devices (0: none).")
flags.DEFINE_string("feature_shape", "100,464,128", "H,W,C of the synthetic feature maps.")
flags.DEFINE_bool("prepare_only", False, "Write the data and stop (the driver measures in a "
                  "fresh process, so the peak memory is training's alone).")


def shape() -> tuple[int, int, int]:
    return tuple(int(x) for x in FLAGS.feature_shape.split(","))


def prepare(n: int) -> str:
    """The synthetic release of `n` panoramas (written once)."""
    suffix = "" if shape() == (100, 464, 128) else "_" + "x".join(map(str, shape()))
    manual = os.path.join(FLAGS.data_dir, f"sdr_{n}{suffix}")
    if not os.path.exists(os.path.join(manual, "test.json")):
        write_synthetic_release(manual, n, seed=0, shape=shape())
    return manual


def sdr_child(n: int, steps: int) -> dict:
    manual = prepare(n)
    c = default.get_config()
    c.data.stream, c.data.manual_dir = True, manual
    c.data.feature_shape = ",".join(map(str, shape()))
    c.data.eval_splits, c.batch_size = "dev", 8
    data = train.load_data(c, run_dir(FLAGS.data_dir, f"sdr_{n}"))
    tr = data["splits"]["train"]
    model = train.build_model(c, len(data["vocab"]))
    mesh = dp.make_mesh()
    params = model.init(jax.random.key(0), tr["tokens"][:2], tr["token_len"][:2],
                        tr["features"][:2].astype(np.float32))
    state = dp.replicate(train_state.TrainState.create(
        apply_fn=model.apply, params=params,
        tx=make_optimizer(train.optimizer_config(c), 100)), mesh)
    step = dp.make_train_step(make_loss(model, c.sigma), mesh)
    keys = ("features", "center", "tokens", "token_len")
    stream = BatchStream.of_rows(tr, keys, c.batch_size, c.seed, c.data.stream_threads)
    sample = dp.StreamSampler(stream, mesh, prefetch=FLAGS.prefetch)
    waited = []

    def step_fn(st, s):
        t = time.perf_counter()
        batch = sample()
        waited.append(time.perf_counter() - t)
        return step(st, batch, jax.random.key(s))
    _, seconds = timed_steps(step_fn, state, steps)
    sample.close()
    return {"work": "Touchdown SDR (LingUNet, batch 8)", "size": f"{n} panoramas",
            "views": len(tr["center"]), "examples_per_s": steps * c.batch_size / seconds,
            "prefetch": FLAGS.prefetch, "feature_shape": list(shape()),
            "data_wait_ms_per_step": 1e3 * float(np.mean(waited[2:])),
            "peak_rss_mb": peak_rss_mb(),
            "decoded_mb": n * int(np.prod(shape())) * 2 / 2**20}


def main(argv):
    del argv
    child_main(FLAGS.prepare_only, prepare, sdr_child, FLAGS.panoramas, FLAGS.steps)


if __name__ == "__main__":
    app.run(main)
