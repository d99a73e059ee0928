r"""Launcher: Talk The Walk localization with emergent communication.

  python -m experiments.ttw_emergent.main --workdir=/tmp/ttw \
      --config=experiments/ttw_emergent/configs/default.py --config.T=3 --config.model.comm=discrete

Multi-host (TPU pods, GPU clusters): pass --multihost on every host; each process then calls
`jax.distributed.initialize()` and only process 0 logs and writes files.
"""
from experiments.ttw_emergent import train
from experiments.ttw_emergent.configs import default
from ttw_jax.core.train.launch import launch

if __name__ == "__main__":
    launch(train.train_and_evaluate, default)
