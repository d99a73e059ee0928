"""Orbax checkpoints of a training run: the train state, the best parameters and loop bookkeeping.

Integrity policy. `save` stores a SHA-256 of each step's arrays and bookkeeping (`checksum`, under
`CHECKSUM_KEY` in the bookkeeping) and marks the step as checksummed in orbax's own step metadata.
`restore_latest` takes the newest step that passes `Checkpointer.check`:

- ok: the content matches its SHA-256;
- mismatch: it decodes, but differs from what was saved (flipped bytes, edited bookkeeping);
- does not decode: orbax cannot read it (a truncated file, corrupt metadata);
- no checksum: refused when the run has written checksums (the step is marked as checksummed, or
  another step carries one); in a legacy directory with no checksum anywhere it restores
  unverified, with a warning.

A refused step is named in the log and the run falls back to the next older one; once one restores,
each refused step is set aside, not deleted: `<dir>/<step>` becomes `<dir>/<step>.corrupt-<status>`
(`ASIDE`; `-2`, `-3`, ... when taken) with a `set_aside.txt` saying why. Orbax neither lists nor
cleans up such a folder (its name is not a step's; it keeps the step's commit marker, which a
bucket's cleanup looks for), so the run writes that step again beside it and `max_to_keep` never
removes it. When no step restores, a RuntimeError names the directory and every step, and nothing
moves. Read-only restores (`restore_best_params`) refuse the same steps and move nothing.
`Checkpointer.verify` checks every step as saved, without a template (`python -m
experiments.checkpoints --workdir=...`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from typing import Any, Iterable

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from absl import logging
from etils import epath
from jax.experimental import multihost_utils

from ttw_jax.core import paths


CHECKSUM_KEY = "_sha256"   # in the saved bookkeeping: `checksum` of the step's content
ASIDE = ".corrupt-"        # a refused step's folder: <step>.corrupt-<status>
OK, NO_CHECKSUM, MISMATCH, UNREADABLE = "ok", "no checksum", "mismatch", "does not decode"


def _host_array(x) -> np.ndarray:
    """A leaf as the numpy array a restore gives back: a Python scalar takes JAX's dtype for it."""
    return np.asarray(x, getattr(x, "dtype", None) or jnp.result_type(x))


def _key_name(key) -> str:
    """A path entry as orbax names it: a dict key, an attribute or a sequence index."""
    for attr in ("key", "name", "idx"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def _digest(leaves: Iterable[tuple[str, Any]], meta: dict) -> str:
    h = hashlib.sha256()
    for name, leaf in leaves:
        a = np.ascontiguousarray(np.asarray(leaf))
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    h.update(json.dumps(meta, sort_keys=True, default=str).encode())
    return h.hexdigest()


def checksum(tree: Any, meta: dict) -> str:
    """SHA-256 of a pytree of arrays (each leaf's path, dtype, shape and bytes) and of the JSON
    bookkeeping (keys sorted). Leaves are named by their path ('state/params/w') and taken in the
    order of those names, so the digest does not depend on the containers: a train state and the
    nested dicts that orbax restores without a template hash alike."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return _digest(sorted(("/".join(_key_name(k) for k in path), leaf) for path, leaf in leaves),
                   meta)


def _tree_order_checksum(tree: Any, meta: dict) -> str:
    """The digest of checkpoints saved before `checksum` sorted its leaves (tree order, `keystr`
    names): still accepted, where the restored tree has the saved containers."""
    return _digest(((jax.tree_util.keystr(path), leaf)
                    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]), meta)


@dataclasses.dataclass(frozen=True)
class StepCheck:
    """What `Checkpointer.check` found in one step: its status (OK, NO_CHECKSUM, MISMATCH,
    UNREADABLE), why, whether the policy refuses it, and the restored (trees, bookkeeping)."""
    step: int
    status: str
    detail: str = ""
    refused: bool = False
    train: Any = None
    meta: dict | None = None


def _copy_tree(src: epath.Path, dst: epath.Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for child in src.iterdir():
        if child.is_dir():
            _copy_tree(child, dst / child.name)
        else:
            child.copy(dst / child.name, overwrite=True)


def _move(src: epath.Path, dst: epath.Path) -> None:
    """Renames folder `src` to `dst` through `etils.epath` (on a bucket: each object copied, then
    deleted); where a backend cannot rename a folder, copies its files, then deletes the folder."""
    try:
        src.rename(dst)
        return
    except (OSError, NotImplementedError, ValueError) as e:
        logging.info("renaming %s failed (%s); copying it instead", src, e)
    _copy_tree(src, dst)
    src.rmtree()


class Checkpointer:
    """Saves {'state', 'best_params'} pytrees plus a JSON dict of loop bookkeeping per step.

    `restore_latest(template)` returns (pytrees, bookkeeping) of the newest complete checkpoint
    that passes the integrity policy (module docstring), or None when the directory holds none.
    Incomplete (killed mid-write) steps are ignored.

    The pytrees are data-parallel, i.e. replicated: they are saved and restored as host numpy
    arrays, which process 0 alone writes (orbax's numpy handler) and every process reads. That
    is ~6x faster than saving the 8-way replicated `jax.Array`s of an 8-device mesh, whose
    shards orbax inspects one by one. Callers place the restored trees on their mesh.
    """

    def __init__(self, directory: paths.PathLike, max_to_keep: int = 2, read_only: bool = False):
        options = (ocp.CheckpointManagerOptions(read_only=True) if read_only else
                   ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True,
                                                cleanup_tmp_directories=True))
        self.directory, self.read_only = paths.resolve(directory), read_only
        self.manager = ocp.CheckpointManager(self.directory, options=options,
                                             item_names=("train", "meta"))

    def save(self, step: int, train: Any, meta: dict) -> None:
        host = jax.tree_util.tree_map(_host_array, jax.device_get(train))
        meta = {**meta, CHECKSUM_KEY: checksum(host, meta)}
        self.manager.save(step, args=ocp.args.Composite(
            train=ocp.args.StandardSave(host), meta=ocp.args.JsonSave(meta)),
            custom_metadata={CHECKSUM_KEY: "sha256"})
        self.manager.wait_until_finished()

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def check(self, step: int, abstract: Any = None) -> StepCheck:
        """Restores `step` (host arrays shaped like `abstract`, or as saved when None) and checks
        it against its SHA-256; a NO_CHECKSUM step is not refused here (see `_policy`)."""
        try:
            out = self.manager.restore(step, args=ocp.args.Composite(
                train=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()))
            meta = dict(out["meta"])
            saved = meta.pop(CHECKSUM_KEY, None)
            matches = saved is not None and (saved == checksum(out["train"], meta)
                                             or saved == _tree_order_checksum(out["train"], meta))
        except Exception as e:   # orbax raises many kinds for a damaged step
            return StepCheck(step, UNREADABLE, f"{type(e).__name__}: {str(e)[:200]}", refused=True)
        if saved is None:
            return StepCheck(step, NO_CHECKSUM, "its bookkeeping carries no SHA-256",
                             train=out["train"], meta=meta)
        if not matches:
            return StepCheck(step, MISMATCH, "its content does not match the SHA-256 saved with it",
                             refused=True)
        return StepCheck(step, OK, train=out["train"], meta=meta)

    def _carries_checksum(self, step: int) -> bool:
        """Whether `step` was saved with a SHA-256: marked so in orbax's step metadata, or one
        in its bookkeeping (checkpoints from before the mark)."""
        try:
            if (self.manager.metadata(step).custom_metadata or {}).get(CHECKSUM_KEY):
                return True
            meta = ocp.JsonCheckpointHandler().restore(self.directory / str(step) / "meta")
            return CHECKSUM_KEY in meta
        except Exception:   # noqa: BLE001 -- a damaged step is no evidence either way
            return False

    def writes_checksums(self) -> bool:
        """Whether the run in this directory has written checksums (any step carries one)."""
        return any(self._carries_checksum(s) for s in self.manager.all_steps())

    def _policy(self, c: StepCheck, checksummed: bool) -> StepCheck:
        """`c` with a missing checksum refused in a run that writes checksums, and logged as
        unverified in a legacy one."""
        if c.status != NO_CHECKSUM:
            return c
        if checksummed:
            return dataclasses.replace(c, refused=True,
                                       detail=c.detail + ", in a run that writes checksums")
        logging.warning("checkpoint %d of %s carries no checksum (a legacy run): unverified",
                        c.step, self.directory)
        return dataclasses.replace(c, detail=c.detail + "; a legacy run: unverified")

    def verify(self) -> list[StepCheck]:
        """Every step checked as saved (no template), newest first, under the policy of
        `restore_latest`; the restored trees are not kept."""
        checksummed = self.writes_checksums()
        return [dataclasses.replace(self._policy(self.check(step), checksummed), train=None,
                                    meta=None)
                for step in sorted(self.manager.all_steps(), reverse=True)]

    def restore_latest(self, template: Any) -> tuple[Any, dict] | None:
        steps = sorted(self.manager.all_steps(), reverse=True)
        if not steps:
            return None
        # numpy leaves of the template's shapes and dtypes (np.empty touches no memory); a
        # Python scalar leaf (TrainState.step before the first update) takes JAX's dtype for it
        abstract = jax.tree_util.tree_map(
            lambda x: np.empty(np.shape(x), getattr(x, "dtype", None) or jnp.result_type(x)),
            template)
        refused, checksummed = [], None
        for step in steps:
            c = self.check(step, abstract)
            if c.status == NO_CHECKSUM and checksummed is None:
                checksummed = self.writes_checksums()
            c = self._policy(c, bool(checksummed))
            if not c.refused:
                break
            refused.append(c)
            logging.warning("checkpoint %d in %s refused (%s: %s); trying an older one",
                            step, self.directory, c.status, c.detail)
        else:
            raise RuntimeError(f"no checkpoint in {self.directory} restores: " + "; ".join(
                f"step {r.step}: {r.status} ({r.detail})" for r in refused))
        if refused:
            if not self.read_only:
                self._set_aside(refused)
            logging.warning("resuming from checkpoint %d of %s (newer ones were refused)",
                            step, self.directory)
        return c.train, c.meta

    def _set_aside(self, refused: list[StepCheck]) -> None:
        """Renames each refused step to `<step>.corrupt-<status>` (process 0; module docstring)."""
        if jax.process_index() == 0:
            for r in refused:
                base = f"{r.step}{ASIDE}{r.status.replace(' ', '-')}"
                dst, n = self.directory / base, 1
                while dst.exists():
                    n += 1
                    dst = self.directory / f"{base}-{n}"
                _move(self.directory / str(r.step), dst)
                when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
                paths.write_text(dst / "set_aside.txt", f"step {r.step} of {self.directory}, "
                                 f"set aside {when}: {r.status}: {r.detail}\n")
                logging.warning("checkpoint %d (%s) kept aside as %s", r.step, r.status, dst)
        if jax.process_count() > 1:
            multihost_utils.sync_global_devices("ttw_jax checkpoints set aside")
        self.manager.reload()

    def close(self) -> None:
        self.manager.close()


def restore_best_params(workdir: paths.PathLike, state: Any) -> tuple[Any, dict]:
    """(best parameters as host arrays, loop bookkeeping) of the newest checkpoint of the run in
    `workdir` (`<workdir>/checkpoints`, as `fit` writes it), read without touching the
    directory (another process may still be training there); `state` is a train state of the
    run's shapes (its initial state will do). FileNotFoundError when there is none."""
    directory = paths.resolve(workdir) / "checkpoints"
    if not directory.is_dir():
        raise FileNotFoundError(f"no checkpoints in {directory}: train that run first")
    ckpt = Checkpointer(directory, read_only=True)
    try:
        restored = ckpt.restore_latest({"state": state, "best_params": state.params})
    finally:
        ckpt.close()
    if restored is None:
        raise FileNotFoundError(f"no complete checkpoint in {directory}: train that run first")
    return restored[0]["best_params"], restored[1]
