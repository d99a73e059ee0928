"""The absl entry point every experiment launcher shares: --config, --workdir, --multihost."""
from __future__ import annotations

import os
import sys
import types
from typing import Callable, Mapping, Sequence

from absl import app, flags, logging
from ml_collections import config_flags


def renamed_flag_errors(argv: Sequence[str], renamed: Mapping[str, str]) -> list[str]:
    """One message per `--config.<old>` override in `argv` whose key (or a parent section of it)
    is in `renamed` ({old key: its replacement, or why it is gone})."""
    errors = []
    for arg in argv[1:]:
        if not arg.startswith("--config."):
            continue
        key = arg[len("--config."):].split("=", 1)[0]
        parts = key.split(".")
        for old in (".".join(parts[:i]) for i in range(len(parts), 0, -1)):
            if old in renamed:
                errors.append(f"--config.{key}: {old} is now {renamed[old]}")
                break
    return errors


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


def launch(train_and_evaluate: Callable[..., dict], default_config: types.ModuleType) -> None:
    """Defines the flags and runs `train_and_evaluate(config, workdir)` under `absl.app`.

    `default_config` is the experiment's default config module: its file is the default
    `--config`, found from any directory (and `--config` finds the other files of its folder by
    name, see `resolve_config_paths`); its `RENAMED` maps config keys of earlier releases to
    their replacements: overriding one fails with a message naming the new key. With --multihost
    every process calls `jax.distributed.initialize()` first.
    """
    default_path = os.path.abspath(default_config.__file__)
    # Before the flags are defined: ml_collections reads the overrides in sys.argv right then.
    errors = renamed_flag_errors(sys.argv, getattr(default_config, "RENAMED", {}))
    if errors:
        sys.stderr.write("\n".join(["renamed config keys:", *errors]) + "\n")
        sys.exit(2)
    sys.argv[:] = resolve_config_paths(sys.argv, os.path.dirname(default_path))
    flags.DEFINE_string("workdir", None, "Directory for checkpoints, metrics, plots and results.")
    flags.DEFINE_bool("multihost", False, "Call jax.distributed.initialize() before anything else.")
    config_flags.DEFINE_config_file("config", default_path, "Training configuration.",
                                    lock_config=True)
    flags.mark_flags_as_required(["workdir"])

    def main(argv):
        if len(argv) > 1:
            raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
        import jax

        # Orbax reports every checkpoint step at INFO; keep the console for the experiment.
        logging.get_absl_handler().addFilter(lambda record: "orbax" not in record.pathname)
        if flags.FLAGS.multihost:
            jax.distributed.initialize()
        logging.info("JAX process %d/%d, devices: %s", jax.process_index(), jax.process_count(),
                     jax.devices())
        train_and_evaluate(flags.FLAGS.config, flags.FLAGS.workdir)

    app.run(main)
