"""Several seeds of one config: on a leading array axis in one program, or one after another.

`config.num_seeds = N` (> 1) trains seeds `config.seed, ..., config.seed + N - 1`. A trainer on
the seed axis (`Run.start(..., parallel_seeds=True)`) stacks the N parameter, optimizer-state and
random-key trees on a leading axis and `vmap`s its train step over them, so the N seeds are one
program compiled once (`dp.make_train_step(seed_axes=...)`, `run.SeedStepFn`, `fit_seeds`).
Each seed draws the batches a separate run with its seed would (its own
`fold_in(key(seed), STEPS)` stream), is evaluated by its own dev evaluation, keeps its own best parameters and stops early
on its own (a stopped seed's best parameters are kept while the others train), and writes its
results into `<workdir>/s<seed>/` as a separate run would; `<workdir>/sweep.{md,json}` holds the
table of mean +- std (`write_sweep`). On a multi-device mesh the seeds and the data are two
axes (`dp.seed_mesh`: gcd(N, devices) groups, each training its seeds data-parallel over its
devices; one seed per group of a pod's chips). A trainer whose step is not one program over
seeds runs them one after another in the same layout (`sequential_seeds`, `run_seeds`), and so
does one on the axis whose seeds cannot share a program for this config (`SeedsApart`: their
parameter shapes differ, or N copies of the step do not fit in a device's memory,
`check_fits`).

Layout of a parallel run:

  <workdir>/config.json            the config (num_seeds = N)
  <workdir>/checkpoints/           one checkpoint of the stacked trees per evaluation
  <workdir>/s<seed>/               config.json (seed, num_seeds = 1), metrics, results.json, ...
  <workdir>/sweep.md, sweep.json   mean +- std over the seeds
"""
from __future__ import annotations

import functools
import json
import time
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from ttw_jax.core import paths
from ttw_jax.core.progress import progress as progress_report
from ttw_jax.core.train import provenance
from ttw_jax.core.train.checkpoint import Checkpointer
from ttw_jax.core.train.loop import (Preempted, Profiler, _any_process, nonfinite_message,
                                     sigterm_flag, stop_if_preparing, train_step)
from ttw_jax.core.train.workdir import profile_window, write_json

NOT_METRICS = ("config", "schema_version", "provenance")


def num_seeds(config: ml_collections.ConfigDict) -> int:
    """`config.num_seeds` (1 when the config has no such key); ValueError below 1."""
    n = config.get("num_seeds", 1)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"num_seeds must be an integer >= 1, got {n!r}")
    return n


def seed_config(config: ml_collections.ConfigDict, seed: int) -> ml_collections.ConfigDict:
    """The config of one seed's separate run: `seed`, and `num_seeds` 1 where the key exists."""
    c = ml_collections.ConfigDict(config.to_dict())
    c.seed = seed
    if "num_seeds" in c:
        c.num_seeds = 1
    return c


def stack(trees: Sequence[Any]):
    """One tree whose leaves stack the `trees`' leaves on a new leading (seed) axis."""
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *trees)


def take(tree, i: int):
    """Seed `i`'s slice of a stacked tree."""
    return jax.tree_util.tree_map(lambda x: x[i], tree)


def put(tree, i: int, value):
    """A copy of the stacked `tree` whose seed `i` is `value`."""
    return jax.tree_util.tree_map(lambda t, v: t.at[i].set(v), tree, value)


def fit_seeds(state: Any, *, config: ml_collections.ConfigDict, workdir, seed_workdirs: Sequence,
              writers: Sequence, place: Callable, step_fn: Callable,
              evaluates: Sequence[Callable[[Any], dict]], metric: str, mode: str = "max",
              eval_prefix: str = "valid", hooks: Sequence[Callable[[int], None]] = (),
              data: Sequence | None = None):
    """`ttw_jax.core.train.loop.fit` for N seeds stacked on the leading axis of `state`.

    Every step trains all seeds in one program; every `config.eval_every` steps each seed still
    training is evaluated by its own `evaluates[i](params_i)`, keeps its best parameters (a slot
    of the stacked `best_params`) and stops after `config.patience` evaluations without
    improvement, as its separate run would: its metrics (`writers[i]`, in `seed_workdirs[i]`)
    end there and its `last_step` is that step; the run ends when every seed has stopped or at
    `config.num_steps`. One checkpoint of the stacked trees and every seed's bookkeeping is
    written per evaluation into `<workdir>/checkpoints` (a killed run resumes exactly); a
    non-finite loss of a training seed stops the run naming the seed and its batch. `data`: one
    streaming sampler per seed whose state the checkpoints keep.

    Returns (state, best_params, metas), metas[i] as `fit`'s meta of seed i.
    """
    if mode not in ("max", "min"):
        raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
    stop_if_preparing(workdir)
    n = len(evaluates)
    sign = 1.0 if mode == "max" else -1.0
    ckpt = Checkpointer(paths.resolve(workdir) / "checkpoints", config.max_checkpoints)
    best_params = state.params
    meta = {"step": 0, "seeds": [{"step": 0, "best": None, "best_step": 0, "bad_evals": 0,
                                  "stopped": False} for _ in range(n)]}
    restored = ckpt.restore_latest({"state": state, "best_params": best_params})
    if restored is not None:
        (trees, meta) = restored
        state, best_params = trees["state"], trees["best_params"]
        for d, s in zip(data or (), meta.get("data_state") or ()):
            d.set_state(s)
        logging.info("Resumed %d seeds from step %d of %s", n, meta["step"], workdir)
    for w in writers:
        w.truncate_after(meta["step"])
    state, best_params = place((state, best_params))
    metas = meta["seeds"]
    progress = None
    if jax.process_index() == 0:
        progress = progress_report(total=config.num_steps, initial=meta["step"],
                                   desc=f"train {n} seeds", leave=False)
    profiler = Profiler(profile_window(config.get("profile_steps", "")), workdir)

    def save(step):
        meta["step"] = step
        if data:
            meta["data_state"] = [d.get_state() for d in data]
        ckpt.save(step, {"state": state, "best_params": best_params}, meta)

    def close():
        if progress is not None:
            progress.close()
        ckpt.close()

    pending, t0 = [], time.time()
    step = meta["step"]
    first = step + 1
    with sigterm_flag() as preempt:
        try:
            while step < config.num_steps and not all(m["stopped"] for m in metas):
                step += 1
                state, metrics = train_step(step_fn, state, step, step == first, profiler,
                                            hooks, close, meta["step"], workdir, None)
                pending.append(metrics)
                evaluate_now = step % config.eval_every == 0 or step == config.num_steps
                if step % config.log_every and not evaluate_now:
                    continue
                host = jax.device_get(pending)
                seconds = max(time.time() - t0, 1e-9)
                wait = step_fn.data_wait()
                pending, t0 = [], time.time()
                training = [i for i in range(n) if not metas[i]["stopped"]]
                for i in training:
                    losses = [float(m["loss"][i]) for m in host]
                    bad = [j for j, v in enumerate(losses) if not np.isfinite(v)]
                    if bad:
                        close()
                        raise FloatingPointError(
                            f"seed {i} of {n}: " + nonfinite_message(
                                losses[bad[0]], step - len(host) + 1 + bad[0], meta["step"],
                                seed_workdirs[i], step_fn.for_seed(i)))
                for i in training:
                    scalars = {f"train/{k}": float(np.mean([m[k][i] for m in host]))
                               for k in host[0]}
                    scalars["train/steps_per_second"] = len(host) / seconds
                    scalars["train/data_wait_ms"] = 1e3 * wait / len(host)
                    if evaluate_now:
                        m = metas[i]
                        params = take(state.params, i)
                        result = evaluates[i](params)
                        scalars.update({f"{eval_prefix}/{k}": v for k, v in result.items()})
                        if m["best"] is None or sign * result[metric] > sign * m["best"]:
                            m.update(best=result[metric], best_step=step, bad_evals=0,
                                     best_eval={k: float(v) for k, v in result.items()})
                            best_params = put(best_params, i, params)
                        else:
                            m["bad_evals"] += 1
                            m["stopped"] = m["bad_evals"] >= config.patience
                        m["step"] = step
                    writers[i].write(step, scalars)
                if progress is not None:
                    progress.set_postfix(loss=" ".join(f"{float(host[-1]['loss'][i]):.3f}"
                                                       for i in training[:4]))
                    progress.update(len(host))
                preempted = _any_process(preempt.is_set()) and step < config.num_steps
                if evaluate_now or preempted:
                    for w in writers:
                        w.flush()
                    save(step)
                if preempted:
                    close()
                    logging.warning("SIGTERM: checkpointed step %d of %s; rerun the same "
                                    "command to resume", step, workdir)
                    raise Preempted(0)
        finally:
            profiler.close()
    close()
    meta["step"] = step
    for m in metas:
        if not m["stopped"]:
            m["step"] = step
    return state, best_params, metas


# ---- the table over seeds ----

def numbers(tree, prefix: str = "") -> dict[str, float]:
    """{"a/b/c": value} of every number in a results dict (booleans and `NOT_METRICS` skipped)."""
    out = {}
    for k, v in tree.items():
        if k in NOT_METRICS:
            continue
        key = f"{prefix}/{k}" if prefix else str(k)
        if isinstance(v, dict):
            out.update(numbers(v, key))
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and v is not None:
            out[key] = float(v)
    return out


def summarize(results: Sequence[dict]) -> dict[str, tuple[float, float]]:
    """{path: (mean, std over the runs)} of the numbers every run reports."""
    flat = [numbers(r) for r in results]
    common = [k for k in flat[0] if all(k in f for f in flat)]
    return {k: (float(np.mean([f[k] for f in flat])), float(np.std([f[k] for f in flat])))
            for k in common}


def to_markdown(summary: dict[str, tuple[float, float]], title: str) -> str:
    """Rows: each path without its last part (`test/ga`); columns: the last parts (`tc`)."""
    rows: dict[str, dict[str, tuple[float, float]]] = {}
    for path, ms in summary.items():
        row, _, col = path.rpartition("/")
        rows.setdefault(row or "(run)", {})[col] = ms
    cols = []
    for r in rows.values():
        cols += [c for c in r if c not in cols]
    lines = [title, "", "| result | " + " | ".join(cols) + " |", "|" + " --- |" * (len(cols) + 1)]
    for name, r in rows.items():
        cells = [f"{r[c][0]:.4g} +- {r[c][1]:.2g}" if c in r else "" for c in cols]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sweep_provenance(results: Sequence[dict]) -> dict | None:
    """The first run's provenance with `seeds` the number of runs (None when a run was written
    before results carried one)."""
    provs = [r.get("provenance") for r in results]
    if not provs or any(p is None for p in provs):
        return None
    return dict(provs[0], seeds=len(results) * provs[0]["seeds"])


def write_sweep(workdir: paths.PathLike, results: Sequence[dict], seeds: Sequence[int],
                name: str, parallel: bool = False) -> dict:
    """Process 0 writes `<workdir>/sweep.json` (schema version, experiment, seeds, whether they
    trained in one program, summary, provenance) and `sweep.md` (the table under the provenance
    title) and prints the table; returns the summary."""
    workdir = paths.resolve(workdir)
    summary = summarize(results)
    prov = sweep_provenance(results)
    if jax.process_index() == 0:
        workdir.mkdir(parents=True, exist_ok=True)
        write_json(workdir / "sweep.json", {"schema_version": provenance.SCHEMA_VERSION,
                                            "experiment": name, "seeds": list(seeds),
                                            "parallel": parallel, "summary": summary,
                                            "provenance": prov}, indent=2)
        how = "in one program" if parallel else "one after another"
        table = to_markdown(summary, f"{name}, mean +- std over seeds {list(seeds)} ({how})")
        if prov:
            table = provenance.title(prov) + "\n\n" + table
        paths.write_text(workdir / "sweep.md", table + "\n")
        print(table)
    return summary


def train_or_read(train_and_evaluate: Callable[..., dict], config: ml_collections.ConfigDict,
                  rdir) -> dict:
    """The results of `config`'s run in `rdir`: read back if it finished (a finished run of
    another config there is refused), else trained (resuming from its checkpoints). A file of
    an earlier schema is read under the renamed keys (`provenance.read_results`), and a metric
    it selected by an old name (`eval.metric=acc@80`) counts as the new one; a run written
    before configs had `num_seeds` counts as one seed."""
    done = paths.resolve(rdir) / "results.json"
    if not done.exists():
        return train_and_evaluate(config, rdir)
    res = provenance.read_results(done)
    saved = _renamed_metrics(res["config"])
    wanted = json.loads(json.dumps(config.to_dict()))
    if wanted.get("num_seeds") == 1:
        saved.setdefault("num_seeds", 1)
    # Compared as JSON holds it: a tuple of the config (e.g. ArraMon's data.partition) is a
    # list in results.json.
    if saved != wanted:
        raise ValueError(f"{rdir} holds a finished run of another config; choose a new "
                         "--workdir")
    return res


def _renamed_metrics(tree):
    """`tree` (a config dict) with each `...metric` set to a renamed result key set to the new
    one."""
    if not isinstance(tree, dict):
        return tree
    return {k: (provenance.RENAMED_RESULT_KEYS.get(v, v) if k == "metric" and isinstance(v, str)
                else _renamed_metrics(v)) for k, v in tree.items()}


def run_seeds(train_and_evaluate: Callable[..., dict], config: ml_collections.ConfigDict,
              workdir: paths.PathLike, seeds: Sequence[int], name: str) -> dict:
    """Trains (or reads back) one run per seed, one after another, in `<workdir>/s<seed>`, and
    writes the table (`write_sweep`); returns the summary."""
    workdir = paths.resolve(workdir)
    results = [train_or_read(train_and_evaluate, seed_config(config, seed), workdir / f"s{seed}")
               for seed in seeds]
    return write_sweep(workdir, results, seeds, name)


class SeedsApart(Exception):
    """Raised by a trainer on the seed axis, before it trains, when this config's seeds cannot
    share one program (their parameter shapes differ, or N of them do not fit in a device's
    memory); `sequential_seeds` then trains them one after another, logging the reason."""


def device_memory() -> int | None:
    """The bytes a program may use on this process's first device (its allocator's limit), or
    None where the backend does not say (the CPU)."""
    stats = jax.local_devices()[0].memory_stats() or {}
    return stats.get("bytes_limit")


def program_memory(jitted: Callable, *args) -> int | None:
    """The bytes the compiled `jitted(*args)` holds on one device at its peak (arguments,
    outputs, temporaries; XLA's memory analysis), or None where XLA gives none. `args` may be
    arrays or `jax.ShapeDtypeStruct`s."""
    analysis = jitted.lower(*args).compile().memory_analysis()
    if analysis is None:
        return None
    return int(analysis.argument_size_in_bytes + analysis.output_size_in_bytes
               + analysis.temp_size_in_bytes - analysis.alias_size_in_bytes)


def check_fits(jitted: Callable, make_args: Callable[[], tuple], limit: int | None = None,
               share: float = 0.9) -> None:
    """SeedsApart unless the seed-axis program `jitted(*make_args())` fits in `share` of the
    device's memory (`limit`, default `device_memory()`; where neither is known, nothing is
    checked and `make_args` is not called)."""
    limit = device_memory() if limit is None else limit
    if limit is None:
        return
    args = make_args()
    need = program_memory(jitted, *args)
    if need is not None and need > share * limit:
        n = len(jax.tree_util.tree_leaves(args[0])[0])
        raise SeedsApart(f"{n} seeds in one program need {need / 2**30:.2f} GiB on a device "
                         f"with {limit / 2**30:.2f} GiB")


def sequential_seeds(name: str, when: Callable[[ml_collections.ConfigDict], bool] = None):
    """Decorates the `train_and_evaluate(config, workdir, ...)` of a trainer that is not on the
    seed axis (or, with `when`, of the configs `when(config)` picks: e.g. a mode that trains
    nothing): with `config.num_seeds` N > 1 it runs seeds `config.seed .. + N - 1` one after
    another (`run_seeds`, logging why) and returns {"seeds", "summary"}; otherwise the
    trainer itself. A trainer on the seed axis that raises `SeedsApart` falls back to the same."""
    def wrap(train_and_evaluate):
        @functools.wraps(train_and_evaluate)
        def run(config, workdir, *args, **kwargs):
            n = num_seeds(config)
            if n == 1:
                return train_and_evaluate(config, workdir, *args, **kwargs)
            why = "this config's step is not one program over seeds"
            if when is not None and not when(config):    # on the seed axis, unless apart
                try:
                    return train_and_evaluate(config, workdir, *args, **kwargs)
                except SeedsApart as e:
                    why = str(e)
            seeds = list(range(config.seed, config.seed + n))
            logging.warning("%s trains its %d seeds one after another (%s)", name, n, why)
            summary = run_seeds(lambda c, w: train_and_evaluate(c, w, *args, **kwargs), config,
                                workdir, seeds, name)
            return {"seeds": seeds, "summary": summary}
        return run
    return wrap
