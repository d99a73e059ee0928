"""Touchdown navigation with the RConcat agent (otherwise the defaults)."""
from experiments.touchdown_nav.configs import default


def get_config():
    c = default.get_config()
    c.model.name = "rconcat"
    return c
