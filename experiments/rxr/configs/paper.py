r"""The paper's multilingual RxR agent (Ku et al. 2020, section 5; Table 5, exp. 4): one agent for
English, Hindi and Telugu, trained on the guide and the follower paths of every instruction (each
instruction-path pair an example, 252K in all), reading the release's multilingual-BERT text
features (up to 512 subwords, streamed from the prepared ArrayRecord files), and the view features
you give for every viewpoint; half behavioural cloning and half policy gradient with the nDTW
reward, Adam at 1e-4, batch 32, 100K iterations; no attention-grounding loss (exp. 6 adds the visual
one: `configs/paper_grounding.py`); no gradient clipping; reference paths and horizons as long as
the longest reference path; no structural direction features; the agent section 5 describes (RCM's,
with a CNN instruction encoder in place of the bidirectional LSTM, one LSTM decoder, dot-product
attention, the previous action as input, logits h_t . a_t,i: `model.arch=rcm`) and Fried et al.
(2018)'s angle encoding, 128-d. Where the paper is silent it follows VALAN, in which it says the
agents are implemented (google-research/valan, its R2R agent and learner): a width of 512 (its
decoder's and text attention's), a value head of 64 on the text context, the actor-critic learner
with on-policy V-trace targets (value loss weight 0.5, entropy 1e-4 averaged over the action
slots, discount 0.95) and the learning rate decayed x0.8 every 5,000 steps (continuously,
tf.keras' ExponentialDecay default). VALAN's own R2R agent (2x256 bidirectional LSTM encoder,
2x512 LSTM decoder) is `--config.model.arch=valan` (`ttw_jax/rxr/valan.py`). The checkpoint is
selected on val_seen's nDTW (evaluated every 2,000 iterations, no early stop) and val_unseen is
reported, with the followers' own paths scored against the guides' (the human row, H). It refuses
to start without view features:

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
    c.model.arch = "rcm"           # section 5's agent (model.arch=valan: VALAN's R2R agent)
    c.model.hidden = 512           # silent: VALAN's decoder / text-attention width
    c.model.value_hidden = 64      # VALAN's value head, for its actor-critic learner
    c.model.angle_dim = 128        # Fried et al. (2018)'s encoding, which section 5 cites
    c.loss.pg = "actor_critic"     # VALAN's learner: V-trace targets (on-policy), a value head
    c.loss.baseline_cost = 0.5
    c.loss.entropy_weight = 1e-4   # VALAN's entropy_cost, on its mean over the action slots
    c.loss.entropy_norm = "mean"
    c.loss.gamma = 0.95            # VALAN's gcp/r2r_train.sh discounting
    c.batch_size = 32
    c.optim.learning_rate = 1e-4    # the paper's initial rate, decayed as VALAN's learner
    c.optim.schedule = "exponential"
    c.optim.decay_rate = 0.8
    c.optim.decay_steps = 5000
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
