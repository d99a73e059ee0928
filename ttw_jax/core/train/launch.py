"""The absl entry point every experiment launcher shares: --config, --workdir, --multihost.

A config or data error stops a launch with one line on stderr and no traceback (`error_line`:
a bad `--config.<key>=` override, a config check's ValueError or `app.UsageError`, a malformed
record file's `RecordFormatError`, a missing file); `--verbose` shows the traceback too. Any
other exception is a bug and keeps its traceback.
"""
from __future__ import annotations

import difflib
import importlib.util
import linecache
import math
import os
import re
import signal
import sys
import traceback
import types
from typing import Any, Callable, Mapping, Sequence

from absl import app, flags, logging
from ml_collections import config_flags

import ttw_jax
from ttw_jax.core import paths
from ttw_jax.core.records import RecordFormatError
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


INT64_LIMIT = 2 ** 63


def _field(config, key: str):
    """The value of `config`'s field `key` ("a.b.c"), or None when it has none."""
    for part in key.split("."):
        if not hasattr(config, "keys") or part not in config:
            return None
        config = config[part]
    return config


def abbreviated(value: str, keep: int = 24) -> str:
    """`value`, or its first `keep` characters and its length when it is longer than 2 `keep`."""
    return value if len(value) <= 2 * keep else f"{value[:keep]}... ({len(value):,} characters)"


def numeric_override_errors(argv: Sequence[str], config) -> list[str]:
    """One message per `--config.<key>=<value>` override in `argv` whose value overflows its
    field's type in `config`: an integer literal outside the 64-bit range [-2^63, 2^63) for an int
    field (also one with more digits than Python converts, 4,300), a literal beyond float64 for a
    float field (`1e400` would parse to inf; `inf` itself stays allowed)."""
    errors = []
    for arg in argv[1:]:
        if not arg.startswith("--config.") or "=" not in arg:
            continue
        key, _, value = arg[len("--config."):].partition("=")
        default = _field(config, key)
        text = value.strip().replace("_", "")
        if isinstance(default, bool):
            continue
        if isinstance(default, int):
            digits = text.lstrip("+-").lstrip("0")
            if digits.isdigit() and (len(digits) > 19 or not
                                     -INT64_LIMIT <= int(text) < INT64_LIMIT):
                errors.append(f"--config.{key}: {abbreviated(value)} is outside the 64-bit "
                              "integer range [-2^63, 2^63)")
        elif isinstance(default, float):
            try:
                number = float(text)
            except ValueError:
                continue
            if math.isinf(number) and "inf" not in text.lower():
                errors.append(f"--config.{key}: {abbreviated(value)} overflows a 64-bit float "
                              f"(the largest is {sys.float_info.max:.4g})")
    return errors


# Exceptions that are config or data errors wherever they are raised.
USER_ERRORS = (app.UsageError, flags.Error, RecordFormatError, FileNotFoundError)
# Exceptions that are config or data errors when a `raise` of the project's own code raised them
# (a config check, a data reader); raised elsewhere (numpy, JAX, a failed unpacking) they are bugs.
CHECK_ERRORS = (ValueError, OverflowError, FloatingPointError)
_PROJECT_DIRS = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    ttw_jax.__file__))), d) for d in ("ttw_jax", "experiments", "datasets", "ttw_datasets"))


def raised_by_a_check(exc: BaseException) -> bool:
    """Whether the innermost frame of `exc`'s traceback is a `raise` statement in the project's
    own code (ttw_jax, experiments, the dataset builders)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    filename = os.path.abspath(tb.tb_frame.f_code.co_filename)
    return (filename.startswith(tuple(d + os.sep for d in _PROJECT_DIRS))
            and linecache.getline(filename, tb.tb_lineno).lstrip().startswith("raise"))


def one_line(text: str) -> str:
    """`text` on one line: its lines joined ("; ", or a space after a colon), any run of more
    than 40 digits shortened to its first 12 and its length."""
    out = ""
    for line in (x.strip() for x in text.strip().splitlines()):
        if line:
            out += ("" if not out else " " if out.endswith(":") else "; ") + line
    return re.sub(r"\d{41,}", lambda m: f"{m[0][:12]}... ({len(m[0]):,} digits)", out)


def error_line(exc: BaseException) -> str | None:
    """The one line a launcher prints for `exc` when it is a config or data error (`USER_ERRORS`,
    or `CHECK_ERRORS` raised by a check: `raised_by_a_check`); None for any other exception."""
    if isinstance(exc, USER_ERRORS) or (isinstance(exc, CHECK_ERRORS)
                                        and raised_by_a_check(exc)):
        return one_line(str(exc) or type(exc).__name__)
    return None


def verbose_requested(argv: Sequence[str]) -> bool:
    """Whether `argv` sets --verbose (read before absl parses the flags, so that a flag error
    honours it)."""
    on = False
    for arg in argv[1:]:
        if arg in ("--verbose", "--verbose=true", "--verbose=True", "--verbose=1"):
            on = True
        elif arg in ("--noverbose", "--verbose=false", "--verbose=False", "--verbose=0"):
            on = False
    return on


def fail(message: str, status: int = 1) -> None:
    """Writes `message` (one line) to stderr and exits with `status`."""
    sys.stdout.flush()
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    sys.exit(status)


def run_reporting_errors(fn: Callable[[], Any], verbose: bool) -> Any:
    """`fn()`; a config or data error (`error_line`) exits with status 2 (usage) or 1 after one
    line on stderr, printed after its traceback when `verbose`; any other exception propagates."""
    try:
        return fn()
    except Exception as e:    # noqa: BLE001 -- classified by error_line
        line = error_line(e)
        if line is None:
            raise
        if verbose:
            traceback.print_exc()
        fail(line, 2 if isinstance(e, (app.UsageError, flags.Error)) else 1)


def parse_flags(argv: Sequence[str]) -> list[str]:
    """absl's flag parsing for `app.run`, with a flag error (a malformed `--config.<key>=`
    override included) as one line and status 2."""
    return run_reporting_errors(lambda: flags.FLAGS(list(argv)), verbose_requested(argv))


def selected_config(argv: Sequence[str], default_path: str):
    """The ConfigDict a launch would build from `argv`'s --config (else the default file)."""
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


def missing_config_files(argv: Sequence[str], configs_dir: str) -> str | None:
    """One line naming the first `--config=<file>[:<argument>]` of `argv` (after
    `resolve_config_paths`) whose file does not exist, or None."""
    for arg in argv[1:]:
        if arg.startswith("--config="):
            value = arg[len("--config="):]
            if not (os.path.isfile(value) or os.path.isfile(value.split(":", 1)[0])):
                names = ", ".join(sorted(f[:-3] for f in os.listdir(configs_dir)
                                         if f.endswith(".py") and not f.startswith("_")))
                return (f"--config={value}: no such config file, nor one of that name in "
                        f"{configs_dir} ({names})")
    return None


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
    with the reason (`renamed_config_args`); an unknown key, a missing `--config` file or a
    numeric override that overflows its field (`numeric_override_errors`) is refused before any
    work, and every config or data error is one line on stderr (module docstring; `--verbose`:
    its traceback too). With --multihost every process calls
    `jax.distributed.initialize(**distributed_args(...))` first.
    """
    reexec_with_allocator()
    default_path = os.path.abspath(default_config.__file__)
    sys.argv[:] = resolve_config_paths(sys.argv, os.path.dirname(default_path))
    missing = missing_config_files(sys.argv, os.path.dirname(default_path))
    if missing:
        fail(missing, 2)
    selected = selected_config(sys.argv, default_path)
    # Before the flags are defined: ml_collections reads the overrides in sys.argv right then.
    argv, warnings, errors = renamed_config_args(
        sys.argv, getattr(default_config, "RENAMED", {}), selected,
        getattr(default_config, "RENAMED_IN", None))
    if errors:
        fail("\n".join(errors), 2)   # one line per key
    for warning in warnings:
        sys.stderr.write(warning + "\n")
    sys.argv[:] = argv
    if selected is not None:
        errors = unknown_config_keys(sys.argv, selected) or numeric_override_errors(sys.argv,
                                                                                    selected)
        if errors:
            fail("\n".join(errors), 2)
    flags.DEFINE_string("workdir", None, "Directory for checkpoints, metrics, plots and results: "
                        "a local path, file:///... or gs://... (any etils.epath scheme).")
    flags.DEFINE_string("compilation_cache_dir", None, "JAX's persistent compilation cache: "
                        f"default ${CACHE_ENV}, else ~/.cache/ttw_jax/xla; 'none' disables it "
                        "(a relaunch then compiles every program again).")
    flags.DEFINE_bool("prepare_only", False, "Check the config, prepare the data the run reads "
                      "(TFDS datasets, caches) and stop before the first training step, e.g. on a "
                      "CPU host before an accelerator job or before timing one.")
    flags.DEFINE_bool("verbose", False, "A config or data error prints its traceback too (by "
                      "default: one line naming the key or the file; any other error always "
                      "prints its traceback).")
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
        run_reporting_errors(lambda: run(argv), flags.FLAGS.verbose)

    def run(argv):
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

    app.run(main, flags_parser=parse_flags)
