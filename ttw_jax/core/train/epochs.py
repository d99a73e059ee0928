"""Training budgets counted in epochs: the batches of one epoch, and a config whose step counts
(`num_steps`, `eval_every`, ...) are set from epoch counts."""
from __future__ import annotations

import ml_collections


def steps_per_epoch(examples: int | None, batch_size: int) -> int:
    """ceil(examples / batch_size): the batches of one epoch over `examples` training examples
    (the last batch may wrap around)."""
    if not examples:
        raise ValueError("a budget measured in epochs needs the size of its training set")
    return -(-int(examples) // batch_size)


def in_steps(config: ml_collections.ConfigDict, per_epoch: int,
             **epochs: int) -> ml_collections.ConfigDict:
    """A copy of `config` with each key of `epochs` set to that many epochs of `per_epoch` steps:
    in_steps(c, 12, num_steps=3, eval_every=1) sets num_steps=36 and eval_every=12; `config`
    itself is unchanged."""
    out = ml_collections.ConfigDict(config.to_dict())
    for key, count in epochs.items():
        out[key] = int(count) * per_epoch
    return out
