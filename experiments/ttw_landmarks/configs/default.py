"""Talk The Walk landmark classification, Appendix F with the released protocol (Table 18).

The released `classify_landmarks.py` defaults: Adam (learning rate 1e-3, torch's default), batch
256, 100 epochs, sum pooling, early stopping on the valid loss, a random 70 / 30 split.

Synthetic maps and synthetic feature files (in the release's layout) by default. The release:
`--config.data.maps_dir=<release data dir> --config.data.features_dir=<release data dir>`; the
Table 18 rows: `model.features` = resnet | textrecog | fasttext (with `data.fasttext_vec`),
`data.pca_components` = 256 (ResNet) or 100 (FastText).
"""
import ml_collections

from ttw_jax.core.train.run import optim_config

# Config keys of earlier releases ({old: new key, or why it is gone}), renamed in ttw_jax
# RENAMED_IN: an old key whose value is a key is still accepted, with a warning, until the
# next version; the others are refused with the reason.
RENAMED_IN = "0.1.0"
RENAMED = {"hidden": "removed: the bag-of-embeddings classifier has no hidden layer",
           "model.hidden": "removed: the bag-of-embeddings classifier has no hidden layer",
           "dropout": "removed: the released classifier has no dropout",
           "model.dropout": "removed: the released classifier has no dropout",
           "pool": "model.pool", "learning_rate": "optim.learning_rate",
           "weight_decay": "optim.weight_decay", "select_metric": "eval.metric",
           "num_steps": "num_epochs (epochs, not steps)",
           "eval_every": "removed: every epoch is evaluated",
           "max_pos_weight": "removed: weights are the released inverse class frequencies",
           "random_p": "removed: the random baseline predicts each class with probability 0.5",
           "data.features": "data.features_dir (the folder of resnetfeat.json and <nbh>/text.json)",
           "data.allow_missing": "removed: every corner of the release has its views",
           "data.standardize": "removed: features are read as released (ResNet divided by "
                               "model.resnet_scale_div)",
           "data.synthetic_noise": "removed: see ttw_jax/talk_the_walk/landmarks/release.py",
           "data.synthetic_visibility": "removed: see ttw_jax/talk_the_walk/landmarks/release.py"}


def get_config():
    c = ml_collections.ConfigDict()
    c.seed = 0                   # the split, the initialisation, the shuffling, the random baseline
    c.num_seeds = 1   # > 1: seeds seed .. seed + N - 1, in one program where the trainer allows
    c.num_devices = 0  # data-parallel over the first N devices of one process; 0: all devices
    c.model = ml_collections.ConfigDict()
    c.model.name = "bag_of_embeddings"
    c.model.features = "resnet"  # comma-separated: resnet | textrecog | fasttext
    c.model.pool = "sum"         # sum (the bag of embeddings) | max over views / strings
    c.model.bias = False         # the released linear layers have none; True: the paper's + b
    c.model.text_embed = 50      # the learned look-up table of textrecog
    c.model.resnet_scale_div = 10.0  # the released code divides ResNet features by 10
    c.optim = optim_config(learning_rate=1e-3)   # Adam
    c.batch_size = 256
    c.num_epochs = 100
    c.valid_fraction = 0.3
    c.profile_steps = ""   # "21,22": a jax.profiler trace of batches 21 to 22 (of all epochs)
    c.dtype = "float32"   # or "bfloat16": the classifier's matmuls (parameters, losses float32)

    c.eval = ml_collections.ConfigDict()
    c.eval.metric = "loss"       # loss (min, released) | weighted_f1 (max), on valid
    c.eval.mode = "min"

    c.data = ml_collections.ConfigDict()
    c.data.maps_dir = ""         # the maps (<nbh>/map.json or <nbh>_map.json); empty: synthetic
    c.data.features_dir = ""     # resnetfeat.json and <nbh>/text.json; empty: synthetic files
    c.data.neighborhoods = ""    # comma-separated; empty: every map found in maps_dir
    c.data.fasttext_vec = ""     # a FastText .vec file (model.features=fasttext)
    c.data.pca_components = 0    # > 0: PCA of the ResNet / FastText vectors to this many dims
    c.data.synthetic_seed = 0    # synthetic maps and feature files
    c.data.synthetic_dim = 64    # synthetic ResNet vector length (the release's is 2048)
    # True: synthetic feature files (no features_dir) on the release's maps (maps_dir) run,
    # every table and results.json saying "synthetic perception"; False: refused
    c.data.allow_synthetic_perception = False
    return c
