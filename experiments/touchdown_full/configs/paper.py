"""The complete task with both stages at the paper's settings (the navigation and SDR
`configs/paper.py`; the paper pipelines its best navigation and SDR models, section 8). Needs
the real data and an accelerator; reuse finished paper runs with `--config.nav_workdir` and
`--config.sdr_workdir`."""
from experiments.touchdown_full.configs import default
from experiments.touchdown_nav.configs import paper as nav_paper
from experiments.touchdown_sdr.configs import paper as sdr_paper


def get_config():
    c = default.get_config()
    c.nav = default.stage_defaults(nav_paper.get_config())
    c.sdr = default.stage_defaults(sdr_paper.get_config())
    c.nav.data.tfds_config = "navigation"
    c.data.views = "release"
    return c
