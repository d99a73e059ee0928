"""Progress reports that suit where the output goes: tqdm's bar on a terminal, and one log line
every `interval` seconds (and at the end) when stderr is a file, a pipe or a batch scheduler's
log, where a bar's carriage returns would pile up into one line of hundreds of kilobytes.

    bar = progress(total=n, desc="train")            # or progress(iterable, desc=...)
    bar.update(k); bar.set_postfix(loss="0.123"); bar.close()

`TTW_JAX_PROGRESS=bar` or `=lines` overrides the choice.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Iterable

from absl import logging

ENV = "TTW_JAX_PROGRESS"


def _scaled(x: float, unit_scale: bool) -> str:
    if not unit_scale:
        return f"{x:,.0f}"
    for prefix in ("", "k", "M", "G", "T"):
        if abs(x) < 1000 or prefix == "T":
            return f"{x:.1f}{prefix}" if prefix else f"{x:.0f}"
        x /= 1000.0
    return f"{x}"


class LogLines:
    """The part of tqdm's interface this project uses (iteration, `update`, `set_postfix`,
    `close`), written as a log line at most every `interval` seconds and once at the end."""

    def __init__(self, iterable: Iterable | None = None, total: float | None = None,
                 initial: float = 0, desc: str = "", unit: str = "it",
                 unit_scale: bool = False, interval: float = 30.0, **_: Any):
        self.iterable = iterable
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.total, self.n, self.desc, self.unit = total, initial, desc, unit
        self.unit_scale, self.interval = unit_scale, interval
        self.postfix: dict = {}
        self.lines = 0                        # log lines written
        self._start = self._last = time.monotonic()
        self._start_n = initial
        self._closed = False

    def __iter__(self):
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def update(self, n: float = 1) -> None:
        self.n += n
        if time.monotonic() - self._last >= self.interval:
            self._log()

    def set_postfix(self, **kwargs: Any) -> None:
        self.postfix = kwargs

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._log()

    def _log(self) -> None:
        now = time.monotonic()
        self._last = now
        rate = (self.n - self._start_n) / max(now - self._start, 1e-9)
        of = f"/{_scaled(self.total, self.unit_scale)}" if self.total else ""
        extra = "".join(f", {k}={v}" for k, v in self.postfix.items())
        logging.info("%s: %s%s %s (%s %s/s, %.0f s)%s", self.desc or "progress",
                     _scaled(self.n, self.unit_scale), of, self.unit,
                     _scaled(rate, self.unit_scale) if self.unit_scale else f"{rate:.3g}",
                     self.unit, now - self._start, extra)
        self.lines += 1


def use_bar(stream=None) -> bool:
    """Whether to draw tqdm's bar: `TTW_JAX_PROGRESS` if set (`bar` | `lines`), else whether
    `stream` (stderr) is a terminal."""
    choice = os.environ.get(ENV, "").strip().lower()
    if choice in ("bar", "lines"):
        return choice == "bar"
    if choice:
        raise ValueError(f"{ENV}={choice!r}: expected 'bar' or 'lines'")
    stream = sys.stderr if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def progress(iterable: Iterable | None = None, **kwargs: Any):
    """tqdm(iterable, **kwargs) on a terminal, else `LogLines` with the same arguments."""
    if use_bar():
        from tqdm import tqdm
        kwargs.pop("interval", None)
        return tqdm(iterable, **kwargs)
    return LogLines(iterable, **kwargs)
