"""Touchdown navigation, GA agent on synthetic routes: CPU-sized defaults (minutes on 2 cores).

Data come from the `touchdown` TFDS builder (prepared on first use in `data.tfds_dir`). For the
real data: `--config.data.tfds_config=navigation --config.data.manual_dir=<dir with train.json,
dev.json, test.json> --config.data.graph_dir=<dir with nodes.txt, links.txt>
--config.data.features=<panorama features .npz>`.
"""
import ml_collections

from ttw_jax.core.train.run import optim_config

# Config keys of earlier releases ({old: new key, or why it is gone}), renamed in ttw_jax
# RENAMED_IN: an old key whose value is a key is still accepted, with a warning, until the
# next version; the others are refused with the reason.
RENAMED_IN = "0.1.0"
RENAMED = {"model.kind": "model.name", "learning_rate": "optim.learning_rate",
           "grad_clip": "optim.grad_clip", "test_horizon": "eval.horizon"}


def get_config():
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.num_seeds = 1   # > 1: seeds seed .. seed + N - 1, in one program where the trainer allows
    c.num_devices = 0  # data-parallel over the first N devices of one process; 0: all devices
    c.mode = "train"               # train | baselines (gold replay + baselines, nothing trained)
    c.model = ml_collections.ConfigDict()
    c.model.name = "ga"            # ga | rconcat
    c.model.ablation = "none"      # none | no_text | no_image (the paper's Table 8)
    c.model.uniform_init = False   # True: kernels and embeddings U[-0.1, 0.1] (paper App. E.2)
    c.model.embed_dim = 32         # word vectors (paper: 32)
    c.model.text_hidden = 256      # instruction LSTM (paper: 256)
    c.model.hidden = 256           # action LSTM
    c.model.conv_features = 64
    c.model.action_dim = 16
    # table: 1-D CNN over a [W, C] table crop; official: the published 2-D CNNs over
    # [H, crop, C] crops of feature maps (configs/official_cnn.py, configs/paper.py)
    c.model.image_encoder = "table"
    c.crop = 5                     # feature columns visible around the heading

    c.batch_size = 32
    c.optim = optim_config(learning_rate=1e-3, grad_clip=5.0)   # Adam
    c.num_steps = 3000
    c.train_horizon = 55           # the paper's training horizon (test: eval.horizon)
    c.eval_every = 250             # dev metric, checkpoint, early stopping
    c.patience = 4
    c.log_every = 10               # also the host-sync period
    c.max_checkpoints = 2
    c.profile_steps = ""   # "21,22": a jax.profiler trace of steps 21 to 22 in <workdir>/profile
    c.dtype = "float32"   # or "bfloat16": activations and matmuls (parameters, losses float32)

    c.data = ml_collections.ConfigDict()
    c.data.tfds_config = "synthetic_navigation"   # or navigation (manual download)
    c.data.tfds_dir = ""           # empty: ~/tensorflow_datasets
    c.data.manual_dir = ""         # for the manual configs
    c.data.graph_dir = ""          # real configs: the directory holding nodes.txt and links.txt
    c.data.train_split = "train"
    c.data.eval_splits = "dev,test"
    c.data.dev_split = "dev"       # early stopping on its eval.metric
    # 0: sized from the data, the longest instruction of the loaded splits (the value used is
    # results.json's provenance.token_limits); a positive limit cuts synthetic instructions
    # with a warning and refuses to cut the release's
    c.data.max_tokens = 0
    c.data.max_route = 128          # longest route (panoramas); a longer one is an error
    c.data.features = ""           # .npz of panorama features; empty: synthetic features
    # True: synthetic features with the release's records run (tables say "synthetic
    # perception"); False: refused (train mode)
    c.data.allow_synthetic_perception = False
    c.data.feature_width = 16      # synthetic features: columns per panorama
    c.data.feature_dim = 32
    c.data.feature_noise = 0.5
    # synthetic maps for model.image_encoder=official: [H, W, C] per panorama
    c.data.image_height = 20
    c.data.image_width = 64
    c.data.image_channels = 1

    c.eval = ml_collections.ConfigDict()
    c.eval.metric = "spd"          # early stopping and best parameters: tc | spd | sed
    c.eval.mode = "min"
    c.eval.horizon = 50            # the paper's test horizon
    c.eval.batch_size = 256
    c.eval.baselines = "stop,frequent,random"
    c.eval.baseline_seeds = 1      # random baseline: mean (and std) over this many seeds
    c.eval.write_predictions = True   # predictions_<split>.jsonl: each route's visited panoramas
    c.eval.num_figures = 4         # test routes drawn in trajectories.png (0: none)
    return c
