r"""Every benchmark side by side in one run, as one Markdown table.

  python -m experiments.benchmarks.run_all [--quick] [--out=/tmp/benchmarks.md]

Rows: the work, this project's figure, what it is compared with (measured in the same run, or a
recorded anchor, labelled as such), the ratio, and the fraction of this machine's f32 matmul
peak (measured first, in the same run) that the work's XLA FLOP count reaches. `--quick` shrinks
every measurement (under 3 minutes on 2 CPU cores); its figures are for smoke-testing, not for
the README. The simulators and the RCM rollouts run their own scripts in subprocesses
(`touchdown_env_bench`, `arramon_env_bench`, `rxr_rollout_bench`), whose full output goes to
the log; the streaming benchmark (`stream_bench`, memory) is separate.

Recorded anchors (not run here): the official PyTorch LingUNet step at the paper's SDR shape,
36 s (its own model code, torch 2.13, 2 threads, measured on this machine kind); the official
Talk The Walk full-task loop, 0.52 s per episode at L = 500, batch 1; the reference exact-bound
implementation, 114 s on the 4 real maps.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training import train_state

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(REPO, "..", "shared", "data")
ANCHORS = {"lingunet_official_s": 36.0, "ttw_full_task_official_s": 0.52, "ttw_bound_reference_s": 114.0}


def timeit(fn, *args, repeats: int = 3) -> float:
    """Median seconds of `repeats` calls after one warm-up call."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def xla_flops(jitted, *args) -> float:
    cost = jitted.lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float(cost["flops"])


def matmul_peak(quick: bool) -> float:
    """Best GFLOP/s of square f32 matmuls (1,024-3,072)."""
    f = jax.jit(lambda x, y: x @ y)
    best = 0.0
    for n in (1024, 2048) if quick else (1024, 2048, 3072):
        a = jax.random.normal(jax.random.key(0), (n, n))
        best = max(best, 2 * n ** 3 / timeit(f, a, a, repeats=3 if quick else 5) / 1e9)
    return best


def row(work, ours, reference="", ratio="", peak=""):
    return {"work": work, "ours": ours, "reference": reference, "ratio": ratio, "peak": peak}


def pct(gflops: float, peak: float) -> str:
    return f"{gflops:,.0f} GFLOP/s = {100 * gflops / peak:.0f}%"


# --- Talk The Walk -----------------------------------------------------------------------------

def ttw_tables():
    from ttw_jax.talk_the_walk import maps
    maps_dir = os.path.join(SHARED, "ttw", "maps")
    try:
        data, what = maps.load_windows(maps_dir), "the 4 real maps"
    except FileNotFoundError:
        data, what = maps.load_windows(None), "synthetic maps"
    return {s: w.landmarks for s, w in data.items()}, what


def bench_ttw_bound(tables, what) -> list[dict]:
    from ttw_jax.talk_the_walk import maps
    from ttw_jax.talk_the_walk.upper_bound import bayes_rate
    t = time.perf_counter()
    for s in maps.SPLITS:
        bayes_rate(tables[s], 3, condition_on_actions=True)
    secs = time.perf_counter() - t
    ref = ANCHORS["ttw_bound_reference_s"]
    return [row(f"Talk The Walk exact bound, T=3 with actions, {what}, train+valid+test "
                "(compilation included)", f"{secs:.2f} s",
                f"{ref:.0f} s (reference implementation, recorded anchor)", f"{ref / secs:.0f}x")]


def localizer(features: int, table):
    from ttw_jax.talk_the_walk import maps, walks
    from ttw_jax.talk_the_walk.emergent.model import Localizer
    model = Localizer(T=3, features=features, num_landmark_ids=maps.NUM_LANDMARK_IDS)
    ex = walks.sample_batch(jax.random.key(0), jnp.asarray(table), 2, 3)
    params = model.init({"params": jax.random.key(1)}, ex["obs"], ex["actions"],
                        ex["landmarks"])["params"]
    return model, params


def bench_ttw_full_task(tables, peak, quick) -> list[dict]:
    from ttw_jax.talk_the_walk.full_task import full_task_episodes, run_full_task
    model, params = localizer(500, tables["test"])
    lm, tg = full_task_episodes(tables["test"], 1 if quick else 4)
    e, slots = (64, 16) if quick else (len(tg), 32)
    lm, tg = jnp.asarray(lm[:e]), jnp.asarray(tg[:e])
    predict = lambda o, a, l: model.apply({"params": params}, o, a, l)["logits"]
    ex = (jnp.zeros((slots, 4, 3), jnp.int32), jnp.zeros((slots, 3), jnp.int32), lm[:slots])
    flops_per_call = xla_flops(jax.jit(predict), *ex)
    out = {}
    for s in (slots,) if quick else (slots, e):
        run = jax.jit(lambda k, s=s: run_full_task(k, predict, lm, tg, 3, slots=s))
        res = jax.block_until_ready(run(jax.random.key(3)))   # compiles
        t = time.perf_counter()
        jax.block_until_ready(run(jax.random.key(3)))
        out[s] = (time.perf_counter() - t, res)
    secs, res = out[slots]
    live_steps = float(jnp.sum(jnp.minimum(res.steps + 1, 150)))
    useful = flops_per_call / slots * live_steps / secs / 1e9
    official = 1 / ANCHORS["ttw_full_task_official_s"]
    return [
        row(f"Talk The Walk full task, MASC T=3, L=500, {e} episodes (random-init guide, mean "
            f"{live_steps / e:.0f} guide steps per episode), {slots} slots", f"{e / secs:.1f} episodes/s",
            f"{official:.2f} episodes/s (official loop, 0.52 s/episode, recorded anchor)",
            f"{e / secs / official:.1f}x", pct(useful, peak) + " (live steps)"),
    ] + ([] if quick else [
        row("... every episode in its own slot until the last ends (no refill)",
            f"{e / out[e][0]:.1f} episodes/s", "", f"slots {out[e][0] / secs:.1f}x faster")])


def bench_masc_step(tables, peak, quick) -> list[dict]:
    from ttw_jax.core.train import data_parallel as dp
    from ttw_jax.talk_the_walk import walks
    from ttw_jax.talk_the_walk.emergent.losses import localization_loss
    from ttw_jax.talk_the_walk.masc import masked_conv3x3
    b = 32 if quick else 128
    model, params = localizer(500, tables["train"])
    batch = walks.sample_batch(jax.random.key(0), jnp.asarray(tables["train"]), b, 3)
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))
    mesh = dp.make_mesh(jax.devices()[:1])
    step = dp.make_train_step(localization_loss(model.apply, False), mesh, donate=False)
    state = dp.replicate(state, mesh)
    batch = jax.device_put(batch, dp.batch_sharded(mesh))
    key = jax.random.key(2)
    flops = xla_flops(step, state, batch, key)
    secs = timeit(lambda s: step(s, batch, key)[1], state, repeats=2 if quick else 5)
    # The MASC convolution alone, forward + backward: one im2col GEMM vs a vmapped conv.
    n, bb = 500, 8 if quick else 16
    u = jax.random.normal(jax.random.key(0), (bb, 4, 4, n))
    masks = jax.nn.softmax(jax.random.normal(jax.random.key(1), (3, bb, 9)))
    kernel = jax.random.normal(jax.random.key(2), (9, n, n)) / np.sqrt(n)

    def gemm(kernel, u):
        for i in range(3):
            u = masked_conv3x3(u, masks[i], kernel)
        return jnp.sum(u ** 2)

    def per_example(kernel, u):
        def conv1(x, m):
            k = (m[:, None, None] * kernel).reshape(3, 3, n, n)
            return jax.lax.conv_general_dilated(x[None], k, (1, 1), "SAME",
                                                dimension_numbers=("NHWC", "HWIO", "NHWC"))[0]
        for i in range(3):
            u = jax.vmap(conv1)(u, masks[i])
        return jnp.sum(u ** 2)

    ours = timeit(jax.jit(jax.grad(gemm)), kernel, u, repeats=2)
    ref = timeit(jax.jit(jax.grad(per_example)), kernel, u, repeats=1)
    return [row(f"MASC train step, T=3, L=500, batch {b}", f"{secs * 1e3:,.0f} ms/step", "", "",
                pct(flops / secs / 1e9, peak)),
            row(f"MASC convolution forward+backward, batch {bb}: one im2col GEMM",
                f"{ours * 1e3:,.1f} ms", f"{ref * 1e3:,.0f} ms (vmapped per-example conv, same run)",
                f"{ref / ours:.0f}x")]


# --- Touchdown SDR -----------------------------------------------------------------------------

def sdr_step(name: str, shape, batch: int, **model_kw):
    """(jitted train step, state, batch, key) of SDR model `name` on random [batch, *shape]."""
    from ttw_jax.core.train import data_parallel as dp
    from ttw_jax.touchdown.sdr.losses import make_loss
    from ttw_jax.touchdown.sdr.models import build_sdr_model
    h, w, c = shape
    vocab = model_kw.pop("vocab_size", 4000)
    model = build_sdr_model(name, vocab, **model_kw)
    rng = np.random.default_rng(0)
    data = {"features": rng.normal(size=(batch, h, w, c)).astype(np.float16),
            "center": rng.uniform(size=(batch, 2)).astype(np.float32),
            "tokens": rng.integers(1, vocab, (batch, 40)).astype(np.int32),
            "token_len": np.full((batch,), 40, np.int32)}
    params = jax.jit(model.init)(jax.random.key(0), data["tokens"][:1], data["token_len"][:1],
                                 data["features"][:1].astype(np.float32))
    mesh = dp.make_mesh(jax.devices()[:1])
    state = dp.replicate(train_state.TrainState.create(apply_fn=model.apply, params=params,
                                                       tx=optax.adam(5e-4)), mesh)
    step = dp.make_train_step(make_loss(model, sigma=3.0), mesh, donate=False)
    return step, state, dp.shard_global(data, dp.batch_sharded(mesh)), jax.random.key(1)


class _XlaConvs:
    """Within the block, the SDR models use XLA's convolutions (their formulation before this
    project's `same_conv`): for the FLOP count (XLA counts a scan body once) and comparisons."""

    def __enter__(self):
        from ttw_jax.touchdown.sdr import models
        self.models, self.saved = models, (models.fast_conv, models.per_example_conv)
        models.fast_conv = jax.lax.conv_general_dilated
        models.per_example_conv = lambda x, k: jax.vmap(lambda a, b: jax.lax.conv_general_dilated(
            a[None], b, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))[0])(x, k)
        return self

    def __exit__(self, *exc):
        self.models.fast_conv, self.models.per_example_conv = self.saved


PAPER = dict(levels=2, channels=128, stride=1, mlp_hidden=128, embed_dim=300, hidden=300,
             dropout=0.5)


def bench_lingunet(peak, quick) -> list[dict]:
    shape, b = ((100, 116, 128), 2) if quick else ((100, 464, 128), 10)
    step, state, batch, key = sdr_step("lingunet", shape, b, **PAPER)
    with _XlaConvs():
        xla_step, *_ = sdr_step("lingunet", shape, b, **PAPER)
        flops = xla_flops(xla_step, state, batch, key)
    secs = timeit(lambda s: step(s, batch, key)[1], state, repeats=1 if quick else 2)
    work = f"LingUNet train step, [{b}, {', '.join(map(str, shape))}], m=2, 128 channels"
    rows = []
    if quick:
        rows.append(row(work + " (quick: a quarter of the paper's width)", f"{secs:.2f} s/step",
                        "", "", pct(flops / secs / 1e9, peak)))
    else:
        ref = ANCHORS["lingunet_official_s"]
        rows.append(row(work + " (the paper's shape and batch)", f"{secs:.1f} s/step",
                        f"{ref:.0f} s/step (official PyTorch LingUNet, recorded anchor)",
                        f"{ref / secs:.2f}x", pct(flops / secs / 1e9, peak)))
        xla_secs = timeit(lambda s: xla_step(s, batch, key)[1], state, repeats=1)
        rows.append(row("... with XLA's convolutions (before)", f"{xla_secs:.1f} s/step", "",
                        f"ours {xla_secs / secs:.2f}x faster", pct(flops / xla_secs / 1e9, peak)))
    return rows


def bench_text2conv(quick) -> list[dict]:
    """Both at the synthetic SDR shape and the CPU default config's sizes."""
    shape, b = (25, 116, 12), 16
    sizes = dict(levels=2, mlp_hidden=16, embed_dim=64, hidden=64, dropout=0.5, vocab_size=200)
    times = {}
    for name, channels in (("lingunet", 16), ("text2conv", 32)):
        step, state, batch, key = sdr_step(name, shape, b, channels=channels, **sizes)
        times[name] = timeit(lambda s: step(s, batch, key)[1], state, repeats=3 if quick else 10)
    work = f"Text2Conv train step, [{b}, {', '.join(map(str, shape))}] (synthetic SDR, default config)"
    rows = [row(work, f"{times['text2conv'] * 1e3:,.1f} ms/step",
                f"LingUNet {times['lingunet'] * 1e3:,.1f} ms/step (same run, same shape)",
                f"{times['text2conv'] / times['lingunet']:.2f}x LingUNet's time")]
    if not quick:
        with _XlaConvs():
            step, state, batch, key = sdr_step("text2conv", shape, b, channels=32, **sizes)
            before = timeit(lambda s: step(s, batch, key)[1], state, repeats=3)
        rows.append(row("... Text2Conv with a vmapped per-example conv (before)",
                        f"{before * 1e3:,.0f} ms/step", "",
                        f"{before / times['lingunet']:.1f}x LingUNet's time"))
    return rows


# --- Simulators and RCM rollouts (their own scripts) -------------------------------------------

def script(module: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True,
                         text=True, check=False)
    print(out.stdout, out.stderr[-2000:] if out.returncode else "", sep="\n", flush=True)
    if out.returncode:
        raise RuntimeError(f"{module} failed ({out.returncode})")
    return out.stdout


def num(s: str) -> float:
    return float(s.replace(",", ""))


def bench_touchdown_env(quick) -> list[dict]:
    out = script("experiments.benchmarks.touchdown_env_bench", "--batch_sizes=1024",
                 f"--repeats={2 if quick else 5}", f"--python_seconds={1 if quick else 3}")
    m = re.search(r"^\s*1024\s+([\d,]+)\s+([\d,]+)", out, re.M)
    fast, slow = num(m[1]), num(m[2])
    return [row("Touchdown simulator, random policy, batch 1,024 (real graph)", f"{fast:,.0f} steps/s",
                f"{slow:,.0f} steps/s (Python reference loop, same run)", f"{fast / slow:.0f}x")]


def bench_arramon_env(quick) -> list[dict]:
    out = script("experiments.benchmarks.arramon_env_bench", "--batch_sizes=1024",
                 f"--repeats={2 if quick else 5}")
    m = re.search(r"^\| navigation \| 1,024 \| [^|]+\| ([\d,]+) \| ([\d,]+)", out, re.M)
    fast, slow = num(m[1]), num(m[2])
    return [row("ArraMon navigation simulator, random actions, batch 1,024", f"{fast:,.0f} steps/s",
                f"{slow:,.0f} steps/s (Python reference loop, same run)", f"{fast / slow:.0f}x")]


def bench_rcm(peak, quick) -> list[dict]:
    out = script("experiments.benchmarks.rxr_rollout_bench", "--batch_sizes=1024",
                 f"--repeats={1 if quick else 3}", f"--horizon={10 if quick else 20}")
    scan = re.search(r"^\s*1024\s+scan\s+([\d,]+)", out, re.M)
    loop = re.search(r"^\s*1024\s+loop\s+([\d,]+)", out, re.M)
    flops = re.search(r"XLA cost analysis: ([\d.]+) GFLOP per step", out)
    fast, slow, gflop = num(scan[1]), num(loop[1]), float(flops[1])
    return [row("RCM policy rollouts in one scan, batch 1,024, default agent (90 real graphs), "
                f"{gflop:.2f} GFLOP per batch step (XLA)", f"{fast:,.0f} steps/s",
                f"{slow:,.0f} steps/s (Python loop of jitted steps, same run)", f"{fast / slow:.2f}x",
                pct(gflop * fast / 1024, peak))]


def to_markdown(rows: list[dict], header: str) -> str:
    lines = [header, "", "| work | this project | compared with | ratio | fraction of peak |",
             "| --- | --- | --- | --- | --- |"]
    lines += [f"| {r['work']} | {r['ours']} | {r['reference']} | {r['ratio']} | {r['peak']} |"
              for r in rows]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, under 3 minutes")
    p.add_argument("--out", default="", help="also write the Markdown table here")
    p.add_argument("--only", default="", help="comma-separated subset of: " + ",".join(BENCHES))
    args = p.parse_args(argv)
    # Every figure includes or excludes compilation as stated, never a persistent-cache hit.
    cache = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        run(args)
    finally:
        jax.config.update("jax_enable_compilation_cache", cache)


def run(args) -> None:
    t0 = time.perf_counter()
    chosen = [b for b in args.only.split(",") if b] or list(BENCHES)
    if unknown := sorted(set(chosen) - set(BENCHES)):
        raise SystemExit(f"--only: unknown benchmarks {unknown}; choose from {', '.join(BENCHES)}")
    # The bound first: its figure includes compiling, so nothing may have compiled it before.
    tables, what = ttw_tables()
    peak = matmul_peak(args.quick)
    rows = [row("f32 matmul peak of this machine (square, 1,024-3,072, best)", f"{peak:,.0f} GFLOP/s")]
    for name in chosen:
        t = time.perf_counter()
        rows += BENCHES[name](tables=tables, what=what, peak=peak, quick=args.quick)
        print(f"[{name}: {time.perf_counter() - t:.0f} s]", flush=True)
    header = (f"{'Quick run' if args.quick else 'Run'} of `python -m experiments.benchmarks.run_all"
              f"{' --quick' if args.quick else ''}`: {jax.devices()[0].device_kind}, "
              f"{os.cpu_count()} CPU cores, jax {jax.__version__}, {time.perf_counter() - t0:.0f} s in all.")
    table = to_markdown(rows, header)
    print(table)
    if args.out:
        from ttw_jax.core import paths
        paths.write_text(args.out, table)


BENCHES = {
    "ttw_bound": lambda tables, what, **_: bench_ttw_bound(tables, what),
    "ttw_full_task": lambda tables, peak, quick, **_: bench_ttw_full_task(tables, peak, quick),
    "masc": lambda tables, peak, quick, **_: bench_masc_step(tables, peak, quick),
    "lingunet": lambda peak, quick, **_: bench_lingunet(peak, quick),
    "text2conv": lambda quick, **_: bench_text2conv(quick),
    "rcm": lambda peak, quick, **_: bench_rcm(peak, quick),
    "touchdown_env": lambda quick, **_: bench_touchdown_env(quick),
    "arramon_env": lambda quick, **_: bench_arramon_env(quick),
}

if __name__ == "__main__":
    main()
