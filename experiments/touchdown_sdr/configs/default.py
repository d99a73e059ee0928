"""Touchdown SDR with LingUNet on synthetic feature-space panoramas: CPU-sized defaults.

`--config.model.name=concat|concatconv|text2conv|unet` trains a baseline instead (learning rate
1e-3 unless set). For the real data: `--config.data.tfds_config=sdr
--config.data.manual_dir=<records + features/<panoid>.npy>` and the paper's sizes in
`configs/paper.py`.
"""
import ml_collections

from ttw_jax.core.train.run import optim_config

# Config keys of earlier releases ({old: new key, or why it is gone}), renamed in ttw_jax
# RENAMED_IN: an old key whose value is a key is still accepted, with a warning, until the
# next version; the others are refused with the reason.
RENAMED_IN = "0.1.0"
RENAMED = {"learning_rate": "optim.learning_rate",
           "data.image_width": "removed: SDR distances are measured at the official evaluation's "
                               "scale (3,680 x 800 px, ttw_jax.touchdown.sdr.metrics)"}


def get_config():
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.num_seeds = 1   # > 1: seeds seed .. seed + N - 1, in one program where the trainer allows
    c.num_devices = 0  # data-parallel over the first N devices of one process; 0: all devices
    c.mode = "train"               # train | baselines (Random / Center / Average on the records)
    c.model = ml_collections.ConfigDict()
    # lingunet | lingunet_official (the official sdr/model.py) | concat | concatconv |
    # text2conv | unet
    c.model.name = "lingunet"
    c.model.levels = 2             # LingUNet m
    c.model.channels = 16          # convolution channels C' (paper-sized: configs/paper.py)
    c.model.stride = 1             # 1 as in Touchdown; 2 as in the original LingUNet
    c.model.mlp_hidden = 16
    c.model.mlp_layers = 1         # lingunet_official: hidden layers after the first (official 1)
    c.model.deconv_dropout = 0.0   # lingunet_official: dropout before the first deconvolution
    # lingunet_official: an official checkpoint (.pt / .safetensors / .npz state dict) to start
    # from; its vocabulary is the official loader's, rebuilt from the release's train and dev
    # files in data.manual_dir; with num_steps=0 the imported model is only evaluated
    c.model.checkpoint = ""
    c.model.embed_dim = 64         # word embeddings (paper: 300)
    c.model.hidden = 64            # BiLSTM units per direction (paper: 300)
    c.model.dropout = 0.5
    c.model.uniform_init = False   # True: all parameters U[-0.1, 0.1] (paper App. D.2)
    # lingunet_official: its levels' convolutions and text-kernel maps start from one draw, as
    # the official code's copies of one layer do; False: each level drawn on its own
    c.model.identical_levels = True

    c.sigma = 1.0                  # target Gaussian std, in feature pixels
    # Adam; learning_rate <= 0: 5e-4 for LingUNet, 1e-3 for the others (paper)
    c.optim = optim_config(learning_rate=-1.0)
    c.batch_size = 16
    c.num_steps = 2000
    c.eval_every = 200             # tune-set accuracy@80px, checkpoint, early stopping
    # > 0: evaluate every this many epochs of the train split instead (an epoch:
    # ceil(training views / batch_size) steps, the official loader's batches per epoch)
    c.eval_every_epochs = 0
    c.patience = 4                 # evaluations without a new best before stopping
    c.log_every = 10
    c.max_checkpoints = 2
    c.profile_steps = ""   # "21,22": a jax.profiler trace of steps 21 to 22 in <workdir>/profile
    c.dtype = "float32"   # or "bfloat16": activations and matmuls (parameters, losses float32)

    c.data = ml_collections.ConfigDict()
    c.data.tfds_config = "synthetic_sdr"   # or sdr (manual download + feature files)
    c.data.tfds_dir = ""
    c.data.manual_dir = ""
    c.data.tune_fraction = 0.07    # of train descriptions, held out for early stopping
    c.data.eval_splits = "dev,test"
    # 0: sized from the data, the longest description of the loaded splits (the value used is
    # results.json's provenance.token_limits); a positive limit cuts synthetic descriptions
    # with a warning and refuses to cut the release's
    c.data.max_tokens = 0
    # True: no TFDS copy of the features; the views come from the official records in
    # manual_dir and each panorama's features/<panoid>.npy is read when a batch uses it (grain
    # threads, per-process shards, the stream's state in the checkpoints): the real train split
    # is ~212 GB decoded
    c.data.stream = False
    c.data.feature_shape = "100,464,128"   # stream: [H, W, C] of every feature file
    c.data.stream_threads = 2              # stream: grain reader threads (and batches prefetched)

    c.eval = ml_collections.ConfigDict()
    c.eval.metric = "acc_80"       # tune-set early stopping and best parameters
    c.eval.mode = "max"
    c.eval.batch_size = 64
    c.eval.baselines = "random,center,average"
    c.eval.baseline_seeds = 1      # baselines mode: Random's mean (and std) over this many seeds
    c.eval.write_predictions = True   # predictions_<split>.jsonl: each view's predicted pixel
    c.write_plots = True
    c.num_heatmaps = 6
    return c
