r"""Launcher: Talk The Walk landmark classification (Appendix F).

  python -m experiments.ttw_landmarks.main --workdir=/tmp/lm_run
  python -m experiments.ttw_landmarks.main --workdir=/tmp/lm_real \
      --config.data.maps_dir=../shared/data/ttw/maps --config.data.features=/path/features.npz

Trains in seconds on a CPU; writes `<workdir>/results.json` and prints the summary table.
"""
from experiments.ttw_landmarks import train
from experiments.ttw_landmarks.configs import default
from ttw_jax.core.train.launch import launch

if __name__ == "__main__":
    launch(train.train_and_evaluate, default)
