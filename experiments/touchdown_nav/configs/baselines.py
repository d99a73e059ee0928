r"""Stop / Frequent / Random baselines on the real Touchdown records, horizon 50 (Chen et al. 2019,
Table 5), plus the gold actions replayed through the simulator as a check of its rules; nothing
is trained. Name the downloaded records and graph:

  python -m experiments.touchdown_nav.main --config=experiments/touchdown_nav/configs/baselines.py \
      --config.data.manual_dir=../shared/data/touchdown \
      --config.data.graph_dir=../shared/data/touchdown/graph --workdir=/tmp/td_baselines
"""
from experiments.touchdown_nav.configs import default


def get_config():
    c = default.get_config()
    c.mode = "baselines"
    c.data.tfds_config = "navigation"
    c.data.eval_splits = "dev_sample"
    c.data.max_tokens = 8          # the baselines read no text
    c.data.max_route = 128
    c.train_horizon = 128          # the gold replay's horizon (nothing is trained)
    c.eval.baseline_seeds = 25     # Random: standard error of TC below 0.1 points (std ~0.4)
    return c
