r"""The SDR task's non-learning baselines, Random / Center / Average (Chen et al. 2019, section
6), on the views of the real Touchdown records at the official evaluation's scale; no features
and nothing trained. Name the directory of the record files:

  python -m experiments.touchdown_sdr.main --config=baselines \
      --config.data.manual_dir=../shared/data/touchdown --workdir=/tmp/sdr_baselines
"""
from experiments.touchdown_sdr.configs import default


def get_config():
    c = default.get_config()
    c.mode = "baselines"
    c.data.eval_splits = "dev_sample"
    c.eval.baseline_seeds = 20
    return c
