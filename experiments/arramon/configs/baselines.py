r"""The random walk and the shortest path (the ground truth's actions) on a real ArraMon split,
the walk over several seeds, beside the paper's rows; nothing is trained. The walk is uniform
over (forward, left, right, pick-up/place) in both phases, the paper's step limit (150) per phase,
the cascaded two-turn task. Every metric comes under both CTC rules (`eval.ctc_rule`, default
the paper's distance rule; `{metric}_strict` / `{metric}_distance`; see
`experiments/arramon/README.md`).

  python -m experiments.arramon.main --config=experiments/arramon/configs/baselines.py \
      --config.data.manual_dir=../shared/data/arramon --workdir=/tmp/arramon_random
"""
from experiments.arramon.configs import default


def get_config():
    c = default.get_config()
    c.mode = "baselines"
    c.data.tfds_config = "english"
    c.data.train_split = "val_seen"   # only its vocabulary is built: the walk reads no text
    c.data.dev_split = "val_seen"
    c.data.eval_splits = "val_seen"
    c.eval.batch_size = 512
    c.eval.baselines = "random,shortest_path"
    c.eval.baseline_seeds = 5
    return c
