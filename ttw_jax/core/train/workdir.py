"""A run's working directory: the config it was started with, checked on resume."""
from __future__ import annotations

import json
import os
from typing import Sequence

import jax
import ml_collections


def flatten(d: dict, prefix: str = "") -> dict:
    """{'a': {'b': 1}} -> {'a.b': 1}."""
    out = {}
    for k, v in d.items():
        out.update(flatten(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def write_json(path: str, obj, **kw) -> None:
    """json.dump to `path` atomically (a temporary file renamed over it), so a process reading
    it while another writes never sees half a file."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, **kw)
    os.replace(tmp, path)


def check_workdir_config(config: ml_collections.ConfigDict, workdir: str,
                         resumable: Sequence[str] = ()) -> None:
    """Records the config in `<workdir>/config.json`; refuses to resume a run whose config differs
    in anything but the keys starting with one of `resumable`."""
    path = os.path.join(workdir, "config.json")
    current = json.loads(config.to_json())
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            saved = flatten(json.load(f))
        new = flatten(current)
        diff = [f"{k}: {saved.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(saved) | set(new))
                if saved.get(k) != new.get(k) and not k.startswith(tuple(resumable))]
        if diff:
            raise ValueError(f"{workdir} holds a run with another config ({'; '.join(diff)}); "
                             "resume it with the same config or choose a new --workdir")
    if jax.process_index() == 0:
        write_json(path, current, indent=2)


def write_results(workdir: str, results: dict, summary: str) -> None:
    """Process 0 writes `<workdir>/results.json` and prints the human-readable `summary`."""
    if jax.process_index() == 0:
        write_json(os.path.join(workdir, "results.json"), results, indent=2)
        print(summary)
