"""Discrete (Bernoulli) messages trained with REINFORCE.

The tourist starts from a random but already informative code: each message bit is given to one
time step (partition gates) and its landmark/action embeddings are large enough that the bits are
nearly deterministic. With the default small init every bit starts as a fair coin and REINFORCE
must discover the whole code; on the real maps that reached 0.51 validation accuracy after 5,000
steps against 0.66 after 1,000 with this init.
"""
from experiments.ttw_emergent.configs import default


def make_discrete(c):
    """Turns a continuous config into this file's discrete one (also used by `sweep.py`)."""
    c.model.comm = "discrete"
    c.model.tourist_init_std = 1.0
    c.model.tourist_gate_init = "partition"
    return c


def get_config():
    return make_discrete(default.get_config())
