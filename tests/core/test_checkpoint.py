"""Checkpoints of replicated (data-parallel) state: saved from the host copy, restored as host
arrays of the template's shapes and dtypes, also from checkpoints that saved the devices' arrays."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from flax.training import train_state

from ttw_jax.core.train import data_parallel as dp
from ttw_jax.core.train.checkpoint import CHECKSUM_KEY, Checkpointer, checksum


def replicated_state(mesh):
    params = {"w": jnp.arange(6.0).reshape(2, 3), "b": jnp.ones((3,), jnp.bfloat16)}
    state = train_state.TrainState.create(apply_fn=None, params=params, tx=optax.adam(1e-3))
    return dp.replicate(state.replace(step=jnp.asarray(7)), mesh)


def assert_same(restored, expected):
    for r, e in zip(jax.tree_util.tree_leaves(restored), jax.tree_util.tree_leaves(expected)):
        assert isinstance(r, np.ndarray) and r.dtype == e.dtype and r.shape == e.shape
        np.testing.assert_array_equal(r, np.asarray(e))


def test_replicated_state_round_trips_through_host_arrays(tmp_path):
    mesh = dp.make_mesh()
    state = replicated_state(mesh)
    ckpt = Checkpointer(str(tmp_path))
    host_counts = np.arange(3, dtype=np.int64)   # a host leaf keeps its own dtype
    ckpt.save(3, {"state": state, "counts": host_counts}, {"step": 3, "best_eval": {"acc": 0.25}})
    template = train_state.TrainState.create(apply_fn=None, params=jax.device_get(state.params),
                                             tx=optax.adam(1e-3))
    trees, meta = ckpt.restore_latest({"state": template, "counts": np.zeros(3, np.int64)})
    ckpt.close()
    assert meta == {"step": 3, "best_eval": {"acc": 0.25}}
    assert int(trees["state"].step) == 7
    assert_same(trees["state"], state)
    assert_same(trees["counts"], host_counts)
    placed = dp.replicate(trees["state"], mesh)
    assert placed.params["w"].sharding.is_fully_replicated


def test_restores_a_checkpoint_that_saved_the_devices_arrays(tmp_path):
    mesh = dp.make_mesh()
    state = replicated_state(mesh)
    manager = ocp.CheckpointManager(os.path.abspath(tmp_path), item_names=("train", "meta"))
    manager.save(5, args=ocp.args.Composite(train=ocp.args.StandardSave({"state": state}),
                                            meta=ocp.args.JsonSave({"step": 5})))
    manager.wait_until_finished()
    manager.close()
    ckpt = Checkpointer(str(tmp_path))
    trees, meta = ckpt.restore_latest({"state": state})
    ckpt.close()
    assert meta == {"step": 5}
    assert_same(trees["state"], state)


def test_a_checkpoint_whose_content_changed_falls_back_to_the_older_one(tmp_path):
    """The SHA-256 saved with a step covers its arrays and its bookkeeping: a step whose meta (or
    arrays) decode but differ from what was saved is skipped, named in the log, and deleted."""
    ckpt = Checkpointer(str(tmp_path))
    for step in (1, 2):
        ckpt.save(step, {"w": np.full(4, float(step), np.float32)}, {"step": step})
    ckpt.close()
    meta_files = [p for p in (tmp_path / "2" / "meta").rglob("*")
                  if p.is_file() and "step" in p.read_text()]
    assert meta_files
    for p in meta_files:   # valid JSON, another value
        p.write_text(p.read_text().replace('"step": 2', '"step": 3'))
    ckpt = Checkpointer(str(tmp_path))
    trees, meta = ckpt.restore_latest({"w": np.zeros(4, np.float32)})
    ckpt.close()
    assert meta == {"step": 1} and float(trees["w"][0]) == 1.0
    assert sorted(os.listdir(tmp_path)) == ["1"]
    # the digest depends on every value, dtype, shape and leaf name
    tree = {"w": np.arange(4, dtype=np.float32)}
    base = checksum(tree, {"step": 1})
    assert base != checksum({"w": np.arange(4, dtype=np.float64)}, {"step": 1})
    assert base != checksum({"v": np.arange(4, dtype=np.float32)}, {"step": 1})
    assert base != checksum({"w": np.arange(4, dtype=np.float32).reshape(2, 2)}, {"step": 1})
    assert base != checksum(tree, {"step": 2}) and CHECKSUM_KEY.startswith("_")
