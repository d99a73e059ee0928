"""Touchdown navigation from RGB images (Chen et al. 2019, Table 7): the paper's settings
(`paper.py`) with the agent seeing, instead of ResNet features, the 60-degree perspective RGB
image of 84 x 84 pixels centred on its heading (3 x 84 x 84), rendered on device from a
per-panorama RGB band through the official CNN. On the real data: extract the bands with
`experiments.touchdown_sdr.extract_features --rgb_dir=...`, convert them with
`convert_features --layout=rgb` and pass `--config.data.features=<that .npz>`; with
data.features empty, synthetic bands of the same size. `--config.model.name=rconcat` for
RConcat."""
from experiments.touchdown_nav.configs import paper
from ttw_jax.touchdown import projection


def get_config():
    c = paper.get_config()
    c.model.image_encoder = "rgb"
    c.crop = projection.RGB_SIZE                 # the views' height and width: 84
    c.data.image_height = projection.RGB_SIZE    # synthetic bands: 84 x 504 (60 x 360 degrees)
    c.data.image_width = projection.BAND_WIDTH
    c.data.image_channels = 3
    return c
