"""Touchdown navigation with the official image processing (`model.image_encoder=official`):
the 2-D CNNs of the published GA / RConcat reimplementations over crops of whole feature maps,
on synthetic 20 x 64 single-channel maps (crop 20 columns, 112 degrees, as the default table
crop). `--config.model.name=rconcat` for RConcat. At the official scale see `paper.py`."""
from experiments.touchdown_nav.configs import default


def get_config():
    c = default.get_config()
    c.model.image_encoder = "official"
    c.crop = 20                    # the official CNNs' smallest input: 20 x 20
    c.data.image_height = 20
    c.data.image_width = 64
    c.data.image_channels = 1
    return c
