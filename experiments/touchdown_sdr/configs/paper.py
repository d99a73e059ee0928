"""Touchdown SDR at the paper's sizes (Chen et al. 2019, App. C/D): 300-d word vectors, a 300-unit
BiLSTM, LingUNet with m=2 and 128 channels on 100 x 464 x 128 feature maps (8 ResNet18 slices),
batch 10. Needs the real data (`--config.data.manual_dir` with the records and
`features/<panoid>.npy`) and an accelerator."""
from experiments.touchdown_sdr.configs import default


def get_config():
    c = default.get_config()
    c.model.channels = 128
    c.model.mlp_hidden = 128
    c.model.embed_dim = 300
    c.model.hidden = 300
    c.batch_size = 10
    c.num_steps = 100_000
    c.eval_every = 1000
    c.data.tfds_config = "sdr"
    c.data.max_tokens = 128
    return c
