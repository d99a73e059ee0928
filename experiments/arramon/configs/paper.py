r"""The paper's V/L recipe on the English release with its pre-recorded image features (Kim et
al. 2020, section 6-7, App. D-E; the official `src/main_nosim.py`): teacher forcing over the
recorded views, 300-d words, 64-d actions, hidden 128, dropout 0.3, Adam 1e-3, batch 8 (the
official `--batch_size`), the whole instruction (the official `--max_input` is 150; here the
longest instruction of the loaded splits), 150 steps per phase at evaluation. Model selection:
the official code validates on val_seen, which the paper reports; here a held-out 10% of the
training instances (by a stable hash of `mapId`) picks the best step, and val_seen / val_unseen
are only reported. 320,000 steps of 8 turns are 300 epochs of the 4,267 training instances'
8,534 turns (the official `--num_epochs`), with early stopping after 10 epochs without a better
dev nDTW. The paper's text, not the official script, fixes the rest: one update per batch of
turns on the average of the two modules' losses (App. E.2), the gradient clipped as a whole,
dropout on the word, entity and action embeddings and the logits' input, and a vocabulary of
every training word; `configs/official.py` is the official `main_nosim.py` (per-module,
per-turn updates, its dropout, `na_vocab.txt`, selection on val_seen). Refuses to run without
`data.features_dir` (`pos_sim_passed_sec/`, `vfeat_sim_passed_sec/`). `--config.model.name=vo`
gives the V/O row.

  python -m experiments.arramon.main --config=experiments/arramon/configs/paper.py \
      --config.data.manual_dir=/path/to/ArraMon/data \
      --config.data.features_dir=/path/to/ArraMon/features --workdir=/tmp/arramon_paper
"""
from experiments.arramon.configs import default


def get_config():
    c = default.get_config()
    c.model.name = "vl"
    c.model.dropout_placement = "inputs"
    c.train_update = "joint"
    c.data.tfds_config = "english"
    c.data.require_features = True
    c.data.partition_split = "train"
    c.data.partition = (0.9, 0.1)
    c.data.train_split = "partition_train"
    c.data.dev_split = "partition_dev"
    c.data.eval_splits = "val_seen,val_unseen"
    c.batch_size = 8
    c.num_steps = 320_000
    c.eval_every = 1_067          # one epoch of 8,534 turns
    c.patience = 10
    c.eval.metric = "navi_ndtw"
    c.eval.batch_size = 32
    return c
