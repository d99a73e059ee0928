r"""The paper's multilingual RxR agent (Ku et al. 2020, section 5; Table 5, exp. 4): one agent for
English, Hindi and Telugu, trained on the guide and the follower paths of every instruction (each
instruction-path pair an example, 252K in all), reading the release's multilingual-BERT text
features (up to 512 subwords, streamed from the prepared ArrayRecord files), and the view features
you give for every viewpoint; half behavioural cloning and half policy gradient with the nDTW
reward, Adam at 1e-4, batch 32, 100K iterations; no attention-grounding loss (exp. 6 adds the visual
one: `configs/paper_grounding.py`); no gradient clipping; reference paths and horizons as long as
the longest reference path; no structural direction features. The checkpoint is selected on
val_seen's nDTW (evaluated every 2,000 iterations, no early stop) and val_unseen is reported, with
the followers' own paths scored against the guides' (the human row, H). It refuses to start without
view features:

  python -m experiments.rxr.main --config=paper --workdir=/tmp/rxr_paper \
      --config.data.manual_dir=/data/rxr --config.data.features=/data/img_features.tsv \
      --config.data.connectivity_dir=../shared/data/matterport/connectivity

The other rows of Table 5 and Table 6: `paper_mono.py` (exp. 3, one language), exp. 1 / 2 with
`--config.data.train_annotators=guide` / `follower`, `paper_xlate.py` (exp. 5),
`paper_grounding.py` (exp. 6), `paper_multitask.py` (Table 6, exp. 8).
"""
from experiments.rxr.configs import default


def get_config():
    c = default.get_config()
    c.model.structure_features = False
    c.batch_size = 32
    c.optim.learning_rate = 1e-4
    c.optim.schedule = "constant"
    c.optim.grad_clip = 0.0        # section 5 names none (VALAN's gradient_clip_norm is 0)
    c.num_steps = 100_000
    c.eval_every = 2000
    c.patience = 10 ** 6           # trained to the end; the best val_seen step is kept
    c.train_horizon = 0            # the longest reference path
    c.loss.visual_grounding = 0.0
    c.loss.textual_grounding = 0.0
    c.loss.grounding_steps = "on_gold_path"
    c.data.tfds_config = "guide_follower"
    c.data.train_annotators = ""   # guide and follower paths
    c.data.eval_annotators = "guide"
    c.data.text_features = True
    c.data.stream = True
    c.data.max_tokens = 512        # multilingual BERT's input limit
    c.data.max_path = 0            # the longest reference path of the loaded splits
    c.data.features = ""           # your view features (refused when empty)
    c.data.feature_dtype = "bfloat16"
    c.data.dev_split = "val_seen"
    c.data.eval_splits = "val_unseen"
    c.eval.horizon = 0
    c.eval.metric = "ndtw"
    c.eval.human = True
    return c
