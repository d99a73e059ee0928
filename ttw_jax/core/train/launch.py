"""The absl entry point every experiment launcher shares: --config, --workdir, --multihost."""
from __future__ import annotations

import os
import signal
import sys
import types
from typing import Callable, Mapping, Sequence

from absl import app, flags, logging
from ml_collections import config_flags

import ttw_jax
from ttw_jax.core import paths
from ttw_jax.core.train.loop import PREPARE_ONLY_ENV, DataPrepared, Preempted
from ttw_jax.core.train.provenance import RENAMED_RESULT_KEYS


def _renamed_section(key: str, renamed: Mapping[str, str]) -> str | None:
    """The longest of `key` and its parent sections (`a.b.c`, `a.b`, `a`) that `renamed` holds."""
    parts = key.split(".")
    return next((old for old in (".".join(parts[:i]) for i in range(len(parts), 0, -1))
                 if old in renamed), None)


def renamed_flag_errors(argv: Sequence[str], renamed: Mapping[str, str]) -> list[str]:
    """One message per `--config.<old>` override in `argv` whose key (or a parent section of it)
    is in `renamed` ({old key: its replacement, or why it is gone})."""
    errors = []
    for arg in argv[1:]:
        if arg.startswith("--config."):
            key = arg[len("--config."):].split("=", 1)[0]
            old = _renamed_section(key, renamed)
            if old is not None:
                errors.append(f"--config.{key}: {old} is now {renamed[old]}")
    return errors


# The version that renamed the result keys of `provenance.RENAMED_RESULT_KEYS` (commit 13c5bd8):
# `--config.<...>metric=<old key>` is rewritten to the new one until the next version.
RESULT_KEYS_RENAMED_IN = "0.1.0"


def _current(renamed_in: str | None, version: str) -> bool:
    """Whether a rename of `renamed_in` is still accepted at `version` (same major.minor)."""
    return renamed_in is not None and renamed_in.split(".")[:2] == version.split(".")[:2]


def _renamed_message(old: str, new: str, renamed_in: str) -> str:
    return (f"{old}: renamed to {new} in ttw_jax {renamed_in}; the old name is accepted until "
            "the next version")


def renamed_config_args(argv: Sequence[str], renamed: Mapping[str, str], config,
                        renamed_in: str | None, version: str | None = None
                        ) -> tuple[list[str], list[str], list[str]]:
    """(argv with old names rewritten, warnings, errors) for the `--config.<key>[=<value>]`
    overrides in `argv`.

    `renamed` is the default config module's `RENAMED` ({old key: new key, or why it is gone}),
    `renamed_in` its `RENAMED_IN` (the ttw_jax version of those renames), `version` the running
    one (default `ttw_jax.__version__`). While the two share major.minor, an old key (or section)
    whose replacement is a key of `config` is rewritten to it with a warning; any other old key
    (removed, changed meaning, or renamed in an earlier version) is an error as in
    `renamed_flag_errors`. A metric key (`...metric=`) set to a renamed result key
    (`provenance.RENAMED_RESULT_KEYS`, e.g. `acc@80`) gets the new one (`acc_80`), with a warning."""
    version = version or ttw_jax.__version__
    known = set(config_keys(config)) if config is not None else set()
    out, warnings, errors = list(argv[:1]), [], []
    for arg in argv[1:]:
        if not arg.startswith("--config."):
            out.append(arg)
            continue
        key, eq, value = arg[len("--config."):].partition("=")
        old = _renamed_section(key, renamed)
        if old is not None:
            new = renamed[old]
            if not (_current(renamed_in, version) and new in known):
                errors.append(f"--config.{key}: {old} is now {new}")
                out.append(arg)
                continue
            key = new + key[len(old):]
            warnings.append(_renamed_message(f"--config.{old}", new, renamed_in))
        if (eq and key.rpartition(".")[2] == "metric" and value in RENAMED_RESULT_KEYS
                and _current(RESULT_KEYS_RENAMED_IN, version)):
            warnings.append(_renamed_message(f"--config.{key}={value}",
                                             RENAMED_RESULT_KEYS[value], RESULT_KEYS_RENAMED_IN))
            value = RENAMED_RESULT_KEYS[value]
        out.append(f"--config.{key}{eq}{value}")
    return out, warnings, errors


def config_keys(config, prefix: str = ""):
    """Every key of a ConfigDict, sections and their fields (`model`, `model.name`, ...)."""
    for k in config.keys():
        yield prefix + k
        if hasattr(config[k], "keys"):
            yield from config_keys(config[k], prefix + k + ".")


def unknown_config_keys(argv: Sequence[str], config) -> list[str]:
    """One message per `--config.<key>=...` override in `argv` that `config` (a ConfigDict) has
    no field for, with the closest existing keys."""
    import difflib

    known = list(config_keys(config))
    errors = []
    for arg in argv[1:]:
        if not arg.startswith("--config."):
            continue
        key = arg[len("--config."):].split("=", 1)[0]
        if key not in known:
            close = difflib.get_close_matches(key, known, n=3)
            errors.append(f"--config.{key}: no such config key"
                          + (f"; did you mean {', '.join(close)}?" if close else ""))
    return errors


def selected_config(argv: Sequence[str], default_path: str):
    """The ConfigDict a launch would build from `argv`'s --config (else the default file)."""
    import importlib.util
    paths = [a.split("=", 1)[1] for a in argv if a.startswith("--config=")]
    path = paths[-1] if paths else default_path
    if not os.path.isfile(path):
        return None   # ml_collections reports a missing file itself
    spec = importlib.util.spec_from_file_location("_launch_config", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_config()


def resolve_config_paths(argv: Sequence[str], configs_dir: str) -> list[str]:
    """`--config=<path>` as given when it exists; else the file of that name in `configs_dir`
    (`--config=r2r` or `--config=r2r.py` picks `<configs_dir>/r2r.py` from any directory)."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg.startswith("--config=") and not os.path.exists(arg[len("--config="):]):
            name = os.path.basename(arg[len("--config="):])
            for candidate in (name, name + ".py"):
                if os.path.isfile(os.path.join(configs_dir, candidate)):
                    out[i] = "--config=" + os.path.join(configs_dir, candidate)
                    break
    return out


CACHE_ENV = "TTW_JAX_COMPILATION_CACHE"
HUGEPAGES_ENV = "TTW_JAX_HUGEPAGES"
MALLOC_HUGEPAGES = "glibc.malloc.hugetlb=1"


def allocator_env(env: Mapping[str, str] = os.environ) -> dict | None:
    """The environment to re-run the launcher in, or None to run as is.

    XLA:CPU takes every program's temporary buffers from malloc, and glibc serves large ones with
    fresh `mmap`s that it unmaps again at `free`: each step then page-faults its temporaries in
    4 KiB at a time (18 million minor faults and 27% of the CPU time in the kernel in a short
    Quickstart run). glibc's `glibc.malloc.hugetlb=1` tunable backs those maps with transparent
    huge pages (2 MiB, 512 times fewer faults). Tunables are read when a process starts, so the
    launcher re-executes itself once with `GLIBC_TUNABLES` extended; $TTW_JAX_HUGEPAGES=0 (or a
    `GLIBC_TUNABLES` that already sets it) leaves the process alone. Linux only."""
    if not sys.platform.startswith("linux") or env.get(HUGEPAGES_ENV, "1") == "0":
        return None
    tunables = env.get("GLIBC_TUNABLES", "")
    if "glibc.malloc.hugetlb" in tunables:
        return None
    return dict(env, GLIBC_TUNABLES=":".join(t for t in (tunables, MALLOC_HUGEPAGES) if t))


def reexec_with_allocator() -> None:
    """Re-execute this Python process once with `allocator_env()`, if that returns an
    environment (call it before any JAX work; a process without `sys.orig_argv` runs as is)."""
    env = allocator_env()
    if env is not None and getattr(sys, "orig_argv", None):
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def compilation_cache_dir(flag: str | None, env: Mapping[str, str] = os.environ) -> str | None:
    """The persistent compilation cache folder a launch uses: `--compilation_cache_dir`, else
    $TTW_JAX_COMPILATION_CACHE, else ~/.cache/ttw_jax/xla; None when it is 'none' (disabled) or
    when $JAX_COMPILATION_CACHE_DIR is set (JAX then uses that folder itself)."""
    if env.get("JAX_COMPILATION_CACHE_DIR"):
        return None
    value = flag if flag is not None else env.get(CACHE_ENV) or os.path.join(
        os.path.expanduser("~"), ".cache", "ttw_jax", "xla")
    return None if value.lower() == "none" else str(paths.resolve(value))


DISTRIBUTED_ENV = {"coordinator_address": "JAX_COORDINATOR_ADDRESS",
                   "num_processes": "JAX_NUM_PROCESSES", "process_id": "JAX_PROCESS_ID"}


def distributed_args(coordinator_address: str | None, num_processes: int | None,
                     process_id: int | None, env: Mapping[str, str] = os.environ) -> dict:
    """The keyword arguments of `jax.distributed.initialize` for --multihost.

    Each of the three comes from its flag, else from its environment variable
    (`DISTRIBUTED_ENV`); none at all leaves them to jax's cluster auto-detection (Cloud TPU, SLURM,
    ...). Some but not all of them is an error naming the missing ones."""
    given = {"coordinator_address": coordinator_address, "num_processes": num_processes,
             "process_id": process_id}
    for key, var in DISTRIBUTED_ENV.items():
        if given[key] is None and env.get(var, "") != "":
            given[key] = env[var]
    missing = [k for k, v in given.items() if v is None]
    if len(missing) == len(given):
        return {}
    if missing:
        raise ValueError("--multihost: give all of --coordinator_address, --num_processes and "
                         "--process_id (or JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, "
                         "JAX_PROCESS_ID), or none for auto-detection; missing: "
                         + ", ".join(f"--{k} / {DISTRIBUTED_ENV[k]}" for k in missing))
    try:
        num, pid = int(given["num_processes"]), int(given["process_id"])
    except ValueError as e:
        raise ValueError(f"--multihost: num_processes and process_id must be integers ({e})")
    if not 0 <= pid < num:
        raise ValueError(f"--multihost: process_id must be in [0, num_processes); got {pid} of {num}")
    return {"coordinator_address": str(given["coordinator_address"]), "num_processes": num,
            "process_id": pid}


def _stop_outside_training(signum, frame):
    logging.warning("SIGTERM outside training (data preparation or evaluation): stopping; rerun "
                    "the same command to resume")
    raise Preempted(0)


def launch(train_and_evaluate: Callable[..., dict], default_config: types.ModuleType) -> None:
    """Defines the flags and runs `train_and_evaluate(config, workdir)` under `absl.app`.

    `default_config` is the experiment's default config module: its file is the default
    `--config`, found from any directory (and `--config` finds the other files of its folder by
    name, see `resolve_config_paths`); its `RENAMED` maps config keys of earlier releases to
    their replacements and `RENAMED_IN` names the version of those renames: an old key is
    rewritten to its replacement with a warning until the next version, a removed one fails
    with the reason (`renamed_config_args`). With --multihost every process calls
    `jax.distributed.initialize(**distributed_args(...))` first.
    """
    reexec_with_allocator()
    default_path = os.path.abspath(default_config.__file__)
    sys.argv[:] = resolve_config_paths(sys.argv, os.path.dirname(default_path))
    selected = selected_config(sys.argv, default_path)
    # Before the flags are defined: ml_collections reads the overrides in sys.argv right then.
    argv, warnings, errors = renamed_config_args(
        sys.argv, getattr(default_config, "RENAMED", {}), selected,
        getattr(default_config, "RENAMED_IN", None))
    if errors:
        sys.stderr.write("\n".join(["renamed config keys:", *errors]) + "\n")
        sys.exit(2)
    for warning in warnings:
        sys.stderr.write(warning + "\n")
    sys.argv[:] = argv
    errors = unknown_config_keys(sys.argv, selected) if selected is not None else []
    if errors:
        sys.stderr.write("\n".join(["unknown config keys:", *errors]) + "\n")
        sys.exit(2)
    flags.DEFINE_string("workdir", None, "Directory for checkpoints, metrics, plots and results: "
                        "a local path, file:///... or gs://... (any etils.epath scheme).")
    flags.DEFINE_string("compilation_cache_dir", None, "JAX's persistent compilation cache: "
                        f"default ${CACHE_ENV}, else ~/.cache/ttw_jax/xla; 'none' disables it "
                        "(a relaunch then compiles every program again).")
    flags.DEFINE_bool("prepare_only", False, "Check the config, prepare the data the run reads "
                      "(TFDS datasets, caches) and stop before the first training step, e.g. on a "
                      "CPU host before an accelerator job or before timing one.")
    flags.DEFINE_bool("multihost", False, "Call jax.distributed.initialize() before anything else.")
    flags.DEFINE_string("coordinator_address", None, "--multihost: host:port of process 0 "
                        "(default $JAX_COORDINATOR_ADDRESS; none of the three: auto-detection).")
    flags.DEFINE_integer("num_processes", None, "--multihost: number of processes "
                         "(default $JAX_NUM_PROCESSES).")
    flags.DEFINE_integer("process_id", None, "--multihost: this process's index "
                         "(default $JAX_PROCESS_ID).")
    config_flags.DEFINE_config_file("config", default_path, "Training configuration.",
                                    lock_config=True)
    flags.mark_flags_as_required(["workdir"])

    def main(argv):
        if len(argv) > 1:
            raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
        import jax

        # Orbax reports every checkpoint step at INFO; keep the console for the experiment.
        logging.get_absl_handler().addFilter(lambda record: "orbax" not in record.pathname)
        F = flags.FLAGS
        cache = compilation_cache_dir(F.compilation_cache_dir)
        if cache is not None:   # programs that took over a second to compile are kept
            jax.config.update("jax_compilation_cache_dir", cache)
        if F.multihost:
            try:
                kwargs = distributed_args(F.coordinator_address, F.num_processes, F.process_id)
            except ValueError as e:
                raise app.UsageError(str(e))
            jax.distributed.initialize(**kwargs)
        logging.info("JAX process %d/%d, devices: %s", jax.process_index(), jax.process_count(),
                     jax.devices())
        # A preemption outside `fit` (data preparation, the final evaluation) stops the run with
        # status 0 too: what it leaves (a killed TFDS build, checkpoints without results) is
        # cleaned up or resumed by the same command. `fit` handles SIGTERM itself meanwhile.
        signal.signal(signal.SIGTERM, _stop_outside_training)
        if F.prepare_only:
            os.environ[PREPARE_ONLY_ENV] = "1"
            try:
                train_and_evaluate(flags.FLAGS.config, paths.resolve(flags.FLAGS.workdir))
            except DataPrepared as e:
                logging.info("%s", e)
                return
            raise app.UsageError("--prepare_only: the run ended without reaching a training "
                                 "step (nothing to prepare separately)")
        train_and_evaluate(flags.FLAGS.config, paths.resolve(flags.FLAGS.workdir))

    app.run(main)
