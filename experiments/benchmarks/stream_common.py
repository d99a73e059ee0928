"""What the streaming benchmarks share: timing, peak memory, a run folder, the child protocol."""
from __future__ import annotations

import json
import os
import resource
import time


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed_steps(step_fn, state, steps: int):
    """(state, examples-per-step-seconds) of `steps` timed steps after 2 untimed ones."""
    import jax
    for s in range(2):
        state, m = step_fn(state, s)
    jax.block_until_ready(m)
    t0 = time.perf_counter()
    for s in range(2, 2 + steps):
        state, m = step_fn(state, s)
    jax.block_until_ready(m)
    return state, time.perf_counter() - t0


def run_dir(data_dir: str, name: str) -> str:
    """A workdir for the run's vocabulary."""
    path = os.path.join(data_dir, f"{name}_run")
    os.makedirs(path, exist_ok=True)
    return path


def report(result: dict) -> None:
    """The child's one line the driver (`stream_bench`) reads."""
    print("RESULT " + json.dumps(result), flush=True)


def child_main(prepare_only: bool, prepare, measure, size: int, steps: int) -> None:
    """A benchmark child: `prepare(size)` only, or `report(measure(size, steps))`."""
    if prepare_only:
        prepare(size)
    else:
        report(measure(size, steps))
