r"""ArraMon simulator throughput: on-device `lax.scan` rollouts against the plain-Python reference.

  python -m experiments.benchmarks.arramon_env_bench [--data=../shared/data/arramon/val_seen.json]
      [--batch_sizes=1,1024]

Episodes are the instances of `--data` (cycled up to the batch size; the split's walkable map),
or synthetic instances (`ttw_jax.arramon.synthetic`, one city each) when that file is
missing. Uniform random actions [T, B] over the 4 actions (T = `--horizon`, 150 = the paper's
step limit per phase) are drawn once with numpy. For each phase (navigation from each episode's
start, assembly on its initial grid) and batch size, in the same run:

- jax: `jax.jit` of a `lax.scan` of `step_navigation` / `step_assembly`, vmapped over the batch,
  over the actions (the whole phase one call), timed after a compile run, `block_until_ready`,
  best of `--repeats`;
- python: `NavReference` / `AssemblyReference` (`ttw_jax.arramon.reference`) stepped over the
  same actions in a Python loop, on the first `--python_episodes` episodes of the batch, repeated
  (with fresh reference objects, whose construction is not timed) for `--python_seconds`.

steps/s = episodes * T / seconds. Every step call counts, also those on finished episodes: a
random assembly phase places its object within a few steps, after which both simulators do
nothing; `live` is the share of step calls on unfinished episodes (from the Python subset).
The "assembly, moves only" rows draw forward / left / right only, so every step is live.
The Python subset's final positions (1e-3), headings and pick-ups (navigation) and cells,
placements and heights (assembly) are asserted equal to the JAX ones.

Synthetic agents and objects stand on a lattice of half units, so random agents can stand exactly
on the pick-up rectangle's edges, where float32 (JAX) and float64 (reference) rounding may decide
differently (`tests/arramon/test_env.py` checks those steps one by one). Synthetic starts are therefore moved by `SYNTHETIC_SHIFT` off that
lattice here, so that the two simulators agree exactly.
"""
from __future__ import annotations

import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from ttw_jax.arramon import env, episodes as ae
from ttw_jax.arramon.records import read_arramon
from ttw_jax.arramon.reference import AssemblyReference, NavReference
from ttw_jax.arramon.synthetic import synthetic_instances
from ttw_jax.core.env import batched
from ttw_jax.core.vocab import Vocabulary

FLAGS = flags.FLAGS
flags.DEFINE_string("data", "../shared/data/arramon/val_seen.json",
                    "ArraMon instance file; synthetic instances when it does not exist.")
flags.DEFINE_integer("synthetic", 256, "Synthetic instances drawn when --data is missing.")
flags.DEFINE_string("batch_sizes", "1,1024", "Comma-separated batch sizes.")
flags.DEFINE_integer("horizon", env.STEP_LIMIT, "Steps per phase (T).")
flags.DEFINE_integer("repeats", 5, "Timed repetitions of the jitted rollout (best is reported).")
flags.DEFINE_integer("python_episodes", 256, "Episodes the Python reference steps through.")
flags.DEFINE_float("python_seconds", 1.0, "Approximate time budget of each Python measurement.")
flags.DEFINE_integer("seed", 0, "Seed of the random actions (and of synthetic instances).")

SYNTHETIC_SHIFT = (0.0123, 0.0231)        # (x, z) added to synthetic starts, see the docstring


def load_episodes():
    """(instances, episode arrays, walkable map with numpy leaves, description)."""
    if os.path.exists(FLAGS.data):
        records, what = read_arramon(FLAGS.data), FLAGS.data
    else:
        records = synthetic_instances(FLAGS.synthetic, FLAGS.seed)
        what = f"{FLAGS.synthetic} synthetic instances ({FLAGS.data} not found)"
    walk, map_index = ae.walkable_for(records)
    ep = ae.episodes(records, Vocabulary.build(["go"]), map_index=map_index)
    if "world" in records[0]:
        ep["start"] = ep["start"] + np.float32(SYNTHETIC_SHIFT)
    return records, ep, walk, what


def jax_steps_per_second(fn, batch: int, horizon: int, *args) -> float:
    jax.block_until_ready(fn(*args))      # compile
    best = float("inf")
    for _ in range(FLAGS.repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t0)
    return batch * horizon / best


def python_steps_per_second(make_refs, actions: np.ndarray):
    """(steps/s, the references of the last run): fresh references from `make_refs()` stepped
    through their columns of actions [T, n], repeated for about --python_seconds."""
    cols = actions.T.tolist()
    steps, spent = 0, 0.0
    while spent < FLAGS.python_seconds or steps == 0:
        refs = make_refs()
        t0 = time.perf_counter()
        for ref, col in zip(refs, cols):
            step = ref.step
            for a in col:
                step(a)
        spent += time.perf_counter() - t0
        steps += actions.size
    return steps / spent, refs


@jax.jit
def nav_rollout(walk, state, actions):
    step = batched(env.step_navigation)
    return jax.lax.scan(lambda s, a: (step(walk, s, a), None), state, actions)[0]


@jax.jit
def asm_rollout(state, actions):
    step = batched(env.step_assembly)
    return jax.lax.scan(lambda s, a: (step(env.ASSEMBLY, s, a), None), state, actions)[0]


def live_share(refs, horizon: int) -> float:
    return sum(r.num_steps for r in refs) / (len(refs) * horizon)


def bench_navigation(records, ep, walk, dev_walk, idx, actions):
    """(jax steps/s, python steps/s, episodes that differ, python episodes, live share)."""
    batch, horizon = len(idx), actions.shape[0]
    state = batched(env.reset_navigation)(dev_walk, ep["start"][idx], ep["psi0"][idx],
                                          ep["objects"][idx], ep["object_mask"][idx],
                                          ep["map_index"][idx], ep["turn_heading"][idx, 0])
    state, dev_actions = jax.device_put((state, jnp.asarray(actions)))
    fast = jax_steps_per_second(nav_rollout, batch, horizon, dev_walk, state, dev_actions)
    final = jax.device_get(nav_rollout(dev_walk, state, dev_actions))

    n = min(batch, FLAGS.python_episodes)
    args = []
    for i in idx[:n]:
        m = int(ep["map_index"][i])
        args.append((walk.grid[m], walk.origin[m], walk.resolution, ep["start"][i].tolist(),
                     ae.start_heading(records[i]), int(ep["turn_heading"][i, 0]),
                     ep["objects"][i].tolist(), ep["object_mask"][i].tolist()))
    slow, refs = python_steps_per_second(lambda: [NavReference(*a) for a in args],
                                         actions[:, :n])
    err = np.abs(final.position[:n] - np.array([r.position for r in refs])).max(-1)
    same = ((err <= 1e-3) & (final.heading[:n] == [r.heading for r in refs])
            & (final.picked[:n] == [r.picked for r in refs]))
    return fast, slow, int(np.sum(~same)), n, live_share(refs, horizon)


def bench_assembly(ep, idx, actions):
    """(jax steps/s, python steps/s, episodes that differ, python episodes, live share)."""
    batch, horizon = len(idx), actions.shape[0]
    state, dev_actions = jax.device_put((batched(env.reset_assembly)(env.ASSEMBLY,
                                                                      ep["heights"][idx]),
                                         jnp.asarray(actions)))
    fast = jax_steps_per_second(asm_rollout, batch, horizon, state, dev_actions)
    final = jax.device_get(asm_rollout(state, dev_actions))

    n = min(batch, FLAGS.python_episodes)
    heights = [ep["heights"][i].tolist() for i in idx[:n]]
    slow, refs = python_steps_per_second(lambda: [AssemblyReference(h) for h in heights],
                                         actions[:, :n])
    differ = sum((tuple(final.cell[b].tolist()), tuple(final.placed[b].tolist()),
                  final.heights[b].tolist()) != (r.cell, r.placed or (-1, -1, -1), r.heights)
                 for b, r in enumerate(refs))
    return fast, slow, differ, n, live_share(refs, horizon)


def main(argv):
    del argv
    records, ep, walk, what = load_episodes()
    dev_walk = jax.device_put(env.Walkable(grid=jnp.asarray(walk.grid),
                                           origin=jnp.asarray(walk.origin),
                                           resolution=walk.resolution))
    print(f"data: {what}; {len(records)} instances; walkable rasters {walk.grid.shape} at "
          f"{walk.resolution}; device {jax.devices()[0].device_kind}; T = {FLAGS.horizon}\n")
    print("| phase | batch | live | JAX steps/s | Python steps/s (episodes) | JAX / Python |")
    print("|---|---:|---:|---:|---:|---:|")
    rng = np.random.default_rng(FLAGS.seed)
    for batch in [int(b) for b in FLAGS.batch_sizes.split(",")]:
        idx = np.arange(batch) % len(records)
        for phase, num_actions in (("navigation", env.NUM_ACTIONS),
                                   ("assembly", env.NUM_ACTIONS), ("assembly, moves only", 3)):
            actions = rng.integers(0, num_actions, (FLAGS.horizon, batch)).astype(np.int32)
            if phase == "navigation":
                fast, slow, differ, n, live = bench_navigation(records, ep, walk, dev_walk, idx,
                                                               actions)
            else:
                fast, slow, differ, n, live = bench_assembly(ep, idx, actions)
            assert differ == 0, f"{phase}, batch {batch}: {differ} of {n} episodes differ"
            print(f"| {phase} | {batch:,} | {live:.0%} | {fast:,.0f} | {slow:,.0f} ({n}) | "
                  f"{fast / slow:,.1f}x |", flush=True)


if __name__ == "__main__":
    app.run(main)
