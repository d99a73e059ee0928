"""Process-0 metric logging: TensorBoard event files (tensorboardX) and a JSON-lines history."""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import weakref

import jax
from absl import logging

from ttw_jax.core import paths


HISTORY = "metrics.jsonl"      # a run folder's (or stage folder's) JSON-lines history


def parse_history(text: str, path) -> list[dict]:
    """The records of a history's `text` (from file `path`, named in errors): a torn last line
    (a process killed mid-write) is dropped with a warning; a malformed line anywhere else is a
    ValueError naming the file and line."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            if i == len(lines) - 1:   # no newline after it: the write was cut short
                logging.warning("%s: dropping the torn last line %d (%r)", path, i + 1,
                                line[:80])
                continue
            raise ValueError(f"{path}, line {i + 1}: not a JSON record ({e})") from e
    return out


def read_history(workdir: paths.PathLike) -> list[dict]:
    """The records of `<workdir>/metrics.jsonl` ([] when there is none), as `parse_history`."""
    path = paths.resolve(workdir) / HISTORY
    return parse_history(path.read_text(encoding="utf-8") if path.exists() else "", path)


_TAG = re.compile(r"[\w./-]+")   # the names TensorBoard keeps as they are (tensorboardX)


def check_names(scalars: dict) -> None:
    """ValueError naming any scalar TensorBoard would rename (`acc@40` -> `acc_40`, with a
    warning per write), so results.json, metrics.jsonl and TensorBoard use one name."""
    bad = sorted(k for k in scalars if not _TAG.fullmatch(k))
    if bad:
        raise ValueError(f"metric names {bad} are not TensorBoard tags (letters, digits, '_', "
                         "'.', '-', '/')")


class MetricWriter:
    """Writes scalars to `<workdir>/tensorboard` and `<workdir>/metrics.jsonl` on process 0 only.

    `truncate_after(step)` drops history lines past a restored checkpoint, so a resumed run's
    history is the same as an uninterrupted one. A torn last line (a process killed mid-write) is
    dropped with a warning; a malformed line anywhere else is an error naming the file and line.
    `flush()` pushes TensorBoard's buffered events to disk (the loop calls it at every checkpoint).

    On a remote workdir (`gs://...`, which cannot append) the history lines and event files are
    kept locally and copied there at every `flush()` and at `close()`: what a preempted run loses
    is past its last checkpoint, which a resumed run drops anyway.
    """

    def __init__(self, workdir: paths.PathLike):
        self.active = jax.process_index() == 0
        workdir = paths.resolve(workdir)
        self.path = workdir / HISTORY
        self._remote = paths.is_uri(workdir)
        self._tb = None
        self._tb_dir = workdir / "tensorboard"
        self._local_tb = None
        self._pending: list[str] = []   # remote: history lines not yet copied to `path`
        self._files = 0
        self._copied: set[str] = set()
        if self.active:
            workdir.mkdir(parents=True, exist_ok=True)
            if self._remote:   # removed at close(), or when a run dropped it (an exception)
                self._local_tb = tempfile.mkdtemp(prefix="ttw_tensorboard_")
                self._remove_local = weakref.finalize(self, shutil.rmtree, self._local_tb, True)
            self._open_tb()

    def _open_tb(self) -> None:
        from tensorboardX import SummaryWriter
        # One event file per writer session; the suffix keeps two opened in one second apart.
        self._files += 1
        self._tb = SummaryWriter(self._local_tb or os.fspath(self._tb_dir),
                                 filename_suffix=f".{os.getpid()}.{self._files}")

    def write(self, step: int, scalars: dict) -> None:
        if not self.active:
            return
        scalars = {k: float(v) for k, v in scalars.items()}
        check_names(scalars)
        for k, v in scalars.items():
            self._tb.add_scalar(k, v, step)
        line = json.dumps({"step": step, **scalars}) + "\n"
        if self._remote:
            self._pending.append(line)
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)

    def write_summary(self, step: int, scalars: dict) -> None:
        """Final figures (test accuracy, bounds, ...) to TensorBoard only: the JSON history
        keeps the training curve."""
        if self.active:
            check_names(scalars)
            for k, v in scalars.items():
                self._tb.add_scalar(k, float(v), step)

    def history(self) -> list[dict]:
        text = self.path.read_text(encoding="utf-8") if self.path.exists() else ""
        return parse_history(text + "".join(self._pending), self.path)

    def truncate_after(self, step: int) -> None:
        if not self.active:
            return
        kept = [h for h in self.history() if h["step"] <= step]
        self._pending = []
        paths.write_text(self.path, "".join(json.dumps(h) + "\n" for h in kept))

    def flush(self) -> None:
        """Puts every event written so far on disk. tensorboardX queues events for a background
        thread and its `flush` does not wait for that queue, so the file is closed (which drains
        it) and the next events go to a new file of the same run."""
        if self._tb is not None:
            self._tb.close()
            self._copy_out()
            self._open_tb()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
            self._copy_out()
            if self._local_tb:
                self._remove_local()
            self._tb = None

    def _copy_out(self) -> None:
        """Remote workdir: the pending history lines and the closed event files to `workdir`."""
        if not self._remote:
            return
        if self._pending:
            old = self.path.read_text(encoding="utf-8") if self.path.exists() else ""
            paths.write_text(self.path, old + "".join(self._pending))
            self._pending = []
        self._tb_dir.mkdir(parents=True, exist_ok=True)
        for name in sorted(set(os.listdir(self._local_tb)) - self._copied):
            with open(os.path.join(self._local_tb, name), "rb") as f:   # closed: final
                paths.write_bytes(self._tb_dir / name, f.read())
            self._copied.add(name)
