"""The paper's RxR setting: `configs/rxr.py` (Ku et al. 2020, section 5)."""
from experiments.rxr.configs import rxr


def get_config():
    return rxr.get_config()
