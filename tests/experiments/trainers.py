"""The seven experiment trainers at test size: one tiny config each, the run that the trainer
tests share (trained once per test session), and what every trainer must honour."""
from __future__ import annotations

import dataclasses
import importlib
import os
from typing import Callable

import ml_collections

from tests.conftest import shared_path
from tests.helpers import override


@dataclasses.dataclass(frozen=True)
class Trainer:
    name: str                                   # experiments.<name>
    tiny: Callable[[str], ml_collections.ConfigDict]  # tiny(tfds_dir) -> config
    eval_steps: tuple[int, ...]                 # steps of the (first stage's) evaluations
    crash_after: int                            # hook calls (training steps, all stages) before a crash
    checkpoints_at_crash: tuple[str, ...]       # what `<workdir>/<stage>/checkpoints` holds then
    stage: str = ""                             # sub-directory of the crashed stage ("" single-stage)
    eval_stage: str = ""                        # sub-directory whose evaluations are `eval_steps`
    changed: tuple[str, object, str] = ("seed", 1, "seed: 0 -> 1")  # (key, value, message)
    outputs: tuple[str, ...] = ("results.json", "config.json", "metrics.jsonl")
    resumable: bool = True                      # checkpoints and resumes (else reruns from scratch)
    xla_optimized: bool = False                 # XLA optimisations on in its runs (off is the
                                                # suite's default): only where the run time they
                                                # save outweighs their compile time (RxR and
                                                # ArraMon are off: their trainer tests took
                                                # 405 s with them, 326 s without)
    parallel_seeds: bool = False                # on the seed axis (config.num_seeds in one program)
    # The tiny runs train on one of the 8 fake devices (`config.num_devices`): on 2 cores the 8
    # devices' threads took a trainer test about twice as long (tests/touchdown/test_nav_train.py,
    # test_sdr_train.py and tests/rxr/test_train.py: 683 s of test time on 8, 338 s on 1). The
    # data-parallel step is checked on all 8 (tests/*/test_data_parallel.py, and the emergent
    # run on 8 devices against its one-device run: tests/talk_the_walk/test_emergent_train.py).
    num_devices: int = 1

    @property
    def train(self):
        return importlib.import_module(f"experiments.{self.name}.train")

    @property
    def default(self):
        return importlib.import_module(f"experiments.{self.name}.configs.default")

    def config(self, tfds_dir: str, learning_seed: int = 0,
               **overrides) -> ml_collections.ConfigDict:
        """The tiny config with `overrides`; a learning seed (`--learning-seed`) is added to
        its `seed`."""
        config = self.tiny(tfds_dir)
        config.num_devices = self.num_devices
        config = override(config, **overrides)
        config.seed += learning_seed
        return config


def _emergent(tfds_dir):
    c = TRAINERS["ttw_emergent"].default.get_config()
    c.T = 1
    c.model.features = 16
    c.batch_size, c.num_steps, c.eval_every, c.log_every, c.patience = 16, 30, 10, 5, 100
    # Constant: the default's 200-step warm-up would keep all 30 steps below 4.5e-4 (the run
    # stayed at chance for some seeds: tests/learning_spread.py).
    c.optim.schedule = "constant"
    c.full_task.repeats, c.full_task.max_steps = 1, 30
    c.eval.chunk_size = 4096
    return c


def _language(tfds_dir):
    c = TRAINERS["ttw_language"].default.get_config()
    c.data.tfds_dir = tfds_dir
    c.contexts, c.compare_masc, c.generated.Ts, c.pg.T = "1", False, "1", 1
    for stage, steps in ((c.tourist, 30), (c.guide, 12), (c.generated, 12), (c.pg, 6)):
        stage.num_steps, stage.eval_every, stage.batch_size = steps, steps // 2, 16
    c.tourist.embed = c.tourist.hidden = 16
    c.guide.embed = c.guide.hidden = c.guide.features = 8
    c.log_every, c.patience = 3, 100
    c.data.generated_len = 8
    c.eval.num_walks = c.eval.batch_size = 64
    c.eval.beam_sizes = "1,4"            # Table 12's sweep (beam 4 is the "beam" decoding's)
    c.full_task.repeats, c.full_task.max_steps, c.full_task.splits = 1, 10, "test"
    return c


def _landmarks(tfds_dir):
    c = TRAINERS["ttw_landmarks"].default.get_config()
    c.num_epochs = 3
    return c


def _touchdown_nav(tfds_dir):
    # The model the beats-random test trains for longer (the same compiled programs).
    c = TRAINERS["touchdown_nav"].default.get_config()
    c.model.text_hidden = c.model.hidden = 64
    c.model.conv_features = 16
    c.optim.learning_rate = 4e-3
    c.batch_size, c.num_steps, c.eval_every, c.log_every, c.patience = 16, 24, 8, 4, 100
    c.data.tfds_dir = tfds_dir
    c.data.eval_splits = "test"
    c.eval.baselines = "random"
    return c


def _touchdown_sdr(tfds_dir):
    c = TRAINERS["touchdown_sdr"].default.get_config()
    c.model.channels = c.model.mlp_hidden = c.model.hidden = 8
    c.model.embed_dim = 16
    c.batch_size, c.num_steps, c.eval_every, c.log_every, c.patience = 16, 12, 4, 4, 100
    c.data.tfds_dir = tfds_dir
    c.data.eval_splits = "test"
    c.num_heatmaps = 3
    return c


def _rxr(tfds_dir):
    # The model the beats-the-baselines test trains for longer (the same compiled programs).
    c = TRAINERS["rxr"].default.get_config()
    c.model.embed_dim, c.model.hidden = 16, 64
    c.optim.learning_rate = 2e-3
    c.batch_size, c.num_steps, c.eval_every, c.log_every, c.patience = 16, 16, 8, 4, 100
    c.train_horizon, c.eval.horizon = 8, 10
    c.data.tfds_dir = tfds_dir
    c.data.connectivity_dir = shared_path("matterport", "connectivity")
    c.data.eval_splits = "val_unseen"
    c.eval.baselines, c.eval.baseline_seeds = "random_walk,random_heading", 1
    return c


def _arramon(tfds_dir):
    c = TRAINERS["arramon"].default.get_config()
    c.model.embed_dim, c.model.action_dim, c.model.hidden = 32, 16, 64
    c.optim.learning_rate = 1e-2
    c.batch_size, c.num_steps, c.eval_every, c.log_every, c.patience = 16, 8, 4, 4, 100
    c.eval.horizon = 20      # the module's tests beside a twin at 40: 158 s against 167 s
    c.data.tfds_dir = tfds_dir
    c.data.dev_split = c.data.eval_splits = "val_unseen"
    c.eval.batch_size = 200
    c.eval.perfect_navigation = False      # one program less to compile (the features run,
    return c                               # tests/arramon/test_features.py, checks it)


TRAINERS = {t.name: t for t in (
    Trainer("ttw_emergent", _emergent, (10, 20, 30), crash_after=17, checkpoints_at_crash=("10",),
            parallel_seeds=True,
            changed=("model.features", 32, "model.features: 16 -> 32"),
            outputs=("results.json", "config.json", "metrics.jsonl", "learning_curve.png",
                     "masc_masks.png")),
    Trainer("ttw_language", _language, (15, 30), crash_after=30 + 12 + 8, parallel_seeds=True,
            checkpoints_at_crash=("6",), stage="guide_generated_T1", eval_stage="tourist",
            changed=("guide.hidden", 12, "guide.hidden: 8 -> 12"),
            outputs=("results.json", "config.json", "vocab.json", "tourist/metrics.jsonl",
                     "guide_human_c1_masc/metrics.jsonl", "guide_generated_T1/metrics.jsonl",
                     "pg_T1/metrics.jsonl")),
    Trainer("ttw_landmarks", _landmarks, (1, 2, 3), crash_after=0, checkpoints_at_crash=(),
            resumable=False, changed=("num_epochs", 4, "num_epochs: 3 -> 4"),
            outputs=("results.json", "config.json", "metrics.jsonl", "learning_curve.png")),
    Trainer("touchdown_nav", _touchdown_nav, (8, 16, 24), crash_after=13,
            checkpoints_at_crash=("8",), xla_optimized=True, parallel_seeds=True,
            changed=("model.name", "rconcat", "model.name: 'ga' -> 'rconcat'"),
            outputs=("results.json", "config.json", "metrics.jsonl", "vocab.json",
                     "trajectories.png", "predictions_test.jsonl")),
    Trainer("touchdown_sdr", _touchdown_sdr, (4, 8, 12), crash_after=6,
            checkpoints_at_crash=("4",), parallel_seeds=True,
            changed=("model.name", "concat", "model.name: 'lingunet' -> 'concat'"),
            outputs=("results.json", "config.json", "metrics.jsonl", "vocab.json",
                     "heatmaps.png", "predictions_test.jsonl")),
    Trainer("rxr", _rxr, (8, 16), crash_after=11, checkpoints_at_crash=("8",), parallel_seeds=True,
            changed=("model.name", "vision_only", "model.name: 'full' -> 'vision_only'"),
            outputs=("results.json", "config.json", "metrics.jsonl", "vocab.json",
                     "predictions_val_unseen.jsonl")),
    Trainer("arramon", _arramon, (4, 8), crash_after=7, checkpoints_at_crash=("4",),
            changed=("model.name", "lo", "model.name: 'vl' -> 'lo'"), parallel_seeds=True,
            outputs=("results.json", "config.json", "metrics.jsonl", "vocab.json",
                     "trajectories.png", "predictions_val_unseen.json")),
)}


def run_dir(workdir: str, trainer: Trainer) -> str:
    return os.path.join(workdir, trainer.stage) if trainer.stage else workdir
