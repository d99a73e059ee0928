r"""Launcher: Touchdown navigation (GA, RConcat).

  python -m experiments.touchdown_nav.main --workdir=/tmp/td_ga \
      --config=experiments/touchdown_nav/configs/default.py --config.model.name=rconcat

Multi-host (TPU pods, GPU clusters): pass --multihost on every host; each process then calls
`jax.distributed.initialize()` and only process 0 logs and writes files.
"""
from experiments.touchdown_nav import train
from experiments.touchdown_nav.configs import default
from ttw_jax.core.train.launch import launch

if __name__ == "__main__":
    launch(train.train_and_evaluate, default)
