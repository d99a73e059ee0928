"""The training batches of an SDR run, drawn as a resumed run (and each seed of a run on the
seed axis) must draw them again."""
from __future__ import annotations

import ml_collections
import numpy as np

from ttw_jax.core.stream import BatchStream
from ttw_jax.core.train import data_parallel as dp


class TrainRows:
    """One run's training batches for `StepFn(host_order=True)`: `rows(step)` drawn on the host
    from (seed, step), so a resumed run sees the same data, or (`data.stream`) the next batch
    of a stream whose state the checkpoints keep; `step_examples(step)` names them (route ids
    and feature files: what a non-finite loss reports)."""

    def __init__(self, config: ml_collections.ConfigDict, train: dict, mesh):
        self.config, self.train, self.mesh = config, train, mesh
        self.keys = ("features", "center", "tokens", "token_len")
        self.stream = self.sampler = None
        if config.data.stream:   # this process's rows of each batch, read by grain's threads
            self.stream = BatchStream.of_rows(train, self.keys, config.batch_size, config.seed,
                                              config.data.stream_threads)
            self.sampler = dp.StreamSampler(self.stream, mesh)   # next batches on the devices

    def rows(self, step: int) -> np.ndarray:
        return np.random.default_rng((self.config.seed, step)).integers(
            0, len(self.train["center"]), self.config.batch_size)

    def __call__(self, step: int):
        if self.sampler is not None:   # the stream's state is checkpointed: resumed runs alike
            return self.sampler()
        idx = self.rows(step)
        return dp.shard_global({k: self.train[k][idx] for k in self.keys},
                               dp.batch_sharded(self.mesh))

    def step_examples(self, step: int) -> list[str]:
        train = self.train
        idx = self.stream.global_rows(step - 1) if self.stream is not None else self.rows(step)
        files = (train["feature_file"] if "feature_file" in train else
                 [f"features/{p}.npy" for p in train["panoid"]] if "panoid" in train else None)
        return [f"train: route_id {train['route_id'][i]}"
                + (f", {files[i]}" if files is not None else "") for i in idx]
