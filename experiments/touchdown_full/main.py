r"""Launcher: the complete Touchdown task (navigate, then SDR where the agent stopped).

  python -m experiments.touchdown_full.main --workdir=/tmp/td_full
  python -m experiments.touchdown_full.main --workdir=/tmp/td_full \
      --config.nav_workdir=/tmp/td_ga --config.sdr_workdir=/tmp/sdr_lingunet

Multi-host (TPU pods, GPU clusters): pass --multihost on every host; each process then calls
`jax.distributed.initialize()` and only process 0 logs and writes files.
"""
from experiments.touchdown_full import train
from experiments.touchdown_full.configs import default
from ttw_jax.core.train.launch import launch

if __name__ == "__main__":
    launch(train.train_and_evaluate, default)
