r"""The random walk on a real ArraMon split, several seeds, beside the paper's row; nothing is
trained. Uniform over (forward, left, right, pick-up/place) in both phases, the paper's step
limit (150) per phase, the cascaded two-turn task. CTC-k is reported twice: with the fallback
rule (`random`: a phase that ends without a pick-up scores 0) and by final distance alone
(`random_by_distance`), which is how the paper's row comes out (README, "ArraMon").

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
    c.eval.baselines = "random,random_by_distance"
    c.eval.baseline_seeds = 5
    return c
