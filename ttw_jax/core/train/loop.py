"""The training loop shared by every experiment: steps, periodic evaluation with early stopping,
orbax checkpoints of {state, best params} and metric logging; a killed run resumes exactly."""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import tempfile
import threading
import time
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from ttw_jax.core import paths
from ttw_jax.core.progress import progress as progress_report
from ttw_jax.core.stream import NonFiniteInput
from ttw_jax.core.train.checkpoint import Checkpointer
from ttw_jax.core.train.logging import MetricWriter
from ttw_jax.core.train.workdir import profile_window

# The log line of a process's first train step (read by experiments/benchmarks/launch_bench.py).
FIRST_STEP_LOG = "First step of this process (compilation included): %.2f s"


# Set by the launchers' `--prepare_only`: `fit` stops the run before its first step, once the
# config is checked and every input of the first stage read (TFDS datasets built, caches written).
PREPARE_ONLY_ENV = "TTW_JAX_PREPARE_ONLY"


class DataPrepared(Exception):
    """Raised by `fit` under `PREPARE_ONLY_ENV=1`: the data is prepared, nothing trained."""


def stop_if_preparing(workdir) -> None:
    """Raises `DataPrepared` under `--prepare_only` (`PREPARE_ONLY_ENV=1`): called where a run's
    training would start (`fit`, and a trainer with its own loop)."""
    if os.environ.get(PREPARE_ONLY_ENV) == "1":
        raise DataPrepared(f"data prepared for {workdir}; stopped before training")


class Preempted(SystemExit):
    """Raised by `fit` after a SIGTERM, once the state is checkpointed: exits the process with
    status 0 (a TPU VM's preemption notice); rerunning the same command resumes exactly."""


@contextlib.contextmanager
def sigterm_flag():
    """Yields a threading.Event set by SIGTERM while the block runs (main thread only; elsewhere
    the event is never set and the signal keeps its handler)."""
    event = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield event
        return
    previous = signal.signal(signal.SIGTERM, lambda *_: event.set())
    try:
        yield event
    finally:
        signal.signal(signal.SIGTERM, previous)


def _any_process(flag: bool) -> bool:
    """True if `flag` is set on any process (all processes must call it at the same step)."""
    if jax.process_count() == 1:
        return flag
    from jax.experimental import multihost_utils
    return bool(np.any(multihost_utils.process_allgather(np.asarray(flag))))


def nonfinite_message(loss: float | None, step: int, saved: int, workdir, step_fn,
                      source: NonFiniteInput | None = None) -> str:
    """The error of a non-finite training loss at `step`, or of a non-finite input (`source`,
    raised while the step read its batch, `loss` None): the step, the input's file and element,
    the batch's examples when `step_fn.examples(step)` names them (the first 8 in the message)
    and where a rerun resumes (`saved`, the last checkpointed step). Process 0 writes
    `<workdir>/nonfinite_step_<step>.json`: {step, loss (null for an input), examples: [name],
    input: {file, index, row, problem, examples: the batch's examples that name the file}}
    (input only for `source`; the file only when there are examples or a source)."""
    text = (f"non-finite training input at step {step} of {workdir}: {source}"
            if source is not None else
            f"non-finite training loss ({loss}) at step {step} of {workdir}")
    names = getattr(step_fn, "examples", lambda _: None)(step)
    if names or source is not None:
        path = paths.resolve(workdir) / f"nonfinite_step_{step}.json"
        report = {"step": step, "loss": None if loss is None else float(loss),
                  "examples": list(names or [])}
        if source is not None:
            base = os.path.basename(source.file)
            report["input"] = {"file": source.file, "index": list(source.index),
                               "row": source.index[0] if source.index else None,
                               "problem": source.problem,
                               "examples": [n for n in names or [] if base in
                                            map(os.path.basename, re.split(r"[\s,;()]+", n))]}
        if jax.process_index() == 0:
            paths.write_text(path, json.dumps(report, indent=1))
        names = names or []
        shown = ", ".join(names[:8]) + (f", ... ({len(names)} in all, listed in {path})"
                                        if len(names) > 8 else f" (listed in {path})")
        text += f"; its batch: {shown}"
    return (f"{text}; nothing after step {saved} was checkpointed (a resumed run restarts there: "
            "lower the learning rate or fix the data first)")


class Profiler:
    """A `jax.profiler` trace of training steps `first..last` into `<workdir>/profile` (read it
    with TensorBoard's profile plugin, or Perfetto). On a bucket workdir the trace is written
    locally and copied there when it stops."""

    def __init__(self, window: tuple[int, int] | None, workdir):
        self.window, self.workdir, self._local = window, paths.resolve(workdir), None

    def before(self, step: int) -> None:
        if self.window and step == self.window[0]:
            target = self.workdir / "profile"
            self._local = (os.fspath(target) if paths.is_local(target)
                           else tempfile.mkdtemp(prefix="ttw_profile_"))
            jax.profiler.start_trace(self._local)
            logging.info("Profiling steps %d-%d into %s", *self.window, target)

    def after(self, step: int, state) -> None:
        if self._local and step == self.window[1]:
            jax.block_until_ready(state)
            jax.profiler.stop_trace()
            if not paths.is_local(self.workdir):
                for dirpath, _, files in os.walk(self._local):
                    for f in files:
                        rel = os.path.relpath(os.path.join(dirpath, f), self._local)
                        with open(os.path.join(dirpath, f), "rb") as src:
                            paths.write_bytes(self.workdir / "profile" / rel, src.read())
            self._local = None

    def close(self) -> None:
        if self._local:          # stopped before the window's end (early stop, an error)
            jax.profiler.stop_trace()
            self._local = None


def timed_step(step_fn: Callable, state, step: int, first: bool):
    """`step_fn(state, step)`; the first step of a process waits for its result and logs its time
    (`FIRST_STEP_LOG`, compilation included: what the compilation cache saves)."""
    if not first:
        return step_fn(state, step)
    t = time.perf_counter()
    out = jax.block_until_ready(step_fn(state, step))
    logging.info(FIRST_STEP_LOG, time.perf_counter() - t)
    return out


def _close(progress, ckpt) -> None:
    if progress is not None:
        progress.close()
    ckpt.close()


def train_step(step_fn: Callable, state, step: int, first: bool, profiler: Profiler,
               hooks: Sequence[Callable[[int], None]], stop: Callable[[], None], saved: int,
               workdir, names) -> tuple[Any, dict]:
    """One step of a training loop: `timed_step` inside the profiler's window, then the `hooks`.
    A `NonFiniteInput` raised while the step reads its batch (a streamed row) calls `stop()` and
    raises the FloatingPointError of `nonfinite_message` (`saved`: the last checkpointed step;
    `names`: what names the batch's examples, or None)."""
    profiler.before(step)
    try:
        state, metrics = timed_step(step_fn, state, step, first)
    except NonFiniteInput as e:
        stop()
        raise FloatingPointError(nonfinite_message(None, step, saved, workdir, names, e)) from e
    profiler.after(step, state)
    for hook in hooks:
        hook(step)
    return state, metrics


def fit(state: Any, *, config: ml_collections.ConfigDict, workdir: str, writer: MetricWriter,
        place: Callable[[Any], Any], step_fn: Callable[[Any, int], tuple[Any, dict]],
        evaluate: Callable[[Any], dict], metric: str, mode: str = "max",
        eval_prefix: str = "valid", hooks: Sequence[Callable[[int], None]] = (),
        data: Any = None):
    """Trains from the newest checkpoint in `<workdir>/checkpoints` (or from `state`).

    `step_fn(state, step) -> (state, metrics)` runs training step `step` (1-based; derive its
    randomness from `step` so a resumed run is identical); `evaluate(params) -> {name: float}` runs
    every `config.eval_every` steps and at the end; `metric` of it, maximised or minimised
    (`mode`), picks the best parameters and stops the run after `config.patience` evaluations
    without improvement. `place(tree)` puts host trees on the devices. Hosts sync every
    `config.log_every` steps, and a non-finite training `loss` then stops the run with a
    `FloatingPointError` naming its step and, when `step_fn.examples(step)` exists
    (`Run.step_fn`), the batch's examples (the checkpoints before it are kept); so does a
    `NonFiniteInput` raised while a step reads its batch (a streamed row), naming the file and
    element too (`nonfinite_message`). A SIGTERM
    (preemption) checkpoints the state at the next sync and raises `Preempted` (exit status 0).
    `hooks` are called with the step number after every step. `config.profile_steps`
    ("first,last"; optional) writes a `jax.profiler` trace of those steps into
    `<workdir>/profile`. When `step_fn.data_wait()` exists (`Run.step_fn`), the seconds the steps
    waited for their batches since the last log line are logged as `train/data_wait_ms` (per
    step). `data`: a streaming iterator
    (`ttw_jax.core.stream.BatchStream`) that `step_fn` reads; its `get_state()` is saved in
    every checkpoint and restored on resume (`set_state`), so a resumed run reads the same batches.

    Returns (state, best_params, meta) with meta = {step, best, best_step, best_eval,
    bad_evals, stopped}; `best_eval` is the whole `evaluate` result at `best_step` (also after a
    resume: it is checkpointed), so a trainer need not evaluate the best parameters on the same
    split again.
    """
    if mode not in ("max", "min"):
        raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
    stop_if_preparing(workdir)
    sign = 1.0 if mode == "max" else -1.0
    ckpt = Checkpointer(paths.resolve(workdir) / "checkpoints", config.max_checkpoints)
    best_params = state.params
    meta = {"step": 0, "best": None, "best_step": 0, "bad_evals": 0, "stopped": False}
    restored = ckpt.restore_latest({"state": state, "best_params": best_params})
    if restored is not None:
        (trees, meta) = restored
        state, best_params = trees["state"], trees["best_params"]
        if data is not None and meta.get("data_state") is not None:
            data.set_state(meta["data_state"])
        logging.info("Resumed from step %d of %s", meta["step"], workdir)
    writer.truncate_after(meta["step"])
    state, best_params = place((state, best_params))

    progress = None
    if jax.process_index() == 0:
        progress = progress_report(total=config.num_steps, initial=meta["step"], desc="train",
                                   leave=False)
    profiler = Profiler(profile_window(config.get("profile_steps", "")), workdir)
    with sigterm_flag() as preempt:
        try:
            state, best_params = _train(state, best_params, meta, ckpt, config, workdir, writer,
                                        step_fn, evaluate, metric, sign, eval_prefix, hooks,
                                        progress, preempt, data, profiler)
        finally:
            profiler.close()
    return state, best_params, meta


def _train(state, best_params, meta, ckpt, config, workdir, writer, step_fn, evaluate, metric,
           sign, eval_prefix, hooks, progress, preempt, data, profiler):
    """`fit`'s loop; updates `meta` in place and returns (state, best_params)."""
    def save(step):
        meta["step"] = step
        if data is not None:
            meta["data_state"] = data.get_state()
        ckpt.save(step, {"state": state, "best_params": best_params}, meta)

    pending, t0 = [], time.time()
    step = meta["step"]
    first = step + 1
    data_wait = getattr(step_fn, "data_wait", None)
    while step < config.num_steps and not meta["stopped"]:
        step += 1
        state, metrics = train_step(step_fn, state, step, step == first, profiler, hooks,
                                    lambda: _close(progress, ckpt), meta["step"], workdir,
                                    step_fn)
        pending.append(metrics)
        evaluate_now = step % config.eval_every == 0 or step == config.num_steps
        if step % config.log_every == 0 or evaluate_now:
            host = jax.device_get(pending)  # also bounds the number of in-flight steps
            bad = [i for i, m in enumerate(host) if not np.isfinite(m["loss"])]
            if bad:
                if progress is not None:
                    progress.close()
                ckpt.close()
                raise FloatingPointError(nonfinite_message(
                    host[bad[0]]["loss"], step - len(host) + 1 + bad[0], meta["step"], workdir,
                    step_fn))
            scalars = {f"train/{k}": float(np.mean([m[k] for m in host])) for k in host[0]}
            scalars["train/steps_per_second"] = len(host) / max(time.time() - t0, 1e-9)
            if data_wait is not None:
                scalars["train/data_wait_ms"] = 1e3 * data_wait() / len(host)
            pending, t0 = [], time.time()
            if progress is not None:
                progress.set_postfix(loss=f"{scalars['train/loss']:.3f}")
                progress.update(len(host))
            if evaluate_now:
                result = evaluate(state.params)
                scalars.update({f"{eval_prefix}/{k}": v for k, v in result.items()})
                if meta["best"] is None or sign * result[metric] > sign * meta["best"]:
                    meta.update(best=result[metric], best_step=step, bad_evals=0,
                                best_eval={k: float(v) for k, v in result.items()})
                    best_params = jax.tree_util.tree_map(jnp.copy, state.params)
                else:
                    meta["bad_evals"] += 1
                    meta["stopped"] = meta["bad_evals"] >= config.patience
            writer.write(step, scalars)
            # Preemption is checked where the hosts sync, so that all of them agree on the step.
            preempted = _any_process(preempt.is_set()) and step < config.num_steps
            if evaluate_now or preempted:
                # Every metric line up to a checkpoint is stored (copied to a remote workdir)
                # before the checkpoint: a run killed in between resumes from the previous one.
                writer.flush()
                save(step)
            if preempted:
                if progress is not None:
                    progress.close()
                ckpt.close()
                logging.warning("SIGTERM: checkpointed step %d of %s; rerun the same command "
                                "to resume", step, workdir)
                raise Preempted(0)
    if progress is not None:
        progress.close()
    ckpt.close()
    meta["step"] = step
    return state, best_params
