"""Shared test utilities: config overrides by path, a `--config.<key>=<value>` flag's value as absl
parses it, simulated crashes, the jit == pmap check of a data-parallel train step, the
bfloat16-against-float32 loss check, and a fake `gs://` bucket (the `bucket` fixture)."""
import json
import operator
import os
from unittest import mock

import fsspec
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from absl import flags as absl_flags

from ttw_jax.core.train import data_parallel as dp


BF16_LOSS_RTOL = 0.02   # the stated tolerance: a bfloat16 loss within 2% of float32's
# Every example right: an accuracy of 1.0 up to the float32 rounding of its mean (a mean of ones
# came out as 1.0000001 under --xla_cpu_max_isa=AVX); one miss in a learning test's batch is far
# below it.
ALL_RIGHT = 1 - 1e-6


def assert_bfloat16_loss_close(loss32, loss16, *args) -> None:
    """The loss functions (-> (loss, metrics)) of a model in float32 and of its bfloat16
    `with_dtype` wrapper agree within `BF16_LOSS_RTOL` on the same parameters and batch `args`."""
    a, b = (float(jax.jit(f)(*args)[0]) for f in (loss32, loss16))
    assert abs(b - a) <= BF16_LOSS_RTOL * abs(a), (a, b)


def seeded_key(base: int, seed: int) -> jax.Array:
    """A learning test's key `base` under learning seed `seed`: `jax.random.key(base)` itself at
    seed 0 (what CI runs), else folded with the seed."""
    key = jax.random.key(base)
    return key if seed == 0 else jax.random.fold_in(key, seed)


class Learned:
    """The final metrics of one learning test (the `learned` fixture): each call records its
    metrics to the JSON-lines log (when one is named), then asserts every bound."""
    OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
           "==": operator.eq}

    def __init__(self, test: str, seed: int, log: str = ""):
        self.test, self.seed, self.log = test, seed, log

    def __call__(self, **checks) -> None:
        metrics = {}
        for name, (value, op, bound) in checks.items():
            if op not in self.OPS:
                raise ValueError(f"{name}: op {op!r} is not one of {sorted(self.OPS)}")
            metrics[name] = {"value": float(value), "op": op, "bound": float(bound)}
        if self.log:
            line = {"test": self.test, "seed": self.seed,
                    "xla_flags": os.environ.get("XLA_FLAGS", ""), "metrics": metrics}
            with open(self.log, "a", encoding="utf-8") as f:   # one short append per call
                f.write(json.dumps(line) + "\n")
        failed = [f"{name} = {m['value']:.6g}, needs {m['op']} {m['bound']:.6g}"
                  for name, m in metrics.items()
                  if not self.OPS[m["op"]](m["value"], m["bound"])]
        assert not failed, f"did not learn (seed {self.seed}): " + "; ".join(failed)


class Crash(Exception):
    """Raised by a `crash_at` hook to simulate a killed training run."""


def crash_at(step_to_crash: int):
    """A train_and_evaluate hook that raises `Crash` after step `step_to_crash`."""
    def hook(step):
        if step == step_to_crash:
            raise Crash(step)
    return hook


def override(config, **overrides):
    """Sets config fields; nested keys use '__' (`model__name="ga"` sets config.model.name)."""
    for key, value in overrides.items():
        target = config
        *path, last = key.split("__")
        for p in path:
            target = target[p]
        target[last] = value
    return config


# How absl's config_flags parses a `--config.<key>=<value>` override, by the type of the field's
# current value (ml_collections' parsers for these types are absl's own).
FLAG_PARSERS = {bool: absl_flags.BooleanParser(), int: absl_flags.IntegerParser(),
                float: absl_flags.FloatParser(), str: absl_flags.ArgumentParser()}


def flag_value(like, text: str):
    """`text` parsed as absl's config_flags parses a flag for a field whose value is `like`: a
    bool from true / false (any case) or 1 / 0, an int, a float, a string as written; ValueError
    on text the field's parser refuses, TypeError for a field of another type."""
    parser = FLAG_PARSERS.get(type(like))
    if parser is None:
        raise TypeError(f"no flag parser for a {type(like).__name__} field")
    return parser.parse(text)


def assert_jit_step_equals_pmap_step(state, batches, loss_fn) -> None:
    """Runs `batches` through the jit-over-mesh train step, a literal `jax.pmap` step and a
    single-device step from `state`: equal losses and parameters, and the parameters moved."""
    n = jax.device_count()
    assert n == 8, "tests/conftest.py sets 8 fake CPU devices"
    mesh = dp.make_mesh()
    jit_step = dp.make_train_step(loss_fn, mesh)
    pmap_step = dp.make_pmap_train_step(loss_fn)
    single_step = dp.make_train_step(loss_fn, dp.make_mesh(jax.devices()[:1]), donate=False)

    s_jit = dp.replicate(state, mesh)
    s_pmap = jax.tree_util.tree_map(lambda x: jnp.stack([x] * n), state)
    s_single = state
    for b in batches:
        s_jit, m_jit = jit_step(s_jit, jax.device_put(b, dp.batch_sharded(mesh)), jax.random.key(0))
        shards = jax.tree_util.tree_map(lambda x: x.reshape(n, -1, *x.shape[1:]), b)
        s_pmap, m_pmap = pmap_step(s_pmap, shards, jax.random.split(jax.random.key(0), n))
        s_single, _ = single_step(s_single, b, jax.random.key(0))
        np.testing.assert_allclose(m_jit["loss"], m_pmap["loss"][0], rtol=1e-5)
    for a, p, s in zip(jax.tree_util.tree_leaves(s_jit.params), jax.tree_util.tree_leaves(s_pmap.params),
                       jax.tree_util.tree_leaves(s_single.params)):
        np.testing.assert_allclose(a, p[0], rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(a, s, rtol=2e-5, atol=2e-6)
    # The step really changed the parameters.
    moved = [float(jnp.abs(a - b).max()) for a, b in zip(jax.tree_util.tree_leaves(s_jit.params),
                                                         jax.tree_util.tree_leaves(state.params))]
    assert max(moved) > 1e-3


@pytest.fixture
def bucket(tmp_path):
    """A fake `gs://` served from `tmp_path / "gcs"`: fsspec's `gs` / `gcs` protocols (what
    `etils.epath` reads and writes) and orbax's TensorStore kvstore for `gs://` paths (the
    checkpoints' arrays) on that folder; yields it."""
    from fsspec.implementations.dirfs import DirFileSystem
    from fsspec.implementations.local import LocalFileSystem
    from orbax.checkpoint._src.path import gcs_utils
    root = tmp_path / "gcs"
    root.mkdir()

    class FakeGCS(DirFileSystem):
        protocol = ("gs", "gcs")
        root_marker = ""

        def __init__(self, *args, finalize_on_close=False, **kwargs):
            super().__init__(path=str(root), fs=LocalFileSystem(auto_mkdir=True), **kwargs)

        @classmethod
        def _strip_protocol(cls, path):
            path = fsspec.utils.stringify_path(path)
            for prefix in ("gs://", "gcs://"):
                path = path.removeprefix(prefix)
            return path.rstrip("/")

    def kvstore(path):
        name, rest = gcs_utils.parse_gcs_path(path, add_trailing_slash=False)
        return {"driver": "file", "path": str(root / name / rest)}

    from etils.epath import backend
    from fsspec.registry import _registry
    saved = {p: _registry.get(p) for p in FakeGCS.protocol}
    backend.fsspec_backend._get_filesystem.cache_clear()
    for p in FakeGCS.protocol:
        fsspec.register_implementation(p, FakeGCS, clobber=True)
    try:
        with mock.patch.object(gcs_utils, "get_kvstore_for_gcs", kvstore), \
                mock.patch.object(gcs_utils, "is_hierarchical_namespace_enabled",
                                  lambda path: False):
            yield root
    finally:
        backend.fsspec_backend._get_filesystem.cache_clear()
        for p, cls in saved.items():
            _registry.pop(p, None)
            if cls is not None:
                _registry[p] = cls
