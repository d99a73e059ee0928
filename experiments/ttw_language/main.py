r"""Launcher: Talk The Walk with natural-language communication.

  python -m experiments.ttw_language.main --workdir=/tmp/ttw_nl \
      --config=experiments/ttw_language/configs/default.py \
      --config.data.tfds_config=synthetic_real_maps --config.data.manual_dir=../shared/data/ttw/maps

Multi-host (TPU pods, GPU clusters): pass --multihost on every host; each process then calls
`jax.distributed.initialize()` and only process 0 logs and writes files.
"""
from experiments.ttw_language import train
from experiments.ttw_language.configs import default
from ttw_jax.core.train.launch import launch

if __name__ == "__main__":
    launch(train.train_and_evaluate, default)
