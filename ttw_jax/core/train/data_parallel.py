"""Data-parallel training over a 1-D `('data',)` device mesh (the pmap-equivalent step); seeds
stacked in one program over a 2-D `('seeds', 'data')` mesh (`jit_step`).

The step is one `jax.jit` program: parameters and optimizer state are replicated, the batch is
sharded along its leading axis, and the loss is the mean over the *global* batch, so XLA inserts
the gradient all-reduce. It scales from one CPU to a multi-host TPU pod unchanged; with equal
shards it equals a `jax.pmap` step that averages the per-device losses (tested).
"""
from __future__ import annotations

import math
import queue
import threading
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax.training import train_state
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

AXIS = "data"
SEEDS = "seeds"        # the seed axis of a 2-D mesh (`seed_mesh`)
LossFn = Callable[[Any, Any, jax.Array], tuple[jax.Array, dict]]


def make_mesh(devices=None, num_devices: int = 0) -> Mesh:
    """A 1-D mesh, axis name 'data', over `devices`, else the first `num_devices` devices (a
    run's `config.num_devices`), else (0) all (global) devices. A run over several processes
    takes them all: `num_devices` is for one process (e.g. 1 of a host's 8 GPUs)."""
    if devices is None and num_devices:
        if isinstance(num_devices, bool) or not isinstance(num_devices, int) or num_devices < 0:
            raise ValueError(f"num_devices={num_devices!r}: 0 (all devices) or a device count")
        if jax.process_count() > 1:
            raise ValueError(f"num_devices={num_devices}: a run over {jax.process_count()} "
                             "processes uses all their devices; set num_devices=0")
        if num_devices > jax.device_count():
            raise ValueError(f"num_devices={num_devices}, but this process has "
                             f"{jax.device_count()} devices")
        devices = jax.devices()[:num_devices]
    return Mesh(np.asarray(devices if devices is not None else jax.devices()), (AXIS,))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def batch_sharded(mesh: Mesh) -> NamedSharding:
    """Shards the leading (batch) axis over the 'data' axis."""
    return NamedSharding(mesh, P(AXIS))


def check_batch_size(batch_size: int, mesh: Mesh) -> None:
    if batch_size <= 0:
        raise ValueError(f"batch size must be a positive multiple of the {mesh.size} devices of "
                         f"the '{AXIS}' mesh, got {batch_size}")
    if batch_size % mesh.size:
        raise ValueError(f"batch size {batch_size} is not divisible by the {mesh.size} devices "
                         f"of the '{AXIS}' mesh; pick a multiple of {mesh.size}")


def seed_mesh(mesh: Mesh, num_seeds: int) -> Mesh:
    """`mesh`'s devices as a 2-D ('seeds', 'data') mesh for N seeds in one program: gcd(N,
    devices) groups, each training N / groups of the seeds data-parallel over its devices (one
    seed per group of a pod's chips when they divide; 1 group, every device training every
    seed, when N and the device count share no factor)."""
    groups = math.gcd(num_seeds, mesh.size)
    return Mesh(mesh.devices.reshape(groups, -1), (SEEDS, AXIS))


def jit_step(step: Callable, mesh: Mesh, num_consts: int = 0, donate: bool = True,
             seed_axes: tuple | None = None, num_seeds: int = 0):
    """`step(state, batch, rng, *consts) -> (state, metrics)` jitted over `mesh`: the state, rng
    and consts replicated, the batch sharded over 'data'. `seed_axes` (one entry per const: 0
    when it carries a leading seed axis, None when the seeds share it): `step` `vmap`ped over
    `num_seeds` seeds stacked on the leading axis of the state, the batch ([N, B, ...]), the rng
    ([N]) and those consts, on the 2-D `seed_mesh`: the seeds split over its 'seeds' groups,
    each seed's batch over its group's 'data' devices; its metrics are [N]. The returned
    function first puts its arguments in those shardings (a no-op for the state it returned)."""
    if seed_axes is None:
        repl = replicated(mesh)
        return jax.jit(step, in_shardings=(repl, batch_sharded(mesh), repl) + (repl,) * num_consts,
                       out_shardings=(repl, repl), donate_argnums=(0,) if donate else ())
    if len(seed_axes) != num_consts:
        raise ValueError(f"seed_axes needs one entry per const ({num_consts}), got {seed_axes!r}")
    if num_seeds < 1:
        raise ValueError(f"a step over stacked seeds needs num_seeds >= 1, got {num_seeds}")
    grid = seed_mesh(mesh, num_seeds)
    seeds, repl = NamedSharding(grid, P(SEEDS)), NamedSharding(grid, P())
    ins = (seeds, NamedSharding(grid, P(SEEDS, AXIS)), seeds,
           *(repl if a is None else seeds for a in seed_axes))
    jitted = jax.jit(jax.vmap(step, in_axes=(0, 0, 0, *seed_axes)), in_shardings=ins,
                     out_shardings=(seeds, seeds), donate_argnums=(0,) if donate else ())

    def put(args):
        return jax.device_put(args, ins[:len(args)])

    def seed_step(*args):
        return jitted(*put(args))
    seed_step.lower = lambda *args: jitted.lower(*put(args))
    seed_step.mesh = grid
    return seed_step


def make_train_step(loss_fn: LossFn, mesh: Mesh, donate: bool = True, num_consts: int = 0,
                    learning_rate=None, seed_axes: tuple | None = None, num_seeds: int = 0):
    """Returns step(state, batch, rng, *consts) -> (state, metrics), jitted over `mesh`.

    `loss_fn(params, batch, rng, *consts) -> (loss, metrics)` computes the mean over the global
    batch. `consts` are replicated inputs that are not trained (a graph, a feature table): passed
    as arguments, never baked into the program. The input state's buffers are donated.
    `learning_rate` (the optimizer's schedule, or a constant): the metrics also hold the
    `learning_rate` of the step's update.

    `seed_axes`, `num_seeds`: the step of N seeds in one program (`ttw_jax.core.train.seeds`),
    vmapped over their leading seed axis on a ('seeds', 'data') mesh (`jit_step`).
    """
    def step(state: train_state.TrainState, batch, rng, *consts):
        (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            state.params, batch, rng, *consts)
        if learning_rate is not None:
            lr = learning_rate(state.step) if callable(learning_rate) else learning_rate
            metrics = {**metrics, "learning_rate": jnp.asarray(lr, jnp.float32)}
        return state.apply_gradients(grads=grads), metrics

    return jit_step(step, mesh, num_consts, donate, seed_axes, num_seeds)


def make_pmap_train_step(loss_fn: LossFn):
    """The literal `jax.pmap` formulation, kept as the reference the jit step is tested against.

    Inputs carry a leading device axis (per-device state copies, batch shards, rngs, copies of
    any consts). Each device
    differentiates its local loss and the gradients are averaged with `pmean`. (Measured on
    jax 0.10.2: under `pmap` the mapped parameters are device-varying, so `pmean(grad)` is the
    correct mean gradient and `grad(pmean(loss))` returns only the local gradient; inside a bare
    `shard_map` with replicated parameters it is the other way round.)
    """
    def step(state, batch, rng, *consts):
        (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            state.params, batch, rng, *consts)
        grads = jax.lax.pmean(grads, AXIS)
        return state.apply_gradients(grads=grads), jax.lax.pmean(metrics, AXIS)

    return jax.pmap(step, axis_name=AXIS)


def replicate(tree, mesh: Mesh):
    """A copy of `tree` on every device of `mesh`, built from host values: it never aliases the
    input's buffers (so donating it is safe) and works across hosts."""
    return shard_global(tree, replicated(mesh))


def shard_global(tree, sharding: NamedSharding):
    """Builds global arrays from host arrays that every process holds in full (multi-host safe)."""
    def put(x):
        x = np.asarray(x)
        return jax.make_array_from_callback(x.shape, sharding, lambda idx: x[idx])
    return jax.tree_util.tree_map(put, tree)


def row_names(names, rows) -> list[str]:
    """The `names` of `rows` (one string per row of a sampler's arrays; "row <i>" without)."""
    return [str(names[r]) if names is not None else f"row {r}" for r in rows]


class EpisodeSampler:
    """sample(key) -> {name: array[idx]} for `batch_size` episodes drawn uniformly with replacement
    from `arrays` (host arrays with a common leading axis, copied to every device once), or, with
    `index` [M] (row numbers, repeats allowed), from the rows `index` lists (a mixture: a row
    listed twice is drawn twice as often); the batch comes back sharded along the 'data' axis.

    `rows(key)` -> [batch_size] the row numbers that `sample(key)` draws (on the host, the same
    draw), and `examples(key)` their `names` (one string per row of `arrays`, e.g.
    ``"train.json: route_id 17"``; default ``"row <i>"``): what a non-finite loss names.
    """

    def __init__(self, arrays: dict, batch_size: int, mesh: Mesh, index=None,
                 names=None):
        self.batch_size, self.mesh, self.names = batch_size, mesh, names
        self._index = None if index is None else np.asarray(index, np.int32)
        self._n = next(iter(arrays.values())).shape[0] if index is None else len(self._index)
        self._arrays = replicate(arrays, mesh)
        self._device_index = None if index is None else replicate(self._index, mesh)
        self._draw = jax.jit(self._gather)

    def _gather(self, key, device_arrays, index):
        idx = jax.random.randint(key, (self.batch_size,), 0, self._n)
        if index is not None:
            idx = index[idx]
        return {k: v[idx] for k, v in device_arrays.items()}

    def __call__(self, key):
        return jax.lax.with_sharding_constraint(
            self._draw(key, self._arrays, self._device_index), batch_sharded(self.mesh))

    def rows(self, key) -> np.ndarray:
        idx = np.asarray(jax.random.randint(key, (self.batch_size,), 0, self._n))
        return idx if self._index is None else self._index[idx]

    def examples(self, key) -> list[str]:
        return row_names(self.names, self.rows(key))


def episode_sampler(arrays: dict, batch_size: int, mesh: Mesh, index=None,
                    names=None) -> EpisodeSampler:
    """`EpisodeSampler(arrays, batch_size, mesh, index, names)`."""
    return EpisodeSampler(arrays, batch_size, mesh, index, names)


class StreamSampler:
    """sample(key) -> this process's rows of the stream's next global batch (a
    `ttw_jax.core.stream.BatchStream`), sharded along 'data' (`key` is unused: the stream's
    order is fixed by its seed, and its state is checkpointed).

    With `prefetch` > 0 a background thread reads the next `prefetch` batches and puts them on
    the devices while the current step runs, so a step waits for its batch only when reading is
    slower than training. `get_state()` / `set_state()` are the stream's state after the batches
    taken so far (not those prefetched): pass the sampler as `fit(data=...)` and a resumed run
    reads the batches an uninterrupted one would. `step_examples(step)` names the rows of
    training step `step` (1-based: the stream's global batch `step - 1`) by `names`."""

    def __init__(self, stream, mesh: Mesh, names=None, prefetch: int = 2):
        self.stream, self.mesh, self.names, self.prefetch = stream, mesh, names, prefetch
        self._queue, self._stop, self._state, self._thread = None, None, None, None

    def _start(self) -> None:
        self._queue, self._stop = queue.Queue(maxsize=self.prefetch), threading.Event()
        q, stop = self._queue, self._stop

        def work():
            while not stop.is_set():
                try:
                    batch = shard_process_local(next(self.stream), self.mesh)
                    item = (self.stream.get_state(), batch, None)
                except BaseException as e:      # raised in the consumer, at its next batch
                    item = (None, None, e)
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if item[2] is not None:
                    return
        self._thread = threading.Thread(target=work, daemon=True, name="ttw-prefetch")
        self._thread.start()

    def __call__(self, key=None):
        if self.prefetch <= 0:
            batch = shard_process_local(next(self.stream), self.mesh)
            self._state = None
            return batch
        if self._queue is None:
            self._start()
        state, batch, error = self._queue.get()
        if error is not None:
            raise error
        self._state = state
        return batch

    def close(self) -> None:
        """Stops the prefetching thread (the batches it read are dropped)."""
        if self._stop is not None:
            self._stop.set()
            self._thread.join()      # it may be inside `next(stream)`: let it finish
        self._queue = self._stop = self._thread = None

    def get_state(self) -> dict:
        return self._state if self._state is not None else self.stream.get_state()

    def set_state(self, state: dict) -> None:
        self.close()
        self.stream.set_state(state)
        self._state = None

    def step_examples(self, step: int) -> list[str]:
        return row_names(self.names, self.stream.global_rows(step - 1))


def shard_process_local(tree, mesh: Mesh):
    """Global batch arrays, sharded along 'data', from this process's rows of the batch (e.g.
    a `BatchStream`'s): process p's rows are the p-th contiguous part of the global batch."""
    sharding = batch_sharded(mesh)
    return jax.tree_util.tree_map(
        lambda x: jax.make_array_from_process_local_data(sharding, np.asarray(x)), tree)
