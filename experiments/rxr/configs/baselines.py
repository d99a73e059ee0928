r"""The simple baselines of Ku et al. (2020), Table 4, on R2R / RxR, nothing trained: each moves
N times then stops, N = the mean number of steps of the train split's reference paths (rounded);
the reference paths are also replayed as a check (NE 0, SR = nDTW = 1). Name the downloads:

  python -m experiments.rxr.main --config=experiments/rxr/configs/baselines.py \
      --config.data.manual_dir=../shared/data/r2r \
      --config.data.connectivity_dir=../shared/data/matterport/connectivity --workdir=/tmp/r2r_b
"""
from experiments.rxr.configs import default


def get_config():
    c = default.get_config()
    c.mode = "baselines"
    c.data.tfds_config = "r2r"
    c.data.dev_split = "val_seen"
    c.data.eval_splits = "val_seen"
    c.data.features = ""
    c.data.max_tokens = 8          # the baselines read no text
    c.data.max_path = 64
    c.eval.horizon = 15
    c.eval.baseline_seeds = 5
    c.eval.straight = "fixed,forward,nearest"   # every reading of "go straight"
    return c
