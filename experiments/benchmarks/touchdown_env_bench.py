r"""Touchdown simulator throughput: on-device `lax.scan` rollouts against a plain-Python loop.

  python -m experiments.benchmarks.touchdown_env_bench [--graph_dir=../shared/data/touchdown/graph]

Random policies (uniform FORWARD/LEFT/RIGHT, never STOP) on the real 29,641-panorama graph; for each
batch size, environment steps per second of (a) `ttw_jax.core.env.rollout` of the Touchdown `step`
(jit, vmap over the batch, scan over `horizon` steps, the random policy inside the scan) and (b)
the pure-Python
reference simulator stepping every episode in a Python loop, in the same run.
"""
from __future__ import annotations

import time

import jax
import numpy as np
from absl import app, flags

from ttw_jax.core.env import batched, rollout
from ttw_jax.touchdown import env as td
from ttw_jax.touchdown.graph import compile_touchdown, read_graph_files
from ttw_jax.touchdown.reference import TouchdownReference

FLAGS = flags.FLAGS
flags.DEFINE_string("graph_dir", "../shared/data/touchdown/graph", "nodes.txt / links.txt dir.")
flags.DEFINE_string("batch_sizes", "1,1024,8192", "Comma-separated batch sizes.")
flags.DEFINE_integer("horizon", 100, "Steps per rollout.")
flags.DEFINE_integer("repeats", 5, "Timed repetitions of the jitted rollout (best is reported).")
flags.DEFINE_float("python_seconds", 3.0, "Approximate time budget of each Python measurement.")


def jax_steps_per_second(sim, batch: int, horizon: int, repeats: int) -> float:
    run = jax.jit(lambda m, s, k: rollout(td.step, m, s, td.random_policy, None, k,
                                          horizon)[0].pano)
    rng = np.random.default_rng(batch)
    n = sim.graph.num_nodes
    state = batched(td.reset)(sim, rng.integers(0, n, batch),
                              np.asarray(sim.graph.headings)[rng.integers(0, n, batch), 0])
    run(sim, state, jax.random.key(0)).block_until_ready()   # compile
    best = float("inf")
    for r in range(repeats):
        t0 = time.perf_counter()
        run(sim, state, jax.random.key(r + 1)).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    return batch * horizon / best


def python_steps_per_second(ref: TouchdownReference, ids, batch: int, horizon: int,
                            budget_s: float) -> float:
    rng = np.random.default_rng(batch)
    panos = [ids[i] for i in rng.integers(0, len(ids), batch)]
    heads = [ref.out[p][0][0] for p in panos]
    actions = rng.integers(0, 3, (horizon, batch)).tolist()
    steps, t0 = 0, time.perf_counter()
    for t in range(horizon):
        row = actions[t]
        for b in range(batch):
            panos[b], heads[b] = ref.step(panos[b], heads[b], row[b])
        steps += batch
        if time.perf_counter() - t0 > budget_s:
            break
    return steps / (time.perf_counter() - t0)


def main(argv):
    del argv
    nodes, links = read_graph_files(FLAGS.graph_dir)
    host_graph, table = compile_touchdown(nodes, links)
    sim = td.compile_sim(host_graph)
    ref = TouchdownReference(links)
    print(f"graph: {host_graph.num_nodes} panoramas, {len(links)} links; device "
          f"{jax.devices()[0].device_kind}; horizon {FLAGS.horizon}")
    print(f"{'batch':>6s} {'jax steps/s':>14s} {'python steps/s':>15s} {'ratio':>8s}")
    for batch in [int(b) for b in FLAGS.batch_sizes.split(",")]:
        fast = jax_steps_per_second(sim, batch, FLAGS.horizon, FLAGS.repeats)
        slow = python_steps_per_second(ref, table.ids, batch, FLAGS.horizon, FLAGS.python_seconds)
        print(f"{batch:6d} {fast:14,.0f} {slow:15,.0f} {fast / slow:7.1f}x")


if __name__ == "__main__":
    app.run(main)
