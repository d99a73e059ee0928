"""`run_all`'s seed-axis row: N seeds of a train step in one program (`config.num_seeds`, the
step vmapped over stacked parameters, optimizer states and keys) against N sequential runs, each
compiling its own program, as N separate launches do. Both include compilation; the persistent
compilation cache is off while `run_all` runs.

  python -m experiments.benchmarks.seeds_bench --seeds=8 --steps=20
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import optax
from flax.training import train_state

from experiments.benchmarks.measure import row, sig
from experiments.benchmarks.ttw_rows import localizer, ttw_tables


def masc_pieces(tables, batch: int, features: int, seeds: int):
    """(loss_fn, states, batches, keys) of `seeds` MASC learners (T=3, L=`features`): each
    seed's own initial parameters, Adam state, walks and key."""
    from ttw_jax.talk_the_walk import walks
    from ttw_jax.talk_the_walk.emergent.losses import localization_loss
    from ttw_jax.talk_the_walk.emergent.model import Localizer
    model, _ = localizer(features, tables["train"])
    table = jnp.asarray(tables["train"])
    tx = optax.adam(1e-3)     # one optimizer: the states stack only when their static parts match
    states, batches, keys = [], [], []
    for s in range(seeds):
        k_init, k_data, k_step = jax.random.split(jax.random.key(s), 3)
        ex = walks.sample_batch(k_data, table, 2, 3)
        params = model.init({"params": k_init}, ex["obs"], ex["actions"],
                            ex["landmarks"])["params"]
        states.append(train_state.TrainState.create(apply_fn=model.apply, params=params,
                                                    tx=tx))
        batches.append(walks.sample_batch(k_data, table, batch, 3))
        keys.append(k_step)
    assert isinstance(model, Localizer)
    return localization_loss(model.apply, False), states, batches, keys


def time_steps(step, state, batch, key, steps: int) -> tuple[float, float]:
    """(seconds of the first call, compilation included; seconds per later step)."""
    t = time.perf_counter()
    state, metrics = step(state, batch, key)
    jax.block_until_ready(metrics)
    first = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(steps):
        state, metrics = step(state, batch, key)
    jax.block_until_ready((state, metrics))
    return first, (time.perf_counter() - t) / steps


def compare(loss_fn, states, batches, keys, steps: int) -> dict:
    """Wall time (compilation included) and examples per second of the N seeds in one program
    and of N sequential programs, on one device."""
    from ttw_jax.core.train import data_parallel as dp
    from ttw_jax.core.train.seeds import stack
    mesh = dp.make_mesh(jax.devices()[:1])
    n, b = len(states), jax.tree_util.tree_leaves(batches[0])[0].shape[0]
    t = time.perf_counter()
    seq_steps = 0.0
    for state, batch, key in zip(states, batches, keys):
        step = dp.make_train_step(loss_fn, mesh, donate=False)   # a new program, as a new run
        _, per_step = time_steps(step, dp.replicate(state, mesh), batch, key, steps)
        seq_steps += per_step
    sequential = time.perf_counter() - t
    t = time.perf_counter()
    step = dp.make_train_step(loss_fn, mesh, donate=False, seed_axes=(), num_seeds=n)
    _, par_step = time_steps(step, dp.replicate(stack(states), mesh), stack(batches),
                             jnp.stack(keys), steps)
    parallel = time.perf_counter() - t
    return {"seeds": n, "batch": b, "steps": steps, "parallel_s": parallel,
            "sequential_s": sequential, "parallel_examples_per_s": n * b / par_step,
            "sequential_examples_per_s": n * b / seq_steps}


def bench_parallel_seeds(tables, quick: bool, seeds: int | None = None,
                         steps: int | None = None) -> list[dict]:
    """The MASC rows: N seeds in one program vs N sequential runs (CPU: 4 seeds, batch 32,
    L=100; an accelerator: 8 seeds, batch 128, L=500, the paper's size)."""
    accel = jax.default_backend() != "cpu"
    n = seeds or (8 if accel else 2 if quick else 4)
    b, features = (128, 500) if accel else (32, 100)
    steps = steps or (2 if quick else 20)
    r = compare(*masc_pieces(tables, b, features, n), steps)
    what = f"{n} seeds of the MASC train step (T=3, L={features}, batch {b}, {steps} steps)"
    return [row(f"{what}: wall time, compilation included",
                f"{sig(r['parallel_s'])} s (one program)",
                f"{sig(r['sequential_s'])} s ({n} sequential programs, same run)",
                f"{sig(r['sequential_s'] / r['parallel_s'])}x"),
            row(f"{what}: examples per second, after compilation",
                f"{sig(r['parallel_examples_per_s'])} ex/s (one program)",
                f"{sig(r['sequential_examples_per_s'])} ex/s ({n} sequential programs)",
                f"{sig(r['parallel_examples_per_s'] / r['sequential_examples_per_s'])}x")]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=None)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    tables, _ = ttw_tables()
    for r in bench_parallel_seeds(tables, args.quick, args.seeds, args.steps):
        print(f"{r['work']}: {r['ours']} vs {r['reference']} ({r['ratio']})")


if __name__ == "__main__":
    main()
