"""Talk The Walk localization with emergent communication: CPU-sized defaults.

Synthetic neighbourhoods by default; set `--config.data.maps_dir=../shared/data/ttw/maps` (or the
official release's data directory) for the real maps. Finishes in minutes on 2 CPU cores.
"""
import ml_collections

from ttw_jax.core.train.run import optim_config

# Config keys of earlier releases ({old: new key, or why it is gone}), renamed in ttw_jax
# RENAMED_IN: an old key whose value is a key is still accepted, with a warning, until the
# next version; the others are refused with the reason.
RENAMED_IN = "0.1.0"
RENAMED = {"comm": "model.comm", "masc": "model.name (masc | no_masc)",
           "features": "model.features", "kernel_init": "model.kernel_init",
           "tourist_init_std": "model.tourist_init_std",
           "tourist_gate_init": "model.tourist_gate_init", "learning_rate": "optim.learning_rate",
           "lr_schedule": "optim.schedule", "warmup_steps": "optim.warmup_steps"}


def get_config():
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.num_seeds = 1   # > 1: seeds seed .. seed + N - 1, in one program where the trainer allows
    c.num_devices = 0  # data-parallel over the first N devices of one process; 0: all devices
    c.T = 3                      # number of tourist moves
    c.model = ml_collections.ConfigDict()
    c.model.name = "masc"        # masc | no_masc (the baseline: a shared ordinary 3x3 kernel)
    c.model.comm = "continuous"  # continuous | discrete
    c.model.kernel_init = "identity"   # MASC / no-MASC kernel: identity (+ noise) or normal
    c.model.tourist_init_std = 0.1     # std of the tourist's embeddings at initialisation
    c.model.tourist_gate_init = "normal"  # normal | partition (each message dim starts on one step)
    c.model.features = 128       # message / embedding size L (the paper uses 500)
    c.model.init = "ours"        # ours | released (the released code's initialisation, configs/paper.py)
    c.batch_size = 64
    # Adam at a peak of 3e-3: constant, or cosine (linear warm-up, cosine decay to 1%)
    c.optim = optim_config(learning_rate=3e-3, schedule="cosine", warmup_steps=200,
                           end_fraction=0.01)
    c.optim.clip_scope = "global"  # global | per_agent (tourist and guide clipped apart, released)
    c.loss_reduction = "mean"    # mean | sum (over the batch, as the released code)
    c.num_steps = 8000
    c.num_epochs = 0             # data.train_walks=enumerated: epochs (num_steps then follows)
    c.eval_every_epochs = 1      # data.train_walks=enumerated: evaluate every this many epochs
    c.eval_every = 1000          # validation accuracy, checkpoint, early-stopping check
    c.patience = 6               # evaluations without improvement before stopping
    c.log_every = 10             # also the host-sync period of the training loop
    c.max_checkpoints = 2
    c.profile_steps = ""   # "21,22": a jax.profiler trace of steps 21 to 22 in <workdir>/profile
    c.dtype = "float32"   # or "bfloat16": activations and matmuls (parameters, losses float32)

    c.data = ml_collections.ConfigDict()
    c.data.maps_dir = ""         # empty: synthetic neighbourhoods with the real statistics
    c.data.neighborhoods = ""    # comma-separated; empty: every map found in maps_dir
    c.data.synthetic_seed = 0
    c.data.label = "final"       # final: where the walk ends (the paper's text) | start: where it
                                 # begins (the released training code and its full-task check)
    c.data.orientation_aware = False  # True: N/E/S/W tourist, TURNLEFT/TURNRIGHT/FORWARD (section 2)
    c.data.train_walks = "sampled"    # sampled: fresh random walks every step (ours) | enumerated:
                                      # every (window, start, actions) once per epoch (the 2018
                                      # release; the README's revision table)

    c.eval = ml_collections.ConfigDict()
    c.eval.metric = "accuracy"   # validation accuracy: early stopping and best parameters
    c.eval.mode = "max"
    c.eval.chunk_size = 8192     # examples per evaluation call
    c.eval.greedy_messages = True  # discrete: send the most likely bits at evaluation

    c.full_task = ml_collections.ConfigDict()
    c.full_task.repeats = 8      # episodes per (window, target corner)
    c.full_task.max_steps = 150
    c.full_task.max_evals = 3
    c.full_task.greedy = False   # the guide samples its prediction, as in the paper
    c.full_task.splits = "test"

    c.write_plots = True
    return c
