"""The paper's sizes (L = 500 message dimensions) on the real maps; needs an accelerator to be quick."""
from experiments.ttw_emergent.configs import default


def get_config():
    c = default.get_config()
    c.model.features = 500
    c.batch_size = 128
    c.num_steps = 20000
    c.data.maps_dir = "../shared/data/ttw/maps"
    return c
