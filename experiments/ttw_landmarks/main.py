r"""Launcher: Talk The Walk landmark classification (Appendix F, Table 18).

  python -m experiments.ttw_landmarks.main --workdir=/tmp/lm_run
  python -m experiments.ttw_landmarks.main --workdir=/tmp/lm_real \
      --config.data.maps_dir=/path/to/talkthewalk/data \
      --config.data.features_dir=/path/to/talkthewalk/data --config.model.features=textrecog

Trains in seconds on a CPU; writes `<workdir>/results.json`, `metrics.jsonl`,
`learning_curve.png`, the per-corner `predictions_train.npz` / `predictions_valid.npz` and the
kept `params.safetensors` (`python -m experiments.ttw_landmarks.score` re-scores a predictions
file), and prints Table 18's columns beside the paper's.
"""
from experiments.ttw_landmarks import train
from experiments.ttw_landmarks.configs import default
from ttw_jax.core.train.launch import launch

if __name__ == "__main__":
    launch(train.train_and_evaluate, default)
