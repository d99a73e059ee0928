"""Talk The Walk landmark classification: synthetic maps and synthetic view features by default.

Real maps: `--config.data.maps_dir=../shared/data/ttw/maps` (features stay synthetic unless
`--config.data.features` names a `.npz` / `.json` file in the layout of
`ttw_jax/talk_the_walk/landmarks/features.py`). Trains in seconds on a CPU.
"""
import ml_collections

from ttw_jax.core.train.run import optim_config

# Config keys of earlier releases: overriding one on the command line names its replacement.
RENAMED = {"hidden": "model.hidden", "pool": "model.pool", "dropout": "model.dropout",
           "learning_rate": "optim.learning_rate", "weight_decay": "optim.weight_decay",
           "select_metric": "eval.metric"}


def get_config():
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.model = ml_collections.ConfigDict()
    c.model.name = "landmark_classifier"
    c.model.hidden = 128         # per-view Dense width
    c.model.pool = "max"         # max | mean over the 4 views
    c.model.dropout = 0.1        # on the pooled vector
    c.optim = optim_config(learning_rate=3e-3, weight_decay=1e-4)   # AdamW
    c.batch_size = 0             # 0: full batch (all training corners every step)
    c.num_steps = 300
    c.eval_every = 10            # validation F1 for model selection
    c.max_pos_weight = 100.0     # clip of the inverse-frequency positive weights
    c.random_p = 0.5             # the random baseline's probability of predicting a class

    c.eval = ml_collections.ConfigDict()
    c.eval.metric = "micro_f1"   # micro_f1 | macro_f1 (on valid): model selection
    c.eval.mode = "max"

    c.data = ml_collections.ConfigDict()
    c.data.maps_dir = ""         # empty: synthetic neighbourhoods with the real statistics
    c.data.neighborhoods = ""    # comma-separated; empty: every map found in maps_dir
    c.data.synthetic_seed = 0    # synthetic maps and synthetic features
    c.data.features = ""         # .npz / .json view features; empty: synthetic features
    c.data.allow_missing = False  # drop corners without features instead of failing
    c.data.standardize = True    # z-score feature dimensions with training statistics
    c.data.synthetic_dim = 64
    c.data.synthetic_noise = 0.3
    c.data.synthetic_visibility = 0.5
    return c
