"""What every trainer repeats, once: the run directory and its config check, the mesh, the metric
writer, the keys, the `fold_in(step)` step closure, the optimizer, the training loop under the
config's `eval.metric` / `eval.mode`, and `results.json` plus the printed table.

A trainer is then glue: load data, build the model and its loss, call `Run.fit`, evaluate the best
parameters, `Run.finish`::

    run = Run.start(config, workdir, RESUMABLE_CHANGES)
    state = train_state.TrainState.create(apply_fn=model.apply, params=params,
                                          tx=make_optimizer(config.optim, config.num_steps))
    step_fn = run.step_fn(dp.make_train_step(loss_fn, run.mesh), sample)
    state, best_params, meta = run.fit(state, step_fn, evaluate, hooks=hooks)
    return run.finish(results, format_results(results), provenance.provenance(config, data=...))

Key purposes (`Run.key(i)` = `fold_in(key(config.seed), i)`): 0 initialisation, 1 training
steps, 2 evaluation; trainers use larger numbers for anything else.

Seeds on one axis (`config.num_seeds` > 1, `Run.start(..., parallel_seeds=True)`; see
`ttw_jax.core.train.seeds`): the trainer builds each seed's pieces on that seed's own `Run`
(`run.per_seed(fn)` calls `fn(seed_run)` for each and returns the list; for one seed,
`fn(run)`), stacks what trains (`run.stack`), and the same calls run the N seeds as one
program::

    state = run.stack(run.per_seed(lambda r: TrainState.create(
        apply_fn=model.apply, params=init(r.key(INIT)), tx=tx)))
    train_step, consts = run.train_step(loss_fn, graph, run.per_seed(load_features))
    step_fn = run.step_fn(train_step, sample, *consts)
    state, best, meta = run.fit(state, step_fn, run.per_seed(make_evaluate))
    return run.each_seed(report, best, meta, run.per_seed(make_evaluate))

`report(seed_run, best_params, meta, *extra)` evaluates one seed's best parameters and returns
`seed_run.finish(...)`: it writes `<workdir>/s<seed>/results.json` per seed, then the table.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from etils import epath
from jax.sharding import Mesh

from ttw_jax.core import paths
from ttw_jax.core.train import data_parallel as dp, provenance as prov, seeds as seeds_lib
from ttw_jax.core.train.logging import MetricWriter
from ttw_jax.core.train.loop import fit
from ttw_jax.core.train.workdir import check_common, check_workdir_config, write_results

INIT, STEPS, EVAL = 0, 1, 2
SCHEDULES = ("constant", "cosine", "exponential")
MODES = ("max", "min")


def optim_config(learning_rate: float, grad_clip: float = 0.0, schedule: str = "constant",
                 warmup_steps: int = 0, end_fraction: float = 0.0,
                 weight_decay: float = 0.0, decay_rate: float | None = None,
                 decay_steps: int | None = None) -> ml_collections.ConfigDict:
    """The `optim` section of an experiment config (see `make_optimizer`). `decay_rate` and
    `decay_steps` (the exponential schedule's) are keys only when given, so the configs that do
    not decay keep the keys they had."""
    c = dict(learning_rate=learning_rate, grad_clip=grad_clip, schedule=schedule,
             warmup_steps=warmup_steps, end_fraction=end_fraction, weight_decay=weight_decay)
    if decay_rate is not None:
        c["decay_rate"] = decay_rate
    if decay_steps is not None:
        c["decay_steps"] = decay_steps
    return ml_collections.ConfigDict(c)


def check_schedule(schedule: str) -> None:
    """ValueError unless `schedule` is one of `SCHEDULES`."""
    if schedule not in SCHEDULES:
        raise ValueError(f"optim.schedule must be one of {SCHEDULES}, got {schedule!r}")


def learning_rate_schedule(optim: ml_collections.ConfigDict, num_steps: int):
    """`constant`: the peak `learning_rate`; `cosine`: a linear warm-up over `warmup_steps` from 0,
    then a cosine decay to `end_fraction` of the peak at `num_steps`; `exponential`:
    `learning_rate * decay_rate ** (step / decay_steps)`, continuous (tf.keras'
    `ExponentialDecay` default, staircase=False: x0.8 at step 5,000 and smoothly between),
    with `optim.decay_rate` in (0, 1] and `optim.decay_steps` > 0 (keys of the config)."""
    check_schedule(optim.schedule)
    if optim.schedule == "constant":
        return optim.learning_rate
    if optim.schedule == "exponential":
        rate, steps = optim.get("decay_rate"), optim.get("decay_steps")
        if rate is None or steps is None or not 0 < rate <= 1 or steps <= 0:
            raise ValueError("optim.schedule=exponential needs optim.decay_rate in (0, 1] and "
                             f"optim.decay_steps > 0, got decay_rate={rate!r}, "
                             f"decay_steps={steps!r}")
        return optax.exponential_decay(optim.learning_rate, int(steps), rate)
    if optim.schedule == "cosine":
        if optim.warmup_steps == 0:
            return optax.cosine_decay_schedule(optim.learning_rate, num_steps,
                                               alpha=optim.end_fraction)
        return optax.warmup_cosine_decay_schedule(
            0.0, optim.learning_rate, optim.warmup_steps,
            max(num_steps, optim.warmup_steps + 1), end_value=optim.end_fraction * optim.learning_rate)


def make_optimizer(optim: ml_collections.ConfigDict, num_steps: int) -> optax.GradientTransformation:
    """Adam (AdamW when `weight_decay` > 0) under `learning_rate_schedule`, after clipping the
    global gradient norm to `grad_clip` when it is > 0."""
    if optim.learning_rate <= 0:
        raise ValueError(f"optim.learning_rate must be > 0, got {optim.learning_rate}")
    lr = learning_rate_schedule(optim, num_steps)
    adam = (optax.adamw(lr, weight_decay=optim.weight_decay) if optim.weight_decay > 0
            else optax.adam(lr))
    if optim.grad_clip > 0:
        return optax.chain(optax.clip_by_global_norm(optim.grad_clip), adam)
    return adam


def splits(spec: str) -> list[str]:
    """'dev,test' -> ['dev', 'test'] (empty names dropped)."""
    return [s for s in spec.split(",") if s]


def seed_keys(key: jax.Array, seeds: int) -> list[jax.Array]:
    """The keys of `seeds` repeated runs: `key` itself for one, else `fold_in(key, i)`."""
    return [key] if seeds == 1 else [jax.random.fold_in(key, i) for i in range(seeds)]


def mean_over_seeds(runs: Sequence[dict], metrics: Sequence[str]) -> dict:
    """{metric: mean over `runs`} plus {f"{metric}_std": std} when there are several."""
    out = {k: float(np.mean([r[k] for r in runs])) for k in metrics}
    if len(runs) > 1:
        out.update({f"{k}_std": float(np.std([r[k] for r in runs])) for k in metrics})
    return out


def evaluate_best(meta: dict, split: str, dev_split: str, evaluate: Callable[[], dict]) -> dict:
    """The best parameters' metrics on `split`: `fit`'s own evaluation at the best step when `split`
    is the dev split (the same program, parameters and key, hence the same numbers), else
    `evaluate()`."""
    if split == dev_split and meta.get("best_eval") is not None:
        return dict(meta["best_eval"])
    return evaluate()


def check_eval(config: ml_collections.ConfigDict, metrics: Sequence[str]) -> None:
    """Fails before any work when `eval.metric` is not one the trainer reports or `eval.mode` is
    not max/min."""
    if config.eval.metric not in metrics:
        raise ValueError(f"eval.metric must be one of {tuple(metrics)}, got {config.eval.metric!r}")
    if config.eval.mode not in MODES:
        raise ValueError(f"eval.mode must be one of {MODES}, got {config.eval.mode!r}")


class DataWait:
    """The seconds a step function spent getting its batches: `timed(get, *args)` calls
    `get(*args)` and counts its time; calling the object returns the seconds since the last call
    and starts again (`fit` logs them as train/data_wait_ms: a stream's wait for its reader
    threads; for on-device samplers only the dispatch)."""

    def __init__(self):
        self.seconds = 0.0

    def timed(self, get: Callable, *args):
        t = time.perf_counter()
        out = get(*args)
        self.seconds += time.perf_counter() - t
        return out

    def __call__(self) -> float:
        out, self.seconds = self.seconds, 0.0
        return out


@dataclasses.dataclass(frozen=True)
class StepFn:
    """`Run.step_fn`'s result: `__call__(state, step)` runs training step `step`, `examples(step)`
    names its batch's examples (None when the sampler cannot), `data_wait()` the seconds spent
    getting batches (logged by `fit`). `host_order`: the sampler draws its batch from the step
    alone (`sample(step)`, e.g. a host generator seeded by (seed, step)) and the step's key is
    `fold_in(key, step)` itself."""
    train_step: Callable
    sample: Callable[..., Any]
    consts: tuple
    key: jax.Array
    pass_step: bool = False
    data_wait: DataWait = dataclasses.field(default_factory=DataWait)  # fit logs it
    host_order: bool = False

    def _data_key(self, step: int):
        return jax.random.split(jax.random.fold_in(self.key, step))

    def batch(self, step: int):
        """(the batch of training step `step`, the step's own key)."""
        if self.host_order:
            return (self.data_wait.timed(self.sample, step),
                    jax.random.fold_in(self.key, step))
        k_data, k_step = self._data_key(step)
        batch = self.data_wait.timed(self.sample, *((k_data, step) if self.pass_step
                                                    else (k_data,)))
        return batch, k_step

    def __call__(self, state, step):
        batch, k_step = self.batch(step)
        return self.train_step(state, batch, k_step, *self.consts)

    def examples(self, step: int) -> list[str] | None:
        if hasattr(self.sample, "step_examples"):     # dp.StreamSampler
            return self.sample.step_examples(step)
        if self.pass_step or self.host_order or not hasattr(self.sample, "examples"):
            return None
        return self.sample.examples(self._data_key(step)[0])


@dataclasses.dataclass(frozen=True)
class SeedStepFn:
    """`Run.step_fn` of a run on the seed axis: step(state, step) draws each seed's batch as its
    separate run's `StepFn` would (`seeds[i]`: seed i's sampler and key; the same sampler for
    every seed when the data order comes from the key alone), stacks the batches and the step
    keys on the seed axis and runs the vmapped `train_step` once. `for_seed(i)` is seed i's
    `StepFn` (what names its batches); `data_wait()` as `StepFn`'s, over every seed."""
    train_step: Callable
    seeds: tuple[StepFn, ...]
    consts: tuple
    data_wait: DataWait

    def batch(self, step: int):
        """(every seed's batch of training step `step` and its key, stacked on the seed axis)."""
        batches, keys = zip(*(one.batch(step) for one in self.seeds))
        return seeds_lib.stack(batches), jnp.stack(keys)

    def __call__(self, state, step):
        return self.train_step(state, *self.batch(step), *self.consts)

    def for_seed(self, i: int) -> StepFn:
        return self.seeds[i]


@dataclasses.dataclass
class Run:
    """One training run in `workdir`: its config, device mesh, metric writer and base key; with
    `seeds` (num_seeds > 1 on the seed axis) the parent of one `Run` per seed (`seed_runs`)."""
    config: ml_collections.ConfigDict
    workdir: epath.Path
    mesh: Mesh
    writer: MetricWriter
    base_key: jax.Array
    seeds: tuple[int, ...] = ()            # the seeds on the leading axis; () for one run
    seed_runs: tuple["Run", ...] = ()      # one Run per seed, in <workdir>/s<seed>

    @classmethod
    def start(cls, config: ml_collections.ConfigDict, workdir: paths.PathLike,
              resumable: Sequence[str] = (), batch_sizes: Sequence[int] | None = None,
              parallel_seeds: bool = False) -> "Run":
        """Creates `workdir`, records the config there (refusing to resume a run whose config
        differs outside `resumable`), after building the mesh (the first `config.num_devices`
        devices; 0 or absent: all) and checking that every batch size (default:
        `config.batch_size`) splits over it. `workdir` may be any `paths.resolve` path (local,
        `file://`, `gs://`); `Run.workdir` is the resolved `epath.Path`.
        `parallel_seeds`: the trainer runs `config.num_seeds` > 1 on the seed axis (module
        docstring); each seed's `Run` records its own config in `<workdir>/s<seed>`. A trainer
        that does not refuses num_seeds > 1 (`seeds.sequential_seeds` runs them in turn)."""
        if "optim" in config:          # before anything is written
            check_schedule(config.optim.schedule)
        n = seeds_lib.num_seeds(config)
        if n > 1 and not parallel_seeds:
            raise ValueError(f"num_seeds={n}: this trainer is not on the seed axis; "
                             "`seeds.sequential_seeds` runs its seeds one after another")
        check_common(config)           # the sizing keys, then the devices, before any write
        mesh = dp.make_mesh(num_devices=config.get("num_devices", 0))
        for b in (config.batch_size,) if batch_sizes is None else batch_sizes:
            dp.check_batch_size(b, mesh)
        workdir = paths.resolve(workdir)
        check_workdir_config(config, workdir, resumable)
        run = cls(config, workdir, mesh, MetricWriter(workdir), jax.random.key(config.seed))
        if n > 1:
            seeds = tuple(range(config.seed, config.seed + n))
            runs = []
            for seed in seeds:
                c, w = seeds_lib.seed_config(config, seed), workdir / f"s{seed}"
                check_workdir_config(c, w, resumable)
                runs.append(cls(c, w, mesh, MetricWriter(w), jax.random.key(seed)))
            run = dataclasses.replace(run, seeds=seeds, seed_runs=tuple(runs))
        return run

    def key(self, purpose: int) -> jax.Array:
        return jax.random.fold_in(self.base_key, purpose)

    def replicate(self, tree):
        return dp.replicate(tree, self.mesh)

    def per_seed(self, fn: Callable[..., Any], *per_seed):
        """[fn(seed_run, *its elements of the `per_seed` lists) for each seed] on the seed axis;
        fn(self, *per_seed) for one run."""
        if not self.seeds:
            return fn(self, *per_seed)
        return [fn(r, *(a[i] for a in per_seed)) for i, r in enumerate(self.seed_runs)]

    def stack(self, trees):
        """`per_seed`'s list of trees stacked on a leading seed axis; one run's tree as it is."""
        return seeds_lib.stack(trees) if self.seeds else trees

    def shared(self, per_seed, what: str):
        """The value every seed has: `per_seed` is a `per_seed` list of hashable values (one
        run's value as it is); `seeds.SeedsApart` naming `what` and the values when they
        differ (the seeds then train in turn)."""
        if not self.seeds:
            return per_seed
        if len(set(per_seed)) > 1:
            raise seeds_lib.SeedsApart(f"{what} differ over the seeds: {list(per_seed)}")
        return per_seed[0]

    def train_step(self, loss_fn: Callable, *consts, learning_rate=None, donate: bool = True):
        """(`dp.make_train_step(loss_fn, ...)`, consts): on the seed axis the step is vmapped
        over the seeds, and each const given as a `per_seed` list is stacked and mapped (the
        others are shared)."""
        if not self.seeds:
            return dp.make_train_step(loss_fn, self.mesh, donate, len(consts),
                                      learning_rate), consts
        axes = tuple(0 if isinstance(c, list) else None for c in consts)
        consts = tuple(seeds_lib.stack(c) if isinstance(c, list) else c for c in consts)
        return dp.make_train_step(loss_fn, self.mesh, donate, len(consts), learning_rate,
                                  seed_axes=axes, num_seeds=len(self.seeds)), consts

    def step_fn(self, train_step: Callable, sample: Callable[..., Any], *consts,
                key: jax.Array | None = None, pass_step: bool = False,
                host_order: bool = False) -> "StepFn | SeedStepFn":
        """step_fn(state, step) for `fit`: splits `fold_in(key, step)` (default `key(STEPS)`) into
        a data key for `sample` and the step's own key, so a resumed run draws the same data.
        `pass_step`: `sample(data_key, step)` (a sampler indexed by the step, e.g. epochs).
        When `sample` has `examples(data_key)` (`dp.EpisodeSampler`) or `step_examples(step)`
        (`dp.StreamSampler`), the step function's `examples(step)` names the step's training
        examples (what a non-finite loss reports). `host_order`: `sample(step)` draws the batch
        on the host and the step's key is `fold_in(key, step)` (`StepFn`). On the seed axis
        (`SeedStepFn`):
        `sample` and `key` may be `per_seed` lists (default: one sampler, each seed's
        `key(STEPS)`)."""
        if self.seeds:
            n, wait = len(self.seeds), DataWait()
            samples = sample if isinstance(sample, list) else [sample] * n
            keys = key if isinstance(key, list) else [r.key(STEPS) for r in self.seed_runs]
            return SeedStepFn(train_step, tuple(StepFn(train_step, s, (), k, pass_step, wait,
                                                       host_order)
                                                for s, k in zip(samples, keys)), consts, wait)
        return StepFn(train_step, sample, consts, self.key(STEPS) if key is None else key,
                      pass_step, host_order=host_order)

    def fit(self, state, step_fn: Callable, evaluate: Callable[[Any], dict], *,
            eval_prefix: str = "dev", hooks: Sequence[Callable[[int], None]] = (),
            workdir: paths.PathLike | None = None, config: ml_collections.ConfigDict | None = None,
            metric: str | None = None, mode: str | None = None, data=None):
        """`ttw_jax.core.train.loop.fit` under `config.eval.metric` / `config.eval.mode`. A stage
        of a multi-stage run passes its own `workdir` (a sub-directory, with its own writer),
        `config` (num_steps, eval_every, ...) and `metric` / `mode`. `data`: a streaming
        iterator whose state the checkpoints keep (see `fit`). On the seed axis
        (`seeds.fit_seeds`): `evaluate` is a `per_seed` list, `data` one iterator per seed, and
        the meta a list of each seed's; a stage's `workdir` is `<seed workdir>/<stage>` per
        seed."""
        if self.seeds:
            return self._fit_seeds(state, step_fn, evaluate, eval_prefix, hooks, workdir,
                                   config, metric, mode, data)
        writer = self.writer if workdir is None else MetricWriter(workdir)
        try:
            return fit(state, config=config or self.config, workdir=workdir or self.workdir,
                       writer=writer, place=self.replicate, step_fn=step_fn, evaluate=evaluate,
                       metric=metric or self.config.eval.metric,
                       mode=mode or self.config.eval.mode, eval_prefix=eval_prefix, hooks=hooks,
                       data=data)
        finally:
            if workdir is not None:
                writer.close()

    def _fit_seeds(self, state, step_fn, evaluates, eval_prefix, hooks, stage, config, metric,
                   mode, data):
        stage = None if stage is None else paths.resolve(stage).name
        dirs = [r.workdir if stage is None else r.workdir / stage for r in self.seed_runs]
        writers = ([r.writer for r in self.seed_runs] if stage is None
                   else [MetricWriter(d) for d in dirs])
        try:
            return seeds_lib.fit_seeds(
                state, config=config or self.config,
                workdir=self.workdir if stage is None else self.workdir / stage,
                seed_workdirs=dirs, writers=writers, place=self.replicate, step_fn=step_fn,
                evaluates=evaluates, metric=metric or self.config.eval.metric,
                mode=mode or self.config.eval.mode, eval_prefix=eval_prefix, hooks=hooks,
                data=data)
        finally:
            if stage is not None:
                for w in writers:
                    w.close()

    def each_seed(self, report: Callable[..., dict], best_params, meta, *per_seed,
                  name: str = "") -> dict:
        """`report(run, best_params, meta, *per_seed)` (one run's results, written by its
        `finish`). On the seed axis: called for each seed's `Run` with its slice of the stacked
        `best_params`, its meta and its element of each `per_seed` list; then the table over
        the seeds (`<workdir>/sweep.md`, `sweep.json`, titled `name`: the experiment) is
        written and {"seeds", "summary", "runs": [each seed's results]} returned."""
        if not self.seeds:
            return report(self, best_params, meta, *per_seed)
        runs = [report(r, seeds_lib.take(best_params, i), meta[i], *(a[i] for a in per_seed))
                for i, r in enumerate(self.seed_runs)]
        summary = seeds_lib.write_sweep(self.workdir, runs, self.seeds,
                                        name or self.workdir.name, parallel=True)
        self.writer.close()
        return {"seeds": list(self.seeds), "summary": summary, "runs": runs}

    def finish(self, results: dict, summary: str, provenance: dict) -> dict:
        """Process 0 writes `results.json` (`results` with the schema version and `provenance`,
        see `ttw_jax.core.train.provenance`) and prints `summary` under the provenance title;
        closes the writer. Returns what was written."""
        results = prov.finalize(results, provenance)
        write_results(self.workdir, results, prov.title(provenance) + "\n" + summary)
        self.writer.close()
        return results
