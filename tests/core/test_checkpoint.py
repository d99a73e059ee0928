"""Checkpoints of replicated (data-parallel) state: saved from the host copy, restored as host
arrays of the template's shapes and dtypes, also from checkpoints that saved the devices' arrays;
the integrity policy (a refused step falls back to an older one and is kept aside) and the offline
verification command."""
import asyncio
import contextlib
import json
import logging
import os
import subprocess
import sys
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
import pytest
from etils import epath
from flax.training import train_state
from orbax.checkpoint._src.path import atomicity, temporary_paths

from experiments.checkpoints import report
from tests.conftest import ROOT
from tests.helpers import bucket  # noqa: F401 (a fixture)
from ttw_jax.core.train import data_parallel as dp
from ttw_jax.core.train.checkpoint import (CHECKSUM_KEY, MISMATCH, NO_CHECKSUM, OK, UNREADABLE,
                                           Checkpointer, checksum)


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


def test_restores_a_checkpoint_that_saved_the_devices_arrays(tmp_path, caplog):
    mesh = dp.make_mesh()
    state = replicated_state(mesh)
    manager = ocp.CheckpointManager(os.path.abspath(tmp_path), item_names=("train", "meta"))
    manager.save(5, args=ocp.args.Composite(train=ocp.args.StandardSave({"state": state}),
                                            meta=ocp.args.JsonSave({"step": 5})))
    manager.wait_until_finished()
    manager.close()
    ckpt = Checkpointer(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="absl"):
        trees, meta = ckpt.restore_latest({"state": state})
    ckpt.close()
    assert meta == {"step": 5}
    assert_same(trees["state"], state)
    # no checksum anywhere (a legacy run): restored, with a warning that it is unverified
    assert "checkpoint 5" in caplog.text and "unverified" in caplog.text
    assert sorted(os.listdir(tmp_path)) == ["5"]


def test_a_checkpoint_whose_content_changed_falls_back_to_the_older_one(tmp_path):
    """The SHA-256 saved with a step covers its arrays and its bookkeeping: a step whose meta (or
    arrays) decode but differ from what was saved is skipped, named in the log, and kept aside."""
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
    assert sorted(os.listdir(tmp_path)) == ["1", "2.corrupt-mismatch"]
    # the digest depends on every value, dtype, shape and leaf name
    tree = {"w": np.arange(4, dtype=np.float32)}
    base = checksum(tree, {"step": 1})
    assert base != checksum({"w": np.arange(4, dtype=np.float64)}, {"step": 1})
    assert base != checksum({"v": np.arange(4, dtype=np.float32)}, {"step": 1})
    assert base != checksum({"w": np.arange(4, dtype=np.float32).reshape(2, 2)}, {"step": 1})
    assert base != checksum(tree, {"step": 2}) and CHECKSUM_KEY.startswith("_")
    # ... but not on the containers: a train state hashes as the dicts orbax restores it into
    state = train_state.TrainState.create(apply_fn=None, params=tree, tx=optax.sgd(0.1))
    as_dicts = {"opt_state": [None, None], "params": tree, "step": np.asarray(0, np.int32)}
    assert checksum(state.replace(step=np.asarray(0, np.int32)), {}) == checksum(as_dicts, {})


def save_steps(directory, steps=(1, 2)):
    ckpt = Checkpointer(str(directory))
    for step in steps:
        ckpt.save(step, {"w": np.full(4, float(step), np.float32)}, {"step": step})
    ckpt.close()


def edit_meta(step_dir, edit):
    """Rewrites the bookkeeping of a saved step through `edit(meta dict) -> meta dict`."""
    path = epath.Path(step_dir) / "meta" / "metadata"
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))


def without_checksum(meta):
    return {k: v for k, v in meta.items() if k != CHECKSUM_KEY}


def swap_arrays(checkpoints, step: int, other: int):
    """Step `step`'s arrays replaced by step `other`'s, files and all: orbax decodes them as
    any checkpoint, and the content differs from the SHA-256 saved with `step`. (Flipped bytes
    in a data file were decoded silently by one run and refused by zstd in another.)"""
    import shutil
    shutil.rmtree(checkpoints / str(step) / "train")
    shutil.copytree(checkpoints / str(other) / "train", checkpoints / str(step) / "train")


def restore(directory, read_only=False):
    ckpt = Checkpointer(str(directory), read_only=read_only)
    try:
        return ckpt.restore_latest({"w": np.zeros(4, np.float32)})
    finally:
        ckpt.close()


def test_a_run_that_writes_checksums_refuses_a_step_without_one(tmp_path, caplog):
    """A step whose checksum was removed is refused when another step carries one, named in the
    log, and the run takes the older verified step (the same trees and bookkeeping as when that
    step is the newest); a lone such step, marked as checksummed in orbax's step metadata, is
    refused too: the error names the directory and the step."""
    save_steps(tmp_path / "a")
    save_steps(tmp_path / "ref", steps=(1,))
    edit_meta(tmp_path / "a" / "2", without_checksum)
    for step in ("1", "2"):   # as saved before the mark: step 1's checksum is the evidence
        path = tmp_path / "a" / step / "_CHECKPOINT_METADATA"
        path.write_text(json.dumps({**json.loads(path.read_text()), "custom_metadata": {}}))
    with caplog.at_level(logging.WARNING, logger="absl"):
        trees, meta = restore(tmp_path / "a", read_only=True)
    ref_trees, ref_meta = restore(tmp_path / "ref")
    assert meta == ref_meta == {"step": 1}
    np.testing.assert_array_equal(trees["w"], ref_trees["w"])
    assert f"checkpoint 2 in {tmp_path / 'a'} refused (no checksum" in caplog.text
    assert sorted(os.listdir(tmp_path / "a")) == ["1", "2"]   # read-only: nothing moved
    save_steps(tmp_path / "lone", steps=(3,))
    edit_meta(tmp_path / "lone" / "3", without_checksum)
    with pytest.raises(RuntimeError, match=rf"no checkpoint in {tmp_path / 'lone'} restores: "
                                           r"step 3: no checksum"):
        restore(tmp_path / "lone")
    assert sorted(os.listdir(tmp_path / "lone")) == ["3"]     # no fallback: nothing moved


def files_under(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_refused_step_is_kept_aside_where_orbax_neither_lists_nor_removes_it(tmp_path):
    save_steps(tmp_path)
    edit_meta(tmp_path / "2", lambda m: {**m, "step": 7})
    damaged = files_under(tmp_path / "2")
    assert restore(tmp_path)[1] == {"step": 1}
    aside = tmp_path / "2.corrupt-mismatch"
    kept = files_under(aside)
    assert {k: v for k, v in kept.items() if k != "set_aside.txt"} == damaged   # the evidence
    assert "step 2" in kept["set_aside.txt"].decode() and MISMATCH in kept["set_aside.txt"].decode()
    # not a temporary folder to orbax's cleanup, locally nor on a bucket (its commit marker kept)
    for cls in (atomicity.AtomicRenameTemporaryPath, atomicity.CommitFileTemporaryPath):
        assert not asyncio.run(temporary_paths.is_path_temporary(aside, temporary_path_cls=cls))
    ckpt = Checkpointer(str(tmp_path), max_to_keep=2)
    assert ckpt.manager.all_steps() == [1]
    for step in (2, 3, 4):   # step 2 written again beside it; max_to_keep removes 1 and 2
        ckpt.save(step, {"w": np.full(4, float(step), np.float32)}, {"step": step})
    assert ckpt.restore_latest({"w": np.zeros(4, np.float32)})[1] == {"step": 4}
    ckpt.close()
    assert sorted(os.listdir(tmp_path)) == ["2.corrupt-mismatch", "3", "4"]
    assert files_under(aside) == kept
    # refused again: kept beside the first
    edit_meta(tmp_path / "4", lambda m: {**m, "step": 7})
    assert restore(tmp_path)[1] == {"step": 3}
    assert sorted(os.listdir(tmp_path)) == ["2.corrupt-mismatch", "3", "4.corrupt-mismatch"]


@pytest.mark.parametrize("how", ["rename", "copy"])
def test_a_refused_step_is_kept_aside_on_a_bucket(bucket, how):   # noqa: F811 (a fixture)
    """On `gs://` through etils.epath: its rename (copy + delete on a bucket), or where a backend
    cannot rename a folder, a copy of each file, then a delete."""
    url, local = "gs://b/run/checkpoints", bucket / "b" / "run" / "checkpoints"
    save_steps(url)
    edit_meta(local / "2", lambda m: {**m, "step": 7})
    damaged = files_under(local / "2")
    with mock.patch.object(type(epath.Path(url)), "rename", side_effect=NotImplementedError) \
            if how == "copy" else contextlib.nullcontext():
        assert restore(url)[1] == {"step": 1}
    kept = files_under(local / "2.corrupt-mismatch")
    assert {k: v for k, v in kept.items() if k != "set_aside.txt"} == damaged
    assert sorted(os.listdir(local)) == ["1", "2.corrupt-mismatch"]
    ckpt = Checkpointer(url)   # its cleanup of temporary folders leaves it alone
    ckpt.save(2, {"w": np.full(4, 2.0, np.float32)}, {"step": 2})
    ckpt.close()
    assert sorted(os.listdir(local)) == ["1", "2", "2.corrupt-mismatch"]
    text, bad = report("gs://b/run")   # the offline verification of a run on a bucket
    assert bad == 0 and text.count(f": {OK}") == 2 and "kept aside: 2.corrupt-mismatch" in text


def test_the_offline_verification_restores_as_saved_and_names_every_bad_step(tmp_path):
    """`python -m experiments.checkpoints`: every step of every run under a sweep's workdir,
    restored without a template (a train state with a Python-scalar step hashes as saved)."""
    state = train_state.TrainState.create(
        apply_fn=None, params={"w": np.arange(2048, dtype=np.float32), "b": np.ones(3, np.int32)},
        tx=optax.adam(1e-3))
    assert isinstance(state.step, int)
    good, flipped, stripped = (tmp_path / "s0", tmp_path / "s1" / "tourist", tmp_path / "s2")
    for run in (good, flipped, stripped):
        ckpt = Checkpointer(str(run / "checkpoints"))
        for step in (5, 10):
            s = state.replace(step=step, params={**state.params, "w": state.params["w"] * step})
            ckpt.save(step, {"state": s, "best_params": s.params}, {"step": step})
        ckpt.close()
    text, bad = report(str(good))
    assert bad == 0 and text.count(f": {OK}") == 2, text
    swap_arrays(flipped / "checkpoints", 10, 5)
    edit_meta(stripped / "checkpoints" / "10", without_checksum)
    legacy = ocp.CheckpointManager(tmp_path / "s3" / "checkpoints", item_names=("train", "meta"))
    for step in (1, 2):   # written before checksums: unverified, not bad
        legacy.save(step, args=ocp.args.Composite(train=ocp.args.StandardSave({"w": np.ones(2)}),
                                                  meta=ocp.args.JsonSave({"step": step})))
    legacy.wait_until_finished()
    legacy.close()
    out = subprocess.run([sys.executable, "-m", "experiments.checkpoints",
                          f"--workdir={tmp_path}"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"{good / 'checkpoints'}: 2 steps" and lines[1:3] == [
        "  step 10: ok", "  step 5: ok"]
    assert f"  step 10: {MISMATCH} (its content does not match the SHA-256 saved with it)" in lines
    assert any(line.startswith(f"  step 10: {NO_CHECKSUM} (") and "writes checksums" in line
               for line in lines)
    assert sum(line.startswith(f"  step {s}: {NO_CHECKSUM}") and "unverified" in line
               for line in lines for s in (1, 2)) == 2
    assert lines[-1] == ("8 steps in 4 checkpoints folders: 2 bad, 2 unverified (no checksum, "
                         "legacy), 4 ok")
    # a step orbax cannot decode; a workdir without checkpoints is an error too
    for p in (good / "checkpoints" / "5" / "meta").rglob("*"):
        if p.is_file():
            p.write_text("{not json")
    text, bad = report(str(good / "checkpoints"))
    assert bad == 1 and f"step 5: {UNREADABLE} (" in text, text
    assert report(str(tmp_path / "nothing")) == (f"no checkpoints folder at or under "
                                                 f"{tmp_path / 'nothing'}", 1)
