"""The absl entry point every experiment launcher shares: --config, --workdir, --multihost."""
from __future__ import annotations

from typing import Callable

from absl import app, flags, logging
from ml_collections import config_flags


def launch(train_and_evaluate: Callable[..., dict], default_config: str) -> None:
    """Defines the flags and runs `train_and_evaluate(config, workdir)` under `absl.app`.

    With --multihost every process calls `jax.distributed.initialize()` first.
    """
    flags.DEFINE_string("workdir", None, "Directory for checkpoints, metrics, plots and results.")
    flags.DEFINE_bool("multihost", False, "Call jax.distributed.initialize() before anything else.")
    config_flags.DEFINE_config_file("config", default_config, "Training configuration.",
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
