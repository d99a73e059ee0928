"""RxR RCM agent on the synthetic config: templated en-US / hi-IN instructions on real Matterport
graphs, synthetic view features (each view shows its neighbour's landmark); minutes on 2 cores.

The synthetic data need the Matterport connectivity files (`data.connectivity_dir`, e.g.
../shared/data/matterport/connectivity). Ablations: `--config.model.name=language_only` (angle
features only) or `vision_only` (the instruction is never read). `--config.model.arch=valan
--config.loss.pg=actor_critic`: the VALAN agent and learner (`configs/paper.py`'s).
"""
import ml_collections

from ttw_jax.core.train.run import optim_config

# Config keys of earlier releases ({old: new key, or why it is gone}), renamed in ttw_jax
# RENAMED_IN: an old key whose value is a key is still accepted, with a warning, until the
# next version; the others are refused with the reason.
RENAMED_IN = "0.1.0"
RENAMED = {"model.kind": "model.name", "learning_rate": "optim.learning_rate",
           "lr_schedule": "optim.schedule", "grad_clip": "optim.grad_clip",
           "test_horizon": "eval.horizon", "loss.horizon": "train_horizon",
           "loss.grounding_weight": "loss.visual_grounding and loss.textual_grounding (one "
                                    "weight per attention)"}


def get_config():
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.num_seeds = 1   # > 1: seeds seed .. seed + N - 1, in one program where the trainer allows
    c.num_devices = 0  # data-parallel over the first N devices of one process; 0: all devices
    c.mode = "train"               # train | baselines (gold replay + baselines, nothing trained)
    c.model = ml_collections.ConfigDict()
    c.model.name = "full"          # full | language_only | vision_only
    c.model.embed_dim = 128
    c.model.hidden = 256
    c.model.conv_layers = 2        # residual 1-D convolutions over the words
    c.model.kernel = 3
    c.model.step_embedding = 0     # > 0: embed the step number (min(t, n - 1)) into the decoder
    # each navigable direction's edge length and neighbour degree (not in the paper's agent:
    # off in configs/rxr.py)
    c.model.structure_features = True
    # rcm: RCMAgent (the keys above and value_hidden); valan: ValanAgent (ttw_jax/rxr/valan.py:
    # model.valan's sizes, VALAN's R2R agent by default, and embed_dim for word embeddings);
    # either takes model.name
    c.model.arch = "rcm"
    c.model.value_hidden = 0       # rcm: > 0 adds a value head that wide (actor-critic), 0 none
    c.model.angle_dim = 4          # angle encoding of views and directions: 4 | 128 (Fried et al.)
    c.model.valan = ml_collections.ConfigDict(dict(
        encoder=256, encoder_layers=2,     # bidirectional LSTMs, units per direction
        decoder=512, decoder_layers=2,     # stacked LSTMs
        text_attention=512, visual_attention=256, action=256, value_hidden=64,
        embed_action=True))                # the previous action's encoding a decoder input

    c.batch_size = 32              # half behavioural cloning, half policy gradient
    # Adam (Ku et al. 2020 use 1e-4; 5e-4 fits a CPU budget); optim.schedule=cosine decays to
    # end_fraction (5%) of it at num_steps; exponential (configs/paper.py): x decay_rate every
    # decay_steps (VALAN's), continuously.
    c.optim = optim_config(learning_rate=5e-4, grad_clip=5.0, end_fraction=0.05,
                           decay_rate=0.8, decay_steps=5000)
    c.num_steps = 3000
    c.eval_every = 250             # dev metric (eval.metric), checkpoint, early stopping
    c.patience = 4
    c.log_every = 10               # also the host-sync period
    c.max_checkpoints = 2
    c.profile_steps = ""   # "21,22": a jax.profiler trace of steps 21 to 22 in <workdir>/profile
    c.dtype = "float32"   # or "bfloat16": activations and matmuls (parameters, losses float32)
    c.train_horizon = 12           # training rollout steps

    c.loss = ml_collections.ConfigDict()
    c.loss.bc_every = 2            # row i is cloned when i % bc_every == 0 (1: all, 0: none)
    c.loss.gamma = 0.9
    c.loss.stop_reward = 1.0       # end-of-episode reward stop_reward * (1 - NE / radius)
    c.loss.entropy_weight = 0.01
    # sum: the entropy over the valid actions | mean: divided by the action slots, the absent
    # directions included (VALAN's mean over the logits)
    c.loss.entropy_norm = "sum"
    # reinforce: return minus the batch mean | actor_critic: V-trace (on-policy) advantages and a
    # value loss weighted baseline_cost (VALAN's learner; model.arch=valan's value head)
    c.loss.pg = "reinforce"
    c.loss.baseline_cost = 0.5
    # attention-grounding losses (only where pose-trace masks exist), one weight per attention,
    # at the steps of `grounding_steps`: cloned (the cloning rows' reference steps) |
    # on_gold_path (every step at which the agent's path so far is the reference's prefix)
    c.loss.visual_grounding = 1.0
    c.loss.textual_grounding = 1.0
    c.loss.grounding_steps = "cloned"
    c.loss.success_radius = 3.0

    c.data = ml_collections.ConfigDict()
    c.data.tfds_config = "synthetic"   # rxr TFDS config: synthetic | r2r | guide | ...
    c.data.tfds_dir = ""           # empty: ~/tensorflow_datasets
    c.data.manual_dir = ""         # real configs: the downloaded files (synthetic: unused)
    c.data.connectivity_dir = ""   # Matterport <scan>_connectivity.json files (required)
    c.data.train_split = "train"
    c.data.dev_split = "val_seen"  # early stopping on eval.metric; "train_holdout": paths of
    c.data.holdout_every = 20      # train with path_id % holdout_every == 0, left out of training
    c.data.eval_splits = "val_unseen"   # never the dev split (refused)
    # RxR annotations scored on the dev / evaluation splits: guide (the paper's), follower, or
    # guide,follower; R2R and synthetic records are always scored
    c.data.eval_annotators = "guide"
    c.data.train_annotators = ""   # "" (every annotator of the config) | guide | follower
    # kept languages, every split: "" (all) or a comma list of groups (en, hi, te) or locales
    c.data.languages = ""
    # tokens, or text-feature subwords: a longer instruction is cut with a warning; 0 sizes it
    # from the data, the longest instruction of the loaded splits (results.json records the
    # value used: provenance.token_limits)
    c.data.max_tokens = 0
    c.data.text_features = False   # True: the release's multilingual-BERT features (required)
    # True (with text_features): the features stay in the TFDS ArrayRecord files and are read
    # when a batch uses them (grain threads, per-process shards, the stream's state in the
    # checkpoints); the release's are tens of GB
    c.data.stream = False
    c.data.stream_threads = 2
    c.data.max_path = 12
    # "" (angles only) | synthetic | a file: Matterport3DSimulator .tsv, .h5 / .hdf5 (one
    # [36, D] dataset per <scan>_<viewpoint>) or .npz (ids, features [V, 36, D])
    c.data.features = "synthetic"
    c.data.feature_dtype = "float32"   # of the device table: float32 | bfloat16 (half the memory)
    c.data.features_cache = ""     # where .tsv / .hdf5 files are converted (local; "" = default)
    # a row of a loaded scan whose viewpoint its connectivity graph lacks: refuse (an error naming
    # the file and line) | skip (skipped; counted with a few ids in a log line per file)
    c.data.features_extra_viewpoints = "refuse"
    # Matterport house segmentations (<house_dir>/<scan>/house_segmentations/<scan>.house): the
    # metrics' distances between panorama centres, as VALAN; "": the connectivity poses
    c.data.house_dir = ""
    # multitask (Ku et al. 2020, Table 6): a second rxr TFDS config trained on beside this one
    # ("r2r"), its manual files, the share of training examples drawn from it (-1: in
    # proportion to the datasets' sizes) and its splits reported as <config>/<split>
    c.data.multitask = ""
    c.data.multitask_dir = ""
    c.data.multitask_share = -1.0
    c.data.multitask_eval_splits = "val_unseen"
    c.data.feature_dim = 32        # synthetic features
    # data.features=synthetic with a real release (per-node identity codes, not image features):
    # refused unless True; every table then says "synthetic perception"
    c.data.allow_synthetic_perception = False
    c.data.feature_noise = 0.3
    c.data.num_landmarks = 16

    c.eval = ml_collections.ConfigDict()
    c.eval.horizon = 20            # greedy decoding steps
    c.eval.batch_size = 256
    c.eval.baselines = "random_walk,random_heading,first_step"
    c.eval.baseline_seeds = 3
    # "go straight" in the Table 4 baselines (ttw_jax.rxr.evaluation.baseline_factory): fixed
    # (the most literal: keep the heading; N moves are the only stopping criterion), forward
    # (stop when nothing lies ahead), nearest (follow the edges' headings); a comma list
    # reports each
    c.eval.straight = "fixed"
    c.eval.per_annotator = False   # also report each annotator's paths separately
    c.eval.human = False           # the followers' paths scored against the guides' (row H)
    c.eval.write_predictions = True   # predictions_<split>.json(l): leaderboard files
    c.eval.metric = "ndtw"         # early stopping / best parameters (RxR's primary metric)
    c.eval.mode = "max"            # min for pl / ne
    return c
