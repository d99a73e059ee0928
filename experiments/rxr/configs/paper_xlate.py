"""Ku et al. (2020), Table 5, exp. 5: `configs/paper.py` plus the release's cross-translations,
each guide instruction's text features in the two other languages paired with its guide path
(the `guide_follower_xlate` TFDS config: 252K annotated pairs and 252K translated ones, the
paper's 504K). Evaluation is on the annotations, as in exp. 4."""
from experiments.rxr.configs import paper


def get_config():
    c = paper.get_config()
    c.data.tfds_config = "guide_follower_xlate"
    return c
