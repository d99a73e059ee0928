"""ArraMon on the real val_seen file alone (no train file is public here): its 1,065 instances
are split by a stable hash of `mapId` into partition_train (70%), partition_dev (10%, early
stopping) and partition_test (20%, reported). Language-only by default: the real data hold no
images, and the simulator's symbolic view would only show the two target objects.

  python -m experiments.arramon.main --config=experiments/arramon/configs/real_val_seen.py \
      --config.data.manual_dir=../shared/data/arramon --workdir=/tmp/arramon_real_lo
"""
from experiments.arramon.configs import default


def get_config():
    c = default.get_config()
    c.model.name = "lo"
    c.data.tfds_config = "english"
    c.data.partition_split = "val_seen"
    c.data.train_split = "partition_train"
    c.data.dev_split = "partition_dev"
    c.data.eval_splits = "partition_test"
    c.eval.metric = "navi_ndtw"
    c.num_steps = 600
    c.eval_every = 150
    return c
