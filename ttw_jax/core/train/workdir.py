"""A run's working directory: the config it was started with, checked on resume."""
from __future__ import annotations

import json
from typing import Sequence

import jax
import ml_collections

from ttw_jax.core import paths


def flatten(d: dict, prefix: str = "") -> dict:
    """{'a': {'b': 1}} -> {'a.b': 1}."""
    out = {}
    for k, v in d.items():
        out.update(flatten(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def write_json(path: paths.PathLike, obj, **kw) -> None:
    """json.dump to `path` atomically (`paths.write_text`), so a process reading it while
    another writes never sees half a file."""
    paths.write_text(path, json.dumps(obj, **kw))


def check_workdir_config(config: ml_collections.ConfigDict, workdir: paths.PathLike,
                         resumable: Sequence[str] = ()) -> None:
    """Records the config in `<workdir>/config.json`; refuses to resume a run whose config differs
    in anything but the keys starting with one of `resumable`."""
    path = paths.resolve(workdir) / "config.json"
    current = json.loads(config.to_json())
    if path.exists():
        saved = flatten(json.loads(path.read_text(encoding="utf-8")))
        new = flatten(current)
        diff = [f"{k}: {saved.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(saved) | set(new))
                if saved.get(k) != new.get(k) and not k.startswith(tuple(resumable))]
        if diff:
            raise ValueError(f"{workdir} holds a run with another config ({'; '.join(diff)}); "
                             "resume it with the same config or choose a new --workdir")
    if jax.process_index() == 0:
        write_json(path, current, indent=2)


def write_results(workdir: paths.PathLike, results: dict, summary: str) -> None:
    """Process 0 writes `<workdir>/results.json` and prints the human-readable `summary`."""
    if jax.process_index() == 0:
        write_json(paths.resolve(workdir) / "results.json", results, indent=2)
        print(summary)
