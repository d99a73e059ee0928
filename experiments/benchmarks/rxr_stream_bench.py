r"""One size of the streaming benchmark (`stream_bench`): RxR / RCM with streamed text features.

  python -m experiments.benchmarks.rxr_stream_bench --instructions=2000 --data_dir=... [--steps=12]

Writes (once) a synthetic RxR release with `--instructions` training instructions (guide
files and 768-d text features, no pose traces) under `--data_dir`, builds it into `rxr/guide`,
then trains the default agent, batch 32, with `data.text_features=True, data.stream=True` (the
features read from the ArrayRecord files when a batch uses them), and prints one `RESULT {json}`
line.
"""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import ml_collections
from absl import app, flags
from flax.training import train_state

from experiments.benchmarks.stream_common import child_main, peak_rss_mb, run_dir, timed_steps
from experiments.rxr import train
from experiments.rxr.configs import default
from ttw_datasets.rxr.rxr_dataset_builder import SYNTHETIC_TRAIN_SCANS, SYNTHETIC_UNSEEN_SCANS
from ttw_jax.core.stream import BatchStream
from ttw_jax.core.train import data_parallel as dp
from ttw_jax.core.train.run import make_optimizer
from ttw_jax.rxr import dataset as rxr_data, training_data
from ttw_jax.rxr.graph import load_matterport_graph
from ttw_jax.rxr.losses import mixed_loss
from ttw_jax.rxr.release import write_release
from ttw_jax.rxr.synthetic import synthetic_split_records

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", "/tmp/ttw_stream_bench", "Where the synthetic release is kept.")
flags.DEFINE_integer("instructions", 2000, "Training instructions.")
flags.DEFINE_integer("steps", 12, "Timed training steps.")
flags.DEFINE_bool("prepare_only", False, "Write the data and stop (the driver measures in a "
                  "fresh process, so the peak memory is training's alone).")

RXR_DIM = 768


def prepare(n: int) -> str:
    """The synthetic RxR release with `n` training instructions and its `rxr/guide` TFDS build
    (both written once); returns the release's folder."""
    manual = os.path.join(FLAGS.data_dir, f"rxr_{n}")
    if not os.path.exists(os.path.join(manual, "done")):
        conn = connectivity_dir()
        recs = synthetic_split_records(conn, SYNTHETIC_TRAIN_SCANS, SYNTHETIC_UNSEEN_SCANS[:1],
                                       (("train", n, 0), ("val_seen", 50, 1),
                                        ("val_unseen", 50, 2)))
        scans = sorted({r["scan"] for split in recs.values() for r in split})
        graph, nodes, _ = load_matterport_graph(conn, scans)
        write_release(manual, graph, nodes, recs, dim=RXR_DIM, pose_traces=False)
        open(os.path.join(manual, "done"), "w").close()
    c = config(n, manual)
    rxr_data.prepare(c.data.tfds_config, c.data.tfds_dir, manual)
    return manual


def config(n: int, manual: str) -> ml_collections.ConfigDict:
    c = default.get_config()
    c.data.tfds_config, c.data.manual_dir = "guide", manual
    c.data.tfds_dir = os.path.join(FLAGS.data_dir, f"rxr_{n}_tfds")
    c.data.connectivity_dir = connectivity_dir()
    c.data.text_features, c.data.stream, c.data.max_tokens = True, True, 64
    c.data.max_path, c.eval.horizon, c.train_horizon = 16, 16, 12
    c.data.eval_splits = c.data.dev_split = "val_seen"
    return c


def connectivity_dir() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "..", "shared", "data", "matterport", "connectivity")
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path}: the Matterport3D connectivity graphs (../shared/data)")
    return os.path.abspath(path)


def rxr_child(n: int, steps: int) -> dict:
    c = config(n, prepare(n))
    data = train.load_data(c, run_dir(FLAGS.data_dir, f"rxr_{n}"))
    eps = data["episodes"]["train"]
    model = train.build_model(c, len(data["vocab"]))
    mesh = dp.make_mesh()
    params = train.init_params(model, data["features"].shape[-1], data["graph"].max_degree,
                               jax.random.key(0), RXR_DIM)
    state = dp.replicate(train_state.TrainState.create(
        apply_fn=model.apply, params=params, tx=make_optimizer(c.optim, 100)), mesh)
    graph, geodesic = dp.replicate(data["graph"], mesh), dp.replicate(data["geodesic"], mesh)
    features = dp.replicate(jnp.asarray(data["features"]), mesh)
    loss_config = ml_collections.ConfigDict({**c.loss.to_dict(), "horizon": c.train_horizon})
    step = dp.make_train_step(mixed_loss(model, loss_config), mesh, num_consts=3)
    keys = [k for k in training_data.BATCH_KEYS if k in eps]
    stream = BatchStream.of_rows(eps, keys, c.batch_size, c.seed, c.data.stream_threads)
    step_fn = lambda st, s: step(st, dp.shard_process_local(next(stream), mesh),
                                 jax.random.key(s), graph, features, geodesic)
    _, seconds = timed_steps(step_fn, state, steps)
    return {"work": "RxR RCM (text features, batch 32)", "size": f"{n} instructions",
            "views": len(eps["start"]), "examples_per_s": steps * c.batch_size / seconds,
            "peak_rss_mb": peak_rss_mb(),
            "decoded_mb": len(eps["start"]) * c.data.max_tokens * RXR_DIM * 2 / 2**20}


def main(argv):
    del argv
    child_main(FLAGS.prepare_only, prepare, rxr_child, FLAGS.instructions, FLAGS.steps)


if __name__ == "__main__":
    app.run(main)
