r"""RCM policy rollouts on the real Matterport graphs: one `lax.scan` call against a Python loop.

  python -m experiments.benchmarks.rxr_rollout_bench \
      [--connectivity_dir=../shared/data/matterport/connectivity] [--batch_sizes=64,1024]

All scans' connectivity graphs (one `PanoGraph`), a default-size `RCMAgent` (embed 128, hidden 256,
random-init parameters), synthetic [N, 36, 32] view features and random instructions of 48 tokens
(vocabulary 1,000), encoded once outside the timed region. The agent acts greedily for `horizon`
steps from random viewpoints and headings. For each batch size, in the same run:

- scan: `ttw_jax.core.env.rollout` of the Matterport `step` with `rcm_policy`, the whole episode
  one jitted call;
- loop: the same policy + `step` jitted as one time step, called from a Python `for` loop (one
  jitted call for the initial carry and keys, `horizon` step calls, one `jnp.stack` of the actions;
  nothing is synchronised before the end);
- loop+donate: the loop with the carry and state buffers donated to each step call.

steps/s = batch * horizon / wall seconds (median of `--repeats` timed runs after a compile run;
batches below 256 get up to 10x more runs); the variants take turns within every repeat.
ratio = scan steps/s over loop steps/s; overhead/step = (loop - scan wall time) / horizon;
faults/step = minor page faults of the process per step (median run). Every variant's action
sequence [horizon, B] and final viewpoints are asserted identical to the scan's. The last line of
a batch: one step call on its own (blocked), its faults and the step program's temporary buffer,
and a jitted identity taking the step's arguments (the bare per-call cost).

Measured (2 CPU cores shared with other jobs, load average ~4.5; jax 0.10.2 CPU; all 90 scans,
10,567 viewpoints, K = 13; horizon 20; whole run 72 s):

   batch      variant    steps/s  ms/step   ratio  overhead/step  faults/step
      64         scan     11,961     5.35                                   0
      64         loop     11,009     5.81   1.09x         463 us            0
      64  loop+donate     11,019     5.81   1.09x         458 us            0
        actions identical (20 x 64; 130 non-STOP)
        one step call, blocked: 6.31 ms, 0 faults (step temp buffer 6.9 MiB = 1,761 pages);
        bare jitted call with the step's arguments, blocked: 361 us
    1024         scan     12,419    82.46                               1,075
    1024         loop      9,035   113.33   1.37x      30,877 us       20,500
    1024  loop+donate      8,753   116.99   1.42x      34,534 us       20,734
        actions identical (20 x 1024; 1942 non-STOP)
        one step call, blocked: 113.43 ms, 20,476 faults (step temp buffer 80.0 MiB = 20,475
        pages); bare jitted call with the step's arguments, blocked: 761 us
  (--batch_sizes=1, a separate run:)
       1         scan      5,718     0.17                                   0
       1         loop      1,768     0.57   3.23x         391 us            0
       1  loop+donate      1,774     0.56   3.22x         389 us            0

The issue's >= 10x at batch 1,024 is not reached on this CPU, and cannot be: the ratio is
(compute + overhead) / compute per step, and at batch 1,024 one step is ~3.4 GFLOP of dense work
(view projection 36,864 x 36 x 256, LSTM 1,024 x 768 x 1,024, mix / query / candidate layers),
~80 ms on two cores, against well under 1 ms of per-call dispatch. What the loop does lose there
(~31-35 ms a step) is not dispatch but memory: XLA:CPU maps a fresh temporary buffer for every
execution of a program (80 MiB for the step at batch 1,024: 20,475 pages, each first touch a
page fault, unmapped again at the end), while the scan maps its buffer once per episode and
reuses it in every iteration (~1,075 faults a step). Touching a freshly `mmap`ed 80 MiB buffer
costs ~35 ms more than reusing one on this machine (numpy check: 51-56 ms against 17 ms), the
measured gap. Donation does not help: it aliases the step's arguments to its outputs (carry and
state, ~3 MB), not the temporaries, and the numbers with and without it are within noise. At
batch 64 the temporaries are small (reused by malloc, no faults) and the loop's ~0.4 ms a step
is the Python dispatch of a jitted call with 50 argument leaves on a loaded 2-core machine,
against ~5 ms of compute: 1.1x. Only when compute shrinks below the dispatch cost does the scan
pull clearly ahead (batch 1: 0.17 ms of compute, 3.2x); 10x would need a step that computes in
~1/9 of the dispatch time, e.g. small batches on an accelerator.
"""
from __future__ import annotations

import argparse
import math
import os
import resource
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from experiments.benchmarks.flops import program_flops
from ttw_jax.core.env import batched, rollout
from ttw_jax.rxr import env as mp, views
from ttw_jax.rxr.graph import list_scans, load_matterport_graph
from ttw_jax.rxr.rcm import RCMAgent, rcm_policy

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--connectivity_dir",
                   default=os.path.join(REPO, "..", "shared", "data", "matterport", "connectivity"),
                   help="Directory of <scan>_connectivity.json files.")
    p.add_argument("--num_scans", type=int, default=0, help="First N scans (0: all).")
    p.add_argument("--batch_sizes", default="64,1024", help="Comma-separated batch sizes.")
    p.add_argument("--horizon", type=int, default=20, help="Steps per rollout.")
    p.add_argument("--repeats", type=int, default=5,
                   help="Timed runs per variant (median); batches below 256 get up to 10x more.")
    p.add_argument("--feature_dim", type=int, default=32)
    p.add_argument("--vocab_size", type=int, default=1000)
    p.add_argument("--num_tokens", type=int, default=48)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def make_functions(model: RCMAgent, horizon: int):
    """(scan rollout, loop init, loop step, donating loop step, identity) jitted functions.
    consts = (params, graph, view features, ctx, ctx mask), passed as arguments (not closed
    over) so that neither variant bakes the 48 MB feature table into its program."""
    def policy_of(consts):
        params, graph, feats, ctx, mask = consts
        return rcm_policy(model, params, graph, feats, ctx, mask, "greedy")

    @jax.jit
    def scan_run(consts, state, rng):
        policy, carry = policy_of(consts)
        final, _, traj = rollout(mp.step, consts[1], state, policy, carry, rng, horizon)
        return final.node, traj.action

    @jax.jit
    def loop_init(consts, rng):
        # The scan draws its per-step keys the same way (`rollout` splits rng into horizon).
        return policy_of(consts)[1], jax.random.split(rng, horizon)

    def step(consts, carry, state, t, keys):
        policy, _ = policy_of(consts)
        carry, action, _ = policy(carry, state, t, keys[t])
        return carry, batched(mp.step)(consts[1], state, action), action

    identity = jax.jit(lambda consts, carry, state, t, keys: (carry, state, t))
    return (scan_run, loop_init, jax.jit(step), jax.jit(step, donate_argnums=(1, 2)), identity)


def run_loop(init, step, consts, state, rng, horizon: int):
    carry, keys = init(consts, rng)
    actions = []
    for t in range(horizon):
        carry, state, action = step(consts, carry, state, t, keys)
        actions.append(action)
    return state.node, jnp.stack(actions)


def interleaved(fns: dict, repeats: int) -> tuple[dict, dict, dict]:
    """({name: median seconds}, {name: median minor page faults}, {name: result of the compile
    run}) of each `fn()` (blocking on the result). The variants take turns within every repeat,
    so that a change in the load of a shared machine hits them alike."""
    outs = {name: jax.block_until_ready(fn()) for name, fn in fns.items()}
    times, faults = {name: [] for name in fns}, {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            jax.block_until_ready(fn())
            times[name].append(time.perf_counter() - t0)
            faults[name].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    med = lambda d: {name: statistics.median(v) for name, v in d.items()}   # noqa: E731
    return med(times), med(faults), outs


def main(argv=None) -> None:
    args = parse_args(argv)
    t0 = time.perf_counter()
    scans = None
    if args.num_scans:
        scans = list_scans(args.connectivity_dir)[:args.num_scans]
    host_graph, nodes, scan_of = load_matterport_graph(args.connectivity_dir, scans)
    landmarks = np.random.default_rng(args.seed).integers(0, 16, host_graph.num_nodes)
    feats = views.synthetic_view_features(host_graph, landmarks, 16, args.feature_dim, 0.1,
                                          seed=args.seed)
    graph = jax.tree.map(jnp.asarray, host_graph)
    feats = jnp.asarray(feats)
    load_s = time.perf_counter() - t0

    model = RCMAgent(args.vocab_size)            # embed 128, hidden 256, 2 conv layers
    k = host_graph.max_degree
    # Initialised on a real observation of two episodes, so the input widths always match
    # `observe` (view features + angle encodings; candidates also carry structural features).
    obs = jax.vmap(mp.observe, in_axes=(None, 0, None))(
        graph, batched(mp.reset)(graph, np.zeros(2, np.int32), np.zeros(2, np.float32)), feats)
    params = model.init(jax.random.key(args.seed), jnp.ones((2, 4), jnp.int32),
                        jnp.full((2,), 4, jnp.int32), obs["views"], obs["cands"],
                        obs["cand_mask"])
    encode = jax.jit(lambda p, tok, n: model.apply(p, tok, n, method=RCMAgent.encode))
    fns = make_functions(model, args.horizon)
    scan_run, loop_init, loop_step, donate_step, identity = fns

    h = args.horizon
    print(f"graph: {int(scan_of.max()) + 1} scans, {host_graph.num_nodes} viewpoints, K = {k} "
          f"(loaded in {load_s:.1f} s); device {jax.devices()[0].device_kind} "
          f"x{jax.device_count()}; RCM embed {model.embed_dim}, hidden {model.hidden}; "
          f"views 36 x {args.feature_dim}; {args.num_tokens} tokens; horizon {h}")
    print(f"{'batch':>6s} {'variant':>12s} {'steps/s':>10s} {'ms/step':>8s} {'ratio':>7s} "
          f"{'overhead/step':>14s} {'faults/step':>12s}")
    rng = np.random.default_rng(args.seed)
    for batch in [int(b) for b in args.batch_sizes.split(",")]:
        tokens = jnp.asarray(rng.integers(1, args.vocab_size, (batch, args.num_tokens)), jnp.int32)
        ctx, mask = encode(params, tokens, jnp.full((batch,), args.num_tokens, jnp.int32))
        consts = (params, graph, feats, ctx, mask)
        state = batched(mp.reset)(graph, rng.integers(0, host_graph.num_nodes, batch),
                                  rng.uniform(0, 2 * math.pi, batch))
        key = jax.random.key(batch)

        def loop(step, copy=False):
            # Donation consumes the state passed in: those runs start from a fresh copy.
            start = jax.tree.map(jnp.copy, state) if copy else state
            return run_loop(loop_init, step, consts, start, key, h)

        carry, keys = loop_init(consts, key)
        secs, faults, outs = interleaved({
            "scan": lambda: scan_run(consts, state, key),
            "loop": lambda: loop(loop_step),
            "loop+donate": lambda: loop(donate_step, copy=True),
            "1 step": lambda: loop_step(consts, carry, state, 0, keys),
            "bare call": lambda: identity(consts, carry, state, 0, keys),
        }, args.repeats * min(10, max(1, 256 // batch)))
        scan_node, scan_actions = outs["scan"]
        for name in ("loop", "loop+donate"):
            np.testing.assert_array_equal(np.asarray(outs[name][1]), np.asarray(scan_actions),
                                          err_msg=f"{name}: actions differ from the scan's")
            np.testing.assert_array_equal(np.asarray(outs[name][0]), np.asarray(scan_node))
        scan_s = secs["scan"]
        for name in ("scan", "loop", "loop+donate"):
            sec = secs[name]
            ratio = f"{sec / scan_s:6.2f}x" if name != "scan" else ""
            over = f"{(sec - scan_s) / h * 1e6:11,.0f} us" if name != "scan" else ""
            print(f"{batch:6d} {name:>12s} {batch * h / sec:10,.0f} {sec / h * 1e3:8.2f} "
                  f"{ratio:>7s} {over:>14s} {faults[name] / h:12,.0f}")
        moves = int((np.asarray(scan_actions) != mp.STOP).sum())
        print(f"{'':6s} actions identical ({scan_actions.shape[0]} x {scan_actions.shape[1]}; "
              f"{moves} non-STOP)")
        compiled = loop_step.lower(consts, carry, state, 0, keys).compile()
        temp = compiled.memory_analysis()
        # the traced count of one step (the same on every backend; the chunked attention's
        # while loop counted once per trip would need its trip count: the unchunked step)
        flops = program_flops(make_functions(model.clone(chunk=0), h)[2], consts, carry, state,
                              0, keys)
        print(f"{'':6s} one step (policy + simulator), traced count: "
              f"{flops / 1e9:.3f} GFLOP per step")
        print(f"{'':6s} one step call, blocked: {secs['1 step'] * 1e3:.2f} ms, "
              f"{faults['1 step']:,.0f} faults (step temp buffer "
              f"{temp.temp_size_in_bytes / 2**20:.1f} MiB = {temp.temp_size_in_bytes / 4096:,.0f} "
              f"pages); bare jitted call with the step's arguments, blocked: "
              f"{secs['bare call'] * 1e6:,.0f} us")

if __name__ == "__main__":
    main()
