"""Process-0 metric logging: TensorBoard event files (tensorboardX) and a JSON-lines history."""
from __future__ import annotations

import json
import os

import jax
from absl import logging


class MetricWriter:
    """Writes scalars to `<workdir>/tensorboard` and `<workdir>/metrics.jsonl` on process 0 only.

    `truncate_after(step)` drops history lines past a restored checkpoint, so a resumed run's
    history is the same as an uninterrupted one. A torn last line (a process killed mid-write) is
    dropped with a warning; a malformed line anywhere else is an error naming the file and line.
    `flush()` pushes TensorBoard's buffered events to disk (the loop calls it at every checkpoint).
    """

    def __init__(self, workdir: str):
        self.active = jax.process_index() == 0
        self.path = os.path.join(workdir, "metrics.jsonl")
        self._tb = None
        self._tb_dir = os.path.join(workdir, "tensorboard")
        self._files = 0
        if self.active:
            os.makedirs(workdir, exist_ok=True)
            self._open_tb()

    def _open_tb(self) -> None:
        from tensorboardX import SummaryWriter
        # One event file per writer session; the suffix keeps two opened in one second apart.
        self._files += 1
        self._tb = SummaryWriter(self._tb_dir, filename_suffix=f".{os.getpid()}.{self._files}")

    def write(self, step: int, scalars: dict) -> None:
        if not self.active:
            return
        scalars = {k: float(v) for k, v in scalars.items()}
        for k, v in scalars.items():
            self._tb.add_scalar(k, v, step)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"step": step, **scalars}) + "\n")

    def write_summary(self, step: int, scalars: dict) -> None:
        """Final figures (test accuracy, bounds, ...) to TensorBoard only: the JSON history
        keeps the training curve."""
        if self.active:
            for k, v in scalars.items():
                self._tb.add_scalar(k, float(v), step)

    def history(self) -> list[dict]:
        if not os.path.exists(self.path):
            return []
        with open(self.path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        out = []
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                if i == len(lines) - 1:   # no newline after it: the write was cut short
                    logging.warning("%s: dropping the torn last line %d (%r)", self.path, i + 1,
                                    line[:80])
                    continue
                raise ValueError(f"{self.path}, line {i + 1}: not a JSON record ({e})") from e
        return out

    def truncate_after(self, step: int) -> None:
        if not self.active:
            return
        kept = [h for h in self.history() if h["step"] <= step]
        with open(self.path, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(h) + "\n" for h in kept)

    def flush(self) -> None:
        """Puts every event written so far on disk. tensorboardX queues events for a background
        thread and its `flush` does not wait for that queue, so the file is closed (which drains
        it) and the next events go to a new file of the same run."""
        if self._tb is not None:
            self._tb.close()
            self._open_tb()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
