"""A run's working directory: the config it was started with, checked on resume."""
from __future__ import annotations

import json
from typing import Sequence

import jax
import ml_collections

from ttw_jax.core import paths
from ttw_jax.core.train.precision import check_dtype


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


# Keys any run may change when it resumes: what it observes, not what it computes.
ALWAYS_RESUMABLE = ("profile_steps",)
# Keys added to every config after runs were written without them: {key: the value they meant}.
ADDED_KEYS = {"num_seeds": 1, "num_devices": 0}
# Config leaves (by their last name, at any depth) every trainer needs positive, or >= 0.
POSITIVE_KEYS = ("batch_size", "eval_every", "log_every", "sdr_batch_size")
NON_NEGATIVE_KEYS = ("num_steps", "num_epochs", "num_devices")
# Sizes of a model (`model.<name>`) that must be positive.
MODEL_SIZE_KEYS = ("features", "hidden", "embed_dim", "action_dim", "conv_features", "text_hidden",
                   "channels", "mlp_hidden", "text_embed", "kernel", "stride", "levels")


def check_common(config: ml_collections.ConfigDict) -> None:
    """One ValueError naming every sizing key out of range: a `batch_size` / `eval_every` /
    `log_every` (any section) or a model size (`model.hidden`, ...) below 1, a `num_steps` /
    `num_epochs` below 0, a `profile_steps` that is not two step numbers "FIRST,LAST" (see
    `profile_window`), a `dtype` not in `precision.DTYPES`."""
    bad = []
    for key, value in flatten(config.to_dict()).items():
        name = key.rsplit(".", 1)[-1]
        positive = name in POSITIVE_KEYS or (key.startswith("model.") and name in MODEL_SIZE_KEYS
                                             and not isinstance(value, str))
        low = 1 if positive else 0 if name in NON_NEGATIVE_KEYS else None
        if low is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            bad.append(f"{key}={value!r} (needs an integer >= {low})")
    for check, key in ((profile_window, "profile_steps"), (check_dtype, "dtype")):
        if key in config:
            try:
                check(config[key])
            except ValueError as e:
                bad.append(str(e))
    if bad:
        raise ValueError("config: " + "; ".join(bad))


def profile_window(spec: str) -> tuple[int, int] | None:
    """(first, last) training steps of `config.profile_steps`: two step numbers "FIRST,LAST",
    1-based and inclusive ("21,22" traces steps 21 and 22; "" none); ValueError naming the form,
    an example and the value otherwise."""
    if not spec:
        return None
    try:
        first, last = (int(x) for x in str(spec).split(","))
    except ValueError:
        first = last = 0
    if not 1 <= first <= last:
        raise ValueError("profile_steps must be two step numbers 'FIRST,LAST' (1-based, inclusive, "
                         f"FIRST <= LAST), e.g. '21,22'; or '' for none; got {spec!r}")
    return first, last


def holds_work(workdir: paths.PathLike) -> bool:
    """True when `workdir` or a stage folder in it (one level down) holds a metric line, a
    checkpoint or results: a run that did some work, which only the same config may resume."""
    def work_in(folder) -> bool:
        ckpts = folder / "checkpoints"
        metrics = folder / "metrics.jsonl"
        return ((folder / "results.json").exists()
                or (metrics.exists() and metrics.stat().length > 0)
                or (ckpts.is_dir() and any(ckpts.iterdir())))

    root = paths.resolve(workdir)
    if not root.is_dir():
        return False
    return work_in(root) or any(work_in(p) for p in root.iterdir()
                                if p.is_dir() and p.name != "checkpoints")


def check_workdir_config(config: ml_collections.ConfigDict, workdir: paths.PathLike,
                         resumable: Sequence[str] = ()) -> None:
    """Checks the common sizing keys (`check_common`) before anything is written, then creates
    `workdir` and records the config in `<workdir>/config.json`; refuses to resume a run whose
    config differs in anything but the keys starting with one of `resumable`. A workdir whose
    earlier run did no work (`holds_work`: e.g. it stopped at a config error) takes the new
    config."""
    check_common(config)
    paths.resolve(workdir).mkdir(parents=True, exist_ok=True)
    path = paths.resolve(workdir) / "config.json"
    current = json.loads(config.to_json())
    if path.exists():
        saved = flatten(json.loads(path.read_text(encoding="utf-8")))
        new = flatten(current)
        for k, v in ADDED_KEYS.items():
            if k in new and k not in saved:
                saved[k] = v
        diff = [f"{k}: {saved.get(k)!r} -> {new.get(k)!r}" for k in sorted(set(saved) | set(new))
                if saved.get(k) != new.get(k)
                and not k.startswith(tuple(resumable) + ALWAYS_RESUMABLE)]
        if diff and holds_work(workdir):
            raise ValueError(f"{workdir} holds a run with another config ({'; '.join(diff)}); "
                             "resume it with the same config or choose a new --workdir")
    if jax.process_index() == 0:
        write_json(path, current, indent=2)


def write_results(workdir: paths.PathLike, results: dict, summary: str) -> None:
    """Process 0 writes `<workdir>/results.json` and prints the human-readable `summary`."""
    if jax.process_index() == 0:
        write_json(paths.resolve(workdir) / "results.json", results, indent=2)
        print(summary)
