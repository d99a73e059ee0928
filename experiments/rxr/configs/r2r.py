"""RCM agent on the real R2R data with angle features only (a language + structure agent:
`model.name=language_only`; with view features, `--config.model.name=full
--config.data.features=<file>`).

  python -m experiments.rxr.main --config=experiments/rxr/configs/r2r.py --workdir=/tmp/r2r \
      --config.data.manual_dir=../shared/data/r2r \
      --config.data.connectivity_dir=../shared/data/matterport/connectivity

The shared R2R files have no val_unseen split and test has only start viewpoints, so model
selection uses `train_holdout` (the train paths with path_id % 20 == 0, about 5%, left out of
training) and val_seen is reported untouched.
"""
from experiments.rxr.configs import default


def get_config():
    c = default.get_config()
    c.model.name = "language_only"
    c.data.tfds_config = "r2r"
    c.data.features = ""
    c.data.max_tokens = 80
    c.data.max_path = 8
    c.data.eval_splits = "val_seen"
    c.data.dev_split = "train_holdout"
    c.num_steps = 10000
    c.eval_every = 500
    c.patience = 6
    c.train_horizon = 10
    c.eval.horizon = 15
    c.eval.metric = "sr"
    return c
