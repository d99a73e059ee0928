r"""Launcher: Talk The Walk localization with emergent communication.

  python -m experiments.ttw_emergent.main --workdir=/tmp/ttw \
      --config=experiments/ttw_emergent/configs/default.py --config.T=3 --config.comm=discrete

Multi-host (TPU pods, GPU clusters): pass --multihost on every host; each process then calls
`jax.distributed.initialize()` and only process 0 logs and writes files.
"""
from absl import app, flags, logging
from ml_collections import config_flags

from experiments.ttw_emergent import train

FLAGS = flags.FLAGS
flags.DEFINE_string("workdir", None, "Directory for checkpoints, metrics, plots and results.")
flags.DEFINE_bool("multihost", False, "Call jax.distributed.initialize() before anything else.")
config_flags.DEFINE_config_file("config", "experiments/ttw_emergent/configs/default.py",
                                "Training configuration.", lock_config=True)
flags.mark_flags_as_required(["workdir"])


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    import jax
    # Orbax reports every checkpoint step at INFO; keep the console for the experiment.
    logging.get_absl_handler().addFilter(lambda record: "orbax" not in record.pathname)
    if FLAGS.multihost:
        jax.distributed.initialize()
    logging.info("JAX process %d/%d, devices: %s", jax.process_index(), jax.process_count(),
                 jax.devices())
    train.train_and_evaluate(FLAGS.config, FLAGS.workdir)


if __name__ == "__main__":
    app.run(main)
