"""What one small program costs to compile: the fixed cost that the test suite pays per program.

    python -m experiments.benchmarks.compile_overhead [--programs=40] [--out=FILE.json]

Compiles `--programs` distinct shapes (a new program each; the compilation cache off) of two
functions: a trivial one, `(x * 2 + 1).sum(0)` of [n, 3], and the gradient of a 3-layer tanh MLP
(5 -> 16 -> 16 -> 3) on [n, 5]; with XLA's optimisations on and off (`jax_disable_most_optimizations`:
LLVM at -O0, its expensive passes skipped). Printed per program: milliseconds of wall time and
of JAX's tracing, lowering and XLA compiling (jax.monitoring's duration events).
"""
from __future__ import annotations

import argparse
import collections
import json
import time

PROGRAMS = {
    "trivial": "(x * 2 + 1).sum(0), x [n, 3]",
    "mlp_grad": "grad of a 3-layer tanh MLP (5 -> 16 -> 16 -> 3), x [n, 5]",
}


def measure(name: str, programs: int, optimized: bool) -> dict:
    """{wall, trace, lower, compile}: milliseconds per program, over `programs` new shapes."""
    import jax
    import jax.numpy as jnp
    from jax import monitoring
    from experiments.benchmarks.suite_time import COMPILE_EVENTS

    def trivial(x):
        return (x * 2 + 1).sum(0)

    def mlp_loss(w, x):
        h = jnp.tanh(jnp.tanh(x @ w[0]) @ w[1])
        return ((h @ w[2]) ** 2).mean()

    weights = [jnp.full((5, 16), .1), jnp.full((16, 16), .1), jnp.full((16, 3), .1)]
    call = {"trivial": lambda n: jax.jit(trivial)(jnp.ones((n, 3))),
            "mlp_grad": lambda n: jax.jit(jax.grad(mlp_loss))(weights, jnp.ones((n, 5)))}[name]
    totals = collections.Counter()

    def listen(event, duration, **_):
        if event in COMPILE_EVENTS:
            totals[COMPILE_EVENTS[event]] += duration
    old = (jax.config.read("jax_disable_most_optimizations"),
           jax.config.jax_enable_compilation_cache)
    jax.config.update("jax_disable_most_optimizations", not optimized)
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        jax.block_until_ready(call(1))            # warm-up: imports, the first compile
        monitoring.register_event_duration_secs_listener(listen)
        try:
            start = time.perf_counter()
            for n in range(2, programs + 2):
                jax.block_until_ready(call(n))
            wall = time.perf_counter() - start
        finally:
            monitoring.unregister_event_duration_listener(listen)
    finally:
        jax.config.update("jax_disable_most_optimizations", old[0])
        jax.config.update("jax_enable_compilation_cache", old[1])
    per = {k: round(1000 * totals[k] / programs, 1) for k in ("trace", "lower", "compile")}
    return {"wall": round(1000 * wall / programs, 1), **per}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--programs", type=int, default=40)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    rows = []
    print("| program | XLA optimisations | ms per program | tracing | lowering | XLA |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in PROGRAMS:
        for optimized in (True, False):
            m = measure(name, args.programs, optimized)
            rows.append({"program": name, "what": PROGRAMS[name], "optimized": optimized, **m})
            print(f"| {name} | {'on' if optimized else 'off'} | {m['wall']} | {m['trace']} | "
                  f"{m['lower']} | {m['compile']} |")
    out = {"programs": args.programs, "rows": rows}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
