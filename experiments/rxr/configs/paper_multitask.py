r"""Ku et al. (2020), Table 6, exp. 8: the multilingual agent of `configs/paper.py` trained on RxR
and R2R together, each dataset's val_unseen reported apart (`val_unseen` and `r2r/val_unseen`).
The agent reads text features, so the R2R instructions need theirs too: the release has none, so
put your multilingual-BERT features of each R2R instruction in
`<multitask_dir>/text_features/{instruction_id:06d}.npy` ([subwords, 768]; instruction k of path
p is 10 p + k), as the paper computed them. The training examples are mixed in proportion to
the two datasets' sizes (`data.multitask_share=-1`; the paper states no ratio):

  python -m experiments.rxr.main --config=paper_multitask --workdir=/tmp/rxr_r2r \
      --config.data.manual_dir=/data/rxr --config.data.multitask_dir=/data/r2r \
      --config.data.features=/data/img_features.tsv \
      --config.data.connectivity_dir=../shared/data/matterport/connectivity
"""
from experiments.rxr.configs import paper


def get_config():
    c = paper.get_config()
    c.data.multitask = "r2r"
    c.data.multitask_share = -1.0
    c.data.multitask_eval_splits = "val_unseen"
    return c
