"""Ku et al. (2020), Table 5, exp. 6 (Multi*): `configs/paper.py` with the visual
attention-grounding loss, `log sum_i exp(z_i) - log sum_i m_i exp(z_i)` over the 36 views with the
pose trace's view masks m_t, applied whenever the agent is on the gold path (its path so far is
the reference's prefix: the cloning rows, and the sampled rows until they leave it). The textual
version, which the paper found did not help, is `--config.loss.textual_grounding=1`."""
from experiments.rxr.configs import paper


def get_config():
    c = paper.get_config()
    c.loss.visual_grounding = 1.0
    c.loss.grounding_steps = "on_gold_path"
    return c
