"""The RxR release at the paper's scale and settings: the same config as `configs/paper.py` (the
multilingual agent of Ku et al. 2020, Table 5, exp. 4), kept under its earlier name."""
from experiments.rxr.configs import paper


def get_config():
    return paper.get_config()
