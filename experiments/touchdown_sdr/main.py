r"""Launcher: Touchdown Spatial Description Resolution (LingUNet and baselines).

  python -m experiments.touchdown_sdr.main --workdir=/tmp/sdr_lingunet
  python -m experiments.touchdown_sdr.main --workdir=/tmp/sdr_concat --config.model.name=concat

Multi-host (TPU pods, GPU clusters): pass --multihost on every host; each process then calls
`jax.distributed.initialize()` and only process 0 logs and writes files.
"""
from experiments.touchdown_sdr import train
from experiments.touchdown_sdr.configs import default
from ttw_jax.core.train.launch import launch

if __name__ == "__main__":
    launch(train.train_and_evaluate, default)
