"""The jit-over-mesh train step equals a literal `jax.pmap` step and a single-device step (8 fake
CPU devices), on a small system-agnostic regression model."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
import pytest
from flax.training import train_state

from tests.helpers import assert_jit_step_equals_pmap_step
from ttw_jax.core.train import data_parallel as dp

pytestmark = pytest.mark.usefixtures("fast_compile_unless_slow")  # tiny models


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(1)(nn.tanh(nn.Dense(16)(x)))[..., 0]


def setup(batch_size=32):
    model = MLP()
    keys = jax.random.split(jax.random.key(1), 3)
    batches = [{"x": jax.random.normal(k, (batch_size, 5)),
                "y": jax.random.normal(jax.random.fold_in(k, 1), (batch_size,))} for k in keys]
    params = model.init(jax.random.key(0), batches[0]["x"])

    def loss_fn(params, batch, rng):
        del rng
        loss = jnp.mean((model.apply(params, batch["x"]) - batch["y"]) ** 2)
        return loss, {"loss": loss}

    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-2))
    return state, batches, loss_fn


def test_jit_mesh_step_equals_pmap_step_and_single_device():
    assert_jit_step_equals_pmap_step(*setup())


def test_batch_must_divide_over_devices():
    with pytest.raises(ValueError, match="not divisible"):
        dp.check_batch_size(12, dp.make_mesh())


def test_a_run_takes_the_first_num_devices(tmp_path):
    """`config.num_devices`: the run's mesh holds the first N devices (0: all 8), its batch
    sizes are checked against those N, and results record N; out-of-range values are refused
    by name before anything is written."""
    import ml_collections
    from ttw_jax.core.train import provenance
    from ttw_jax.core.train.run import Run
    assert dp.make_mesh(num_devices=3).devices.tolist() == jax.devices()[:3]
    assert dp.make_mesh(num_devices=0).size == jax.device_count() == 8
    config = ml_collections.ConfigDict({"seed": 0, "batch_size": 6, "num_devices": 2})
    run = Run.start(config, tmp_path / "two")
    assert run.mesh.devices.tolist() == jax.devices()[:2]
    assert provenance.provenance(config, data={})["device"]["count"] == 2
    with pytest.raises(ValueError, match="not divisible by the 8 devices"):
        Run.start(ml_collections.ConfigDict({"seed": 0, "batch_size": 6, "num_devices": 0}),
                  tmp_path / "all")
    for bad, message in ((9, "num_devices=9, but this process has 8 devices"),
                         (-1, r"num_devices=-1 \(needs an integer >= 0\)")):
        config.num_devices = bad
        with pytest.raises(ValueError, match=message):
            Run.start(config, tmp_path / str(bad))
        assert not (tmp_path / str(bad)).exists()


LATE_DEVICE = """
import time, jax, jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P
def late(x, device):
    time.sleep(3.0 if device == 0 else 0.0)
    return x
def f(x):
    x = jax.pure_callback(late, jax.ShapeDtypeStruct(x.shape, x.dtype), x, jax.lax.axis_index("d"))
    return jax.lax.psum(x, "d")
g = jax.jit(jax.shard_map(f, mesh=Mesh(jax.devices(), ("d",)), in_specs=P("d"), out_specs=P()))
print("sum", float(g(jnp.ones((8, 4))).sum()))
"""


def test_a_device_late_to_a_collective_is_waited_for_as_tests_conftest_sets():
    """XLA:CPU aborts the process when a device reaches a collective later than
    `--xla_cpu_collective_call_terminate_timeout_seconds` after the first one: with the 1 second
    below and a device 3 seconds late, the process dies (SIGABRT, "Termination timeout"). The
    suite's flags (tests/conftest.py) raise that timeout, for the late threads of 8 devices on 2
    oversubscribed cores."""
    import os
    import re
    import subprocess
    import sys
    flags = os.environ["XLA_FLAGS"]
    terminate = re.search(r"--xla_cpu_collective_call_terminate_timeout_seconds=(\d+)", flags)
    assert terminate and int(terminate.group(1)) >= 600, flags
    short = re.sub(r"(--xla_cpu_collective_call_\w+_seconds)=\d+", r"\1=1", flags)
    out = subprocess.run([sys.executable, "-c", LATE_DEVICE], capture_output=True, text=True,
                         env={**os.environ, "XLA_FLAGS": short, "JAX_PLATFORMS": "cpu"},
                         timeout=120)
    assert out.returncode != 0 and "Termination timeout" in out.stderr, out.stderr[-2000:]
