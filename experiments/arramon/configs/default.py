"""ArraMon V/L baseline on synthetic instances (the `arramon` TFDS builder's `synthetic`
config, built on first use): CPU-sized defaults. `--config.model.name=vo|lo` gives the
ablations. For the real data see `configs/real_val_seen.py`."""
import ml_collections

from ttw_jax.core.train.run import optim_config

# Config keys of earlier releases ({old: new key, or why it is gone}), renamed in ttw_jax
# RENAMED_IN: an old key whose value is a key is still accepted, with a warning, until the
# next version; the others are refused with the reason.
RENAMED_IN = "0.1.0"
RENAMED = {"model.kind": "model.name", "learning_rate": "optim.learning_rate",
           "grad_clip": "optim.grad_clip", "metric": "eval.metric", "horizon": "eval.horizon"}


def get_config():
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.num_seeds = 1   # > 1: seeds seed .. seed + N - 1, in one program where the trainer allows
    c.num_devices = 0  # data-parallel over the first N devices of one process; 0: all devices
    c.mode = "train"               # train | baselines (the random walk, nothing trained)
    c.model = ml_collections.ConfigDict()
    c.model.name = "vl"            # vl | vo | lo
    c.model.embed_dim = 300        # paper: 300-d word embeddings
    c.model.action_dim = 64        # paper: 64-d action embeddings
    c.model.hidden = 128           # paper: LSTM hidden 128
    c.model.dropout = 0.3
    c.model.logits_from_state = True   # official decoder: Linear([v; l; h]); False: eq. 6
    # Dropout on the word, entity and action embeddings and the logits' input ("inputs"), or
    # on the action embedding and the logits ("action_and_logits", the official decoder's).
    c.model.dropout_placement = "inputs"

    # Training of the navigation module: teacher forcing (0.0, the paper), or student forcing
    # (DAgger-style): each step executes the module's own sample with this probability, and
    # the labels are the demonstration while the agent is on it, the expert of
    # `ttw_jax.arramon.expert` after it left it.
    c.student_forcing = 0.0
    c.train_horizon = 0            # navigation steps per training rollout (0: the gold length)
    # "joint": one update per batch of turns on the mean of both modules' losses (App. E.2),
    # the gradient clipped as a whole; "per_module_per_turn": the official main_nosim.py, per
    # batch of instances (batch_size instances) four updates, turn 1 then turn 2, navigation
    # then assembly, each on its module's own loss and clipped by itself (losses.py).
    c.train_update = "joint"

    c.batch_size = 32
    c.optim = optim_config(learning_rate=1e-3, grad_clip=5.0)   # Adam (paper)
    c.num_steps = 1200
    c.eval_every = 300             # dev metric, checkpoint, early stopping
    c.patience = 4
    c.log_every = 10               # also the host-sync period
    c.max_checkpoints = 2
    c.profile_steps = ""   # "21,22": a jax.profiler trace of steps 21 to 22 in <workdir>/profile
    c.dtype = "float32"   # or "bfloat16": activations and matmuls (parameters, losses float32)

    c.data = ml_collections.ConfigDict()
    c.data.tfds_config = "synthetic"   # or english / hindi (manual download)
    c.data.tfds_dir = ""           # empty: ~/tensorflow_datasets
    c.data.manual_dir = ""         # english / hindi: the directory with the .json files
    c.data.train_split = "train"
    c.data.dev_split = "val_seen"  # early stopping
    c.data.eval_splits = "val_seen,val_unseen"
    # Real data without a train file: split one split's instances by a stable hash of `mapId`
    # into partition_train / partition_dev / partition_test with these fractions (train, dev).
    c.data.partition_split = ""
    c.data.partition = (0.7, 0.1)
    # Words per instruction: 0 sizes it from the loaded splits (the longest instruction; the
    # official --max_input is 150); a positive limit that would cut a real instruction is
    # refused (synthetic ones are cut with a warning).
    c.data.max_tokens = 0
    c.data.max_objects = 8
    # The vocabulary: empty, every word of the training split's instructions; or an official
    # vocabulary file read as shipped (the release's na_vocab.txt: one token a line, <PAD> and
    # <UNK> first, words outside it <UNK>); a bare file name is read from data.manual_dir.
    c.data.vocab_file = ""
    # The release's pre-recorded image features (`pos_sim_passed_sec/`, `vfeat_sim_passed_sec/`
    # in one folder): V/L and V/O then read them (teacher forcing over the recorded views, as
    # the official main_nosim.py; the nearest recorded pose's views in evaluation rollouts).
    c.data.features_dir = ""
    c.data.features_cache = ""     # the float16 pack (local); empty: <tfds_dir>/arramon_features
                                   # (~/tensorflow_datasets/... when tfds_dir is a bucket)
    c.data.require_features = False    # True (configs/paper.py): refuse to run without them
    c.data.missing_feature = "zeros"   # a step without an entry: zeros (official) | previous
    c.data.stream_threads = 2      # grain threads reading the packed rows
    # V/L and V/O without data.features_dir see the simulator's symbolic views, a synthetic
    # stand-in for the release's images: refused with the release's instructions unless True
    # (every table and results.json then say "synthetic perception").
    c.data.allow_synthetic_perception = False
    # Synthetic cities only: V/L and V/O see rendered [7, 7, render_width] feature maps of the
    # view at their pose (`ttw_jax.arramon.render`, codes from render_seed), and every
    # evaluation split gets a second row under the nearest-recorded-pose proxy of the release.
    c.data.rendered_views = False
    c.data.render_width = 2048     # the release's ResNet maps' channels
    c.data.render_seed = 0

    c.eval = ml_collections.ConfigDict()
    c.eval.metric = "ctc3"         # early stopping and best parameters: any of METRICS
    c.eval.mode = "max"
    c.eval.horizon = 150           # step limit per phase at evaluation (paper)
    c.eval.batch_size = 256
    c.eval.ctc_rule = "distance"   # distance (the paper's CTC-k) | strict (own pick-up only)
    c.eval.baselines = "random"    # random, shortest_path (the ground truth's actions)
    c.eval.baseline_seeds = 1      # mean (and std) over this many seeds
    c.eval.perfect_navigation = True   # also: assembly after the ground truth's navigation
    c.eval.num_figures = 4         # dev instances drawn in trajectories.png (0: none)
    return c
