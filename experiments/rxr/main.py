r"""Launcher: RCM agent on RxR / R2R (synthetic by default).

  python -m experiments.rxr.main --workdir=/tmp/rxr \
      --config.data.connectivity_dir=../shared/data/matterport/connectivity
  python -m experiments.rxr.main --config=experiments/rxr/configs/r2r.py --workdir=/tmp/r2r \
      --config.data.manual_dir=../shared/data/r2r \
      --config.data.connectivity_dir=../shared/data/matterport/connectivity

Multi-host (TPU pods, GPU clusters): pass --multihost on every host; each process then calls
`jax.distributed.initialize()` and only process 0 logs and writes files.
"""
from experiments.rxr import train
from experiments.rxr.configs import default
from ttw_jax.core.train.launch import launch

if __name__ == "__main__":
    launch(train.train_and_evaluate, default)
