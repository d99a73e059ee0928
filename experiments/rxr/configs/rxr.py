r"""The RCM agent on the RxR release at the paper's scale and settings (Ku et al. 2020, section
5): guide annotations of all languages, the release's multilingual-BERT text features
(instructions up to 512 subwords; about 150 on average), reference paths and horizons as long
as the longest reference path (`data.max_path=0`, `train_horizon=0`, `eval.horizon=0`), Adam at
1e-4, batch 32, 100K iterations, half behavioural cloning and half policy gradient, no
structural direction features (the paper's agent has none). Needs the release in
`data.manual_dir` (BUILD.md), the connectivity files and view features for every viewpoint:

  python -m experiments.rxr.main --config=rxr --workdir=/tmp/rxr_paper \
      --config.data.manual_dir=/data/rxr --config.data.features=/data/rxr_views.npz \
      --config.data.connectivity_dir=../shared/data/matterport/connectivity

Per-language models (the paper's monolingual rows): `--config.data.tfds_config=guide_en`
(or guide_hi, guide_te); training on followers too: `guide_follower` (evaluation still scores
the guides' paths, `data.eval_annotators`).
"""
from experiments.rxr.configs import default


def get_config():
    c = default.get_config()
    c.model.structure_features = False
    c.batch_size = 32
    c.optim.learning_rate = 1e-4
    c.optim.schedule = "constant"
    c.num_steps = 100_000
    c.eval_every = 2000
    c.patience = 10
    c.train_horizon = 0            # the longest reference path
    c.data.tfds_config = "guide"
    c.data.text_features = True
    c.data.max_tokens = 512
    c.data.max_path = 0            # the longest reference path of the loaded splits
    c.data.features = ""           # your view features (.npz; required for the full agent)
    c.data.dev_split = "val_unseen"
    c.data.eval_splits = "val_seen,val_unseen"
    c.eval.horizon = 0
    c.eval.metric = "ndtw"
    return c
