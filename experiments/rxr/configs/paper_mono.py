"""A monolingual agent of Ku et al. (2020), Table 5, exp. 3: `configs/paper.py` on one language's
guide and follower paths (84K pairs), every split kept to that language. English by default;
`--config.data.languages=hi` or `te` for the others (en is en-IN and en-US together, as the paper
reports it)."""
from experiments.rxr.configs import paper


def get_config():
    c = paper.get_config()
    c.data.languages = "en"
    return c
