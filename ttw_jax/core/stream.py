"""Streaming training batches for data that does not fit in memory: grain over a random-access
source, each process reading only its share of every global batch.

`BatchStream(load, n, global_batch, seed)` yields this process's rows of consecutive global batches:
global position g of the stream is example `permutation(seed, epoch)[g % n]` (a fresh
permutation each epoch, so an epoch visits every example once), global batch s covers positions
[s * B, (s + 1) * B), and process p of P reads positions [s * B + p * B / P, s * B + (p + 1) * B /
P), so the processes read disjoint rows and together the global batch of one process with all
devices. `load(i) -> {name: array}` reads example i (from a memory-mapped file, an ArrayRecord
data source, ...); grain runs it in `num_threads` threads and keeps `prefetch` (default
`num_threads`) batches ready.
`get_state()` / `set_state()` are grain's iterator state (a JSON dict); `fit` saves it in the
checkpoint, so a resumed run reads the batches an uninterrupted one would.

`LazyRows` is an array-like [E, ...] whose rows are read on indexing (`rows[idx]`), for the
evaluations, which take batches of consecutive rows. A reader raises `NonFiniteInput` for a row
that is not finite: a training run then stops naming the step, the file and the element.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np


@functools.lru_cache(maxsize=4)
def _permutation(seed: int, epoch: int, n: int) -> np.ndarray:
    return np.random.default_rng((seed, epoch)).permutation(n)


def example_index(position: int, n: int, seed: int) -> int:
    """The example at global stream position `position` (epoch = position // n)."""
    epoch, r = divmod(int(position), n)
    return int(_permutation(seed, epoch, n)[r])


class BatchStream:
    """Iterator over this process's part of each global batch: {name: [B / P, ...] numpy}."""

    def __init__(self, load: Callable[[int], dict], n: int, global_batch: int, seed: int,
                 process_index: int = 0, process_count: int = 1, num_threads: int = 2,
                 prefetch: int | None = None):
        import grain
        if n <= 0:
            raise ValueError("nothing to stream: the source is empty")
        if global_batch <= 0 or global_batch % process_count:
            raise ValueError(f"the global batch ({global_batch}) must be a positive multiple of "
                             f"the number of processes ({process_count})")
        self.n, self.global_batch, self.seed = n, global_batch, seed
        self.process_count = process_count
        self.row_of = None   # of_rows with an index: stream example i is row row_of[i]
        self.local = global_batch // process_count
        offset = process_index * self.local

        def position(q: int) -> int:   # this process's q-th row -> global stream position
            step, r = divmod(q, self.local)
            return step * global_batch + offset + r

        ds = grain.MapDataset.range(0, 1 << 50).map(
            lambda q: load(example_index(position(q), n, seed))).batch(self.local)
        self._iter = iter(ds.to_iter_dataset(grain.ReadOptions(
            num_threads=num_threads, prefetch_buffer_size=prefetch or num_threads)))

    @classmethod
    def of_rows(cls, arrays: dict, keys: Sequence[str], global_batch: int, seed: int,
                num_threads: int = 2, index=None) -> "BatchStream":
        """The stream of this JAX process over the rows of `arrays[k]` for `keys` (arrays or
        `LazyRows` with a common leading axis): the trainers' training batches; with `index`
        [M] (row numbers, repeats allowed) over the rows it lists, an epoch visiting each entry
        once (a mixture)."""
        import jax
        if index is None:
            load, n = (lambda i: {k: arrays[k][i] for k in keys}), len(arrays[keys[0]])
        else:
            index = np.asarray(index)
            load, n = (lambda i: {k: arrays[k][int(index[i])] for k in keys}), len(index)
        stream = cls(load, n, global_batch, seed, jax.process_index(), jax.process_count(),
                     num_threads)
        stream.row_of = index
        return stream

    def indices(self, step: int, process_index: int = 0) -> np.ndarray:
        """The example indices of process `process_index`'s rows of global batch `step` (0-based)."""
        lo = step * self.global_batch + process_index * self.local
        return np.asarray([example_index(g, self.n, self.seed) for g in range(lo, lo + self.local)])

    def global_rows(self, step: int) -> np.ndarray:
        """The rows (of `of_rows`'s arrays; example indices otherwise) of every process's part
        of global batch `step` (0-based), in batch order: what a non-finite loss names."""
        rows = np.concatenate([self.indices(step, p) for p in range(self.process_count)])
        return rows if self.row_of is None else self.row_of[rows]

    def __iter__(self):
        return self

    def __next__(self) -> dict:
        return next(self._iter)

    def get_state(self) -> dict:
        return self._iter.get_state()

    def set_state(self, state: dict) -> None:
        self._iter.set_state(state)


class NonFiniteInput(ValueError):
    """A training input read while a run trains (a streamed row) holds a value that is not
    finite: `file` is its source, `index` the first bad element's index in the array read from it
    (a feature map's (row, column, channel)), `problem` the rest of the message. `fit` stops the
    run on it as on a non-finite loss, in `nonfinite_step_<n>.json`."""

    def __init__(self, file: str, index: Sequence[int], problem: str):
        super().__init__(f"{file}: {problem}")
        self.file, self.index, self.problem = str(file), tuple(int(i) for i in index), problem

    def __reduce__(self):
        return type(self), (self.file, self.index, self.problem)


class LazyRows:
    """An [E, *row_shape] array-like read row by row: `rows[idx]` (an int array, a slice or an
    int) calls `read(i)` for each row and stacks them."""

    def __init__(self, read: Callable[[int], np.ndarray], length: int,
                 row_shape: Sequence[int], dtype: Any):
        self._read, self._len = read, length
        self.shape = (length, *row_shape)
        self.dtype = np.dtype(dtype)
        self.ndim = len(self.shape)

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, idx):
        if isinstance(idx, (int, np.integer)):
            return np.asarray(self._read(int(idx) % self._len), self.dtype)
        rows = np.arange(self._len)[idx]
        out = np.empty((len(rows), *self.shape[1:]), self.dtype)
        for j, i in enumerate(rows):
            out[j] = self._read(int(i))
        return out


def mixture_index(n_first: int, n_second: int, share: float, seed: int) -> np.ndarray:
    """Row numbers [M] into the concatenation of two datasets (n_first rows, then n_second) in
    which the second makes up `share` (in [0, 1)) of the entries: every row of the first once,
    then the second's rows in a seeded order, cycled or cut to round(share / (1 - share) *
    n_first) entries. A uniform draw from the result draws the second dataset with probability
    `share` (up to that rounding), whatever the sizes."""
    if not 0 <= share < 1:
        raise ValueError(f"a mixture share must be in [0, 1), got {share}")
    if n_first <= 0 or (n_second <= 0 and share > 0):
        raise ValueError(f"a mixture needs rows in both datasets, got {n_first} and {n_second}")
    count = int(round(share / (1 - share) * n_first))
    order = np.random.default_rng(seed).permutation(n_second) if n_second else np.zeros(0, int)
    second = n_first + np.resize(order, count) if count else np.zeros(0, np.int64)
    return np.concatenate([np.arange(n_first), second]).astype(np.int64)
