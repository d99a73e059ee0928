"""Process-0 metric logging: TensorBoard event files (tensorboardX) and a JSON-lines history."""
from __future__ import annotations

import json
import os

import jax


class MetricWriter:
    """Writes scalars to `<workdir>/tensorboard` and `<workdir>/metrics.jsonl` on process 0 only.

    `truncate_after(step)` drops history lines past a restored checkpoint, so a resumed run's
    history is the same as an uninterrupted one.
    """

    def __init__(self, workdir: str):
        self.active = jax.process_index() == 0
        self.path = os.path.join(workdir, "metrics.jsonl")
        self._tb = None
        if self.active:
            from tensorboardX import SummaryWriter
            os.makedirs(workdir, exist_ok=True)
            self._tb = SummaryWriter(os.path.join(workdir, "tensorboard"))

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
            return [json.loads(line) for line in f if line.strip()]

    def truncate_after(self, step: int) -> None:
        if not self.active:
            return
        kept = [h for h in self.history() if h["step"] <= step]
        with open(self.path, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(h) + "\n" for h in kept)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
