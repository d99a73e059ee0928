r"""View features at full size: a Matterport3DSimulator TSV of every viewpoint, converted once, and
the RCM agent's train step with them.

  python -m experiments.benchmarks.rxr_features_bench --data_dir=/tmp/rxr_features_bench \
      [--dim=2048] [--steps=10] [--markdown=table.md]

Writes (once) `img_features.tsv` in the simulator's exact format (`ttw_jax.rxr.view_features`)
for every included viewpoint of the connectivity graphs (10,567 in the 90 Matterport3D scans,
float32 [36, --dim] each, random), then, each in a fresh process so that its peak memory is its
own:
- `convert`: the TSV decoded into the float16 cache (seconds, MB/s of TSV text, peak RSS);
- `reload`: a restart's read of the cache, the [N, 36, D] table of every viewpoint;
- `steps`: the RCM agent's train step (the defaults: batch 32, hidden 256, half behavioural
  cloning, half policy gradient, horizon 10) on the R2R train split (`--r2r_dir`) with the view
  features of its scans, in float32 and bfloat16, against the same agent without view features
  (angles only), timed over `--steps` steps after two untimed ones; and the device table's size.
Prints one Markdown table.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
from absl import app, flags

from experiments.benchmarks.stream_common import peak_rss_mb, report

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", "/tmp/rxr_features_bench", "Where the TSV and its cache go.")
flags.DEFINE_string("connectivity_dir", "../shared/data/matterport/connectivity",
                    "Matterport3D connectivity graphs: the viewpoints written.")
flags.DEFINE_string("r2r_dir", "../shared/data/r2r", "R2R_train.json for the train steps.")
flags.DEFINE_integer("dim", 2048, "Feature size per view (the ResNet-152 TSV's 2048).")
flags.DEFINE_integer("steps", 10, "Timed train steps.")
flags.DEFINE_string("part", "", "A child: convert | reload | steps (the driver runs them).")
flags.DEFINE_string("dtype", "float32", "steps: float32 | bfloat16 | none (angles only).")
flags.DEFINE_string("markdown", "", "Also write the table here.")


def tsv_path() -> str:
    return os.path.join(FLAGS.data_dir, "img_features.tsv")


def cache_dir() -> str:
    return os.path.join(FLAGS.data_dir, "cache")


def write_tsv() -> dict:
    """The full-size TSV (written once): {viewpoints, bytes, seconds}."""
    from ttw_jax.rxr.graph import load_matterport_graph
    from ttw_jax.rxr.view_features import encode_tsv_row
    path = tsv_path()
    done = path + ".done"
    if os.path.exists(done):
        return json.load(open(done))
    os.makedirs(FLAGS.data_dir, exist_ok=True)
    _, nodes, _ = load_matterport_graph(FLAGS.connectivity_dir)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    with open(path, "w", encoding="ascii", newline="") as f:
        for node in nodes.ids:
            scan, viewpoint = node.split("/", 1)
            feats = np.abs(rng.standard_normal((36, FLAGS.dim), np.float32))   # ReLU-like
            f.write(encode_tsv_row(scan, viewpoint, feats))
    info = {"viewpoints": len(nodes.ids), "bytes": os.path.getsize(path),
            "seconds": time.perf_counter() - t0}
    json.dump(info, open(done, "w"))
    return info


def convert() -> dict:
    from ttw_jax.rxr import view_features as vf
    folder = vf.cache_folder(tsv_path(), cache_dir())
    if os.path.isdir(folder):
        import shutil
        shutil.rmtree(folder)
    t0 = time.perf_counter()
    vf.convert(tsv_path(), cache_dir(), progress=False)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "peak_rss_mb": peak_rss_mb(),
            "cache_mb": os.path.getsize(os.path.join(folder, "features.f16")) / 2 ** 20}


def reload() -> dict:
    from ttw_jax.rxr import view_features as vf
    from ttw_jax.rxr.graph import load_matterport_graph
    _, nodes, _ = load_matterport_graph(FLAGS.connectivity_dir)
    t0 = time.perf_counter()
    table = vf.feature_table(tsv_path(), nodes, cache_dir())
    return {"seconds": time.perf_counter() - t0, "peak_rss_mb": peak_rss_mb(),
            "table_mb": table.nbytes / 2 ** 20, "viewpoints": len(nodes.ids)}


def steps() -> dict:
    """Train-step time of the default agent on R2R train with the features in `--dtype`."""
    import jax
    import jax.numpy as jnp
    from flax.training import train_state

    from experiments.benchmarks.stream_common import timed_steps
    from experiments.rxr import train
    from experiments.rxr.configs import default
    from ttw_jax.core.train import data_parallel as dp
    from ttw_jax.core.train.run import make_optimizer
    from ttw_jax.core.vocab import Vocabulary
    from ttw_jax.rxr import (episodes as rxr_episodes, records as rr, training_data,
                             view_features as vf, views)
    from ttw_jax.rxr.graph import geodesic_table, load_matterport_graph
    from ttw_jax.rxr.losses import mixed_loss

    c = default.get_config()
    records = rr.read_r2r(os.path.join(FLAGS.r2r_dir, "R2R_train.json"))
    scans = sorted({r["scan"] for r in records})
    graph, nodes, scan_of = load_matterport_graph(FLAGS.connectivity_dir, scans)
    vocab = Vocabulary.build([r["instruction"] for r in records])
    eps = rxr_episodes.episodes(records, nodes, graph, vocab, ["en"], 80, 8)
    if FLAGS.dtype == "none":
        table = views.empty_view_features(len(nodes.ids))
    else:   # the trainer's device table: float32, or bfloat16 bits (`views.device_table`)
        table = views.device_table(vf.feature_table(tsv_path(), nodes, cache_dir()), FLAGS.dtype)
    mesh = dp.make_mesh(jax.devices()[:1])
    model = train.build_model(c, len(vocab))
    params = train.init_params(model, table.shape[-1], graph.max_degree, jax.random.key(0))
    state = train_state.TrainState.create(apply_fn=model.apply, params=params,
                                          tx=make_optimizer(c.optim, c.num_steps))
    loss_cfg = c.loss.to_dict() | {"horizon": 10}
    import ml_collections
    step = dp.make_train_step(mixed_loss(model, ml_collections.ConfigDict(loss_cfg)), mesh,
                              num_consts=3)
    sample = dp.episode_sampler({k: eps[k] for k in training_data.BATCH_KEYS if k in eps},
                                c.batch_size, mesh)
    consts = (dp.replicate(graph, mesh), dp.replicate(jnp.asarray(table), mesh),
              dp.replicate(geodesic_table(graph, scan_of), mesh))
    state = dp.replicate(state, mesh)

    def step_fn(state, s):
        key = jax.random.key(s)
        return step(state, sample(key), key, *consts)
    _, seconds = timed_steps(step_fn, state, FLAGS.steps)
    return {"ms_per_step": 1000 * seconds / FLAGS.steps, "peak_rss_mb": peak_rss_mb(),
            "table_mb": table.nbytes / 2 ** 20, "viewpoints": len(nodes.ids),
            "episodes": len(records)}


def child(part: str, *extra: str) -> dict:
    cmd = [sys.executable, "-m", "experiments.benchmarks.rxr_features_bench", f"--part={part}",
           f"--data_dir={FLAGS.data_dir}", f"--connectivity_dir={FLAGS.connectivity_dir}",
           f"--r2r_dir={FLAGS.r2r_dir}", f"--dim={FLAGS.dim}", f"--steps={FLAGS.steps}", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(next(line for line in out.splitlines()
                           if line.startswith("RESULT "))[len("RESULT "):])


def main(argv):
    del argv
    if FLAGS.part:
        report({"convert": convert, "reload": reload, "steps": steps}[FLAGS.part]())
        return
    tsv = write_tsv()
    conv = child("convert")
    again = child("reload")
    step = {d: child("steps", f"--dtype={d}") for d in ("none", "float32", "bfloat16")}
    mb = tsv["bytes"] / 2 ** 20
    rows = [
        "| work | figure |", "| --- | --- |",
        f"| TSV written (every viewpoint, float32 [36, {FLAGS.dim}] each) | "
        f"{tsv['viewpoints']:,} viewpoints, {mb:,.0f} MB |",
        f"| conversion into the float16 cache, once | {conv['seconds']:.1f} s "
        f"({mb / conv['seconds']:,.0f} MB/s of TSV), peak RSS {conv['peak_rss_mb']:,.0f} MB, "
        f"cache {conv['cache_mb']:,.0f} MB |",
        f"| a restart: the table of every viewpoint read from the cache | "
        f"{again['seconds']:.1f} s, peak RSS {again['peak_rss_mb']:,.0f} MB, float32 table "
        f"{again['table_mb']:,.0f} MB |"]
    for d, r in step.items():
        name = "no view features (angles only)" if d == "none" else f"{FLAGS.dim}-d, {d} table"
        rows.append(f"| RCM train step, batch 32, R2R train ({r['episodes']:,} instructions, "
                    f"{r['viewpoints']:,} viewpoints), {name} | {r['ms_per_step']:.1f} ms/step, "
                    f"device table {r['table_mb']:,.0f} MB, peak RSS {r['peak_rss_mb']:,.0f} MB |")
    table = "\n".join(rows)
    print(table)
    if FLAGS.markdown:
        open(FLAGS.markdown, "w").write(table + "\n")


if __name__ == "__main__":
    app.run(main)
