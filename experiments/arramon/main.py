r"""Launcher: ArraMon vision-and-language baseline (and its V/O, L/O ablations).

  python -m experiments.arramon.main --workdir=/tmp/arramon_vl \
      --config=experiments/arramon/configs/default.py --config.model.name=lo

Multi-host (TPU pods, GPU clusters): pass --multihost on every host; each process then calls
`jax.distributed.initialize()` and only process 0 logs and writes files.
"""
from experiments.arramon import train
from experiments.arramon.configs import default
from ttw_jax.core.train.launch import launch

if __name__ == "__main__":
    launch(train.train_and_evaluate, default)
