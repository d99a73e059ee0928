"""Touchdown navigation at the paper's settings (Chen et al. 2019, section 7 and App. E.2): 32-d
word vectors, 256-unit instruction and action LSTMs, parameters drawn from U[-0.1, 0.1], Adam at
a fixed 2.5e-4, training horizon 55 and test horizon 50, early stopping on dev SPD with patience
5. `--config.model.name=rconcat` for RConcat. On the real data add
`--config.data.tfds_config=navigation --config.data.manual_dir=... --config.data.graph_dir=...
--config.data.features=<features .npz>` (the official maps converted with `--layout=images`,
BUILD.md); the paper trained asynchronously with Hogwild!, which this synchronous
data-parallel loop does not reproduce."""
from experiments.touchdown_nav.configs import default


def get_config():
    c = default.get_config()
    c.model.embed_dim = 32
    c.model.text_hidden = 256
    c.model.hidden = 256
    c.model.uniform_init = True
    c.optim.learning_rate = 2.5e-4
    c.optim.schedule = "constant"
    c.train_horizon = 55
    c.eval.horizon = 50
    c.eval.metric = "spd"
    c.eval.mode = "min"
    c.patience = 5
    c.data.max_tokens = 0          # sized from the data: no official instruction is cut
    # The official image processing: the feature maps averaged over channels (100 x 464 x 1;
    # convert_features --layout=images), rolled by the official formula, 100 columns around the
    # heading, the published 2-D CNNs (synthetic maps of that size when data.features is empty)
    c.model.image_encoder = "official"
    c.crop = 100
    c.data.image_height = 100
    c.data.image_width = 464
    c.data.image_channels = 1
    return c
