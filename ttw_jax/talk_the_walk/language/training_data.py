"""What the natural-language trainer reads (`experiments/ttw_language`): the vocabulary (ours or
the release's dictionary), every split's map windows and human examples per context size, the
random-walk evaluation sets and the dialogues' own trajectories."""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from ttw_jax.core import paths
from ttw_jax.core.vocab import Vocabulary
from ttw_jax.talk_the_walk import maps, walks as localization
from ttw_jax.talk_the_walk.language import dataset as ttw_language_data, dialogues as td, release_dict

HUMAN_KEYS = ("obs", "actions", "num_moves", "utterance", "utterance_len", "message",
              "message_len", "landmarks", "target")
VOCABS = ("ours", "released")


def ints(spec) -> list[int]:
    """"1,3,5" (or an int) -> [1, 3, 5]: the config's comma-separated lists."""
    return [int(s) for s in str(spec).split(",") if s.strip()]


def take(arrays: dict, keys) -> dict:
    """The entries of `keys` that `arrays` holds."""
    return {k: arrays[k] for k in keys if k in arrays}


def load_data(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Vocabulary, window tables per split and padded human examples per context size."""
    d = config.data
    dialogues, nmaps = ttw_language_data.load_dialogues(d.tfds_config, d.tfds_dir or None,
                                                        d.manual_dir or None)
    vocab_path = paths.resolve(workdir) / "vocab.json"
    source = vocab_source(config)
    if vocab_path.exists():
        vocab = Vocabulary.load(vocab_path)
    else:
        vocab = build_vocab(config, dialogues, source)
        if jax.process_index() == 0:
            vocab.save(vocab_path)
    tokenizer = release_dict.split_tokenize if d.vocab == "released" else td.tokenize
    tables = {s: maps.windows(list(nmaps.values()), s).landmarks for s in maps.SPLITS}
    empty = [s for s in maps.SPLITS if not dialogues[s] or not len(tables[s])]
    if empty:
        raise ValueError(f"talk_the_walk/{d.tfds_config} has no dialogues or windows in split(s) "
                         f"{empty}; every experiment stage trains on train and selects on valid")
    human, examples = {}, {}
    for ctx in sorted(set(ints(config.contexts)) | {1}):
        examples[ctx] = {s: td.utterance_examples(
            dialogues[s], context=ctx, drop_short_context=d.drop_short_context,
            blocked_forward=d.blocked_forward, orientation_aware=d.orientation_aware)
            for s in maps.SPLITS}
        human[ctx] = {s: td.encode_examples(examples[ctx][s], nmaps, vocab, d.max_moves,
                                            d.utterance_len, d.message_len, d.orientation_aware,
                                            tokenizer)
                      for s in maps.SPLITS}
    return {"vocab": vocab, "vocab_source": source, "tables": tables, "human": human,
            "examples": examples[1], "num_dialogues": {s: len(v) for s, v in dialogues.items()}}


def vocab_source(config: ml_collections.ConfigDict) -> str:
    """Where the vocabulary comes from (`data.vocab`): "train utterances" (ours), the release's
    `dict.txt` (its path, when `data.tfds_config=real` and the release folder has one), "built as
    ttw/dict.py" from the release's dialogue files (`real` without it), or "built as ttw/dict.py
    from <config> dialogues" (a synthetic config's train, valid and test dialogues)."""
    d = config.data
    if d.vocab != "released":
        return "train utterances"
    if d.tfds_config == "real":
        path = os.path.join(d.manual_dir, release_dict.DICT_FILE)
        return path if paths.isfile(path) else f"built as ttw/dict.py from {d.manual_dir}"
    return f"built as ttw/dict.py from {d.tfds_config} dialogues"


def build_vocab(config: ml_collections.ConfigDict, dialogues: dict, source: str) -> Vocabulary:
    """The vocabulary of `data.vocab` from `source` (`vocab_source`): ours (both speakers' train
    utterances, words seen `data.min_count` times), or the release's dictionary with
    `min_freq = data.min_count`, read from its `dict.txt` or counted as ttw/dict.py counts (over
    the release's files as they are, or a synthetic config's train, valid and test)."""
    d = config.data
    if d.vocab != "released":
        return td.build_vocab(td.dialogue_texts(dialogues["train"]), min_count=d.min_count)
    if source.endswith(release_dict.DICT_FILE):
        counts = release_dict.read_dict(source)
    elif d.tfds_config == "real":
        counts = release_dict.build_dict_file(d.manual_dir)
    else:
        counts = release_dict.count_words([dialogues[s] for s in maps.SPLITS])
    return release_dict.released_vocab(counts, d.min_count)


def walk_epoch_size(config, table, T: int) -> int:
    """An epoch of a random-walk stage: as many walks as the 2018 release's `TalkTheWalkEmergent`
    enumerates, every (train window, start corner and, aware, orientation, action sequence) of
    length T once (ours draws fresh walks at every step instead)."""
    return localization.enumeration_size(T, bool(config.data.orientation_aware),
                                         num_windows=len(table))[0]


def walk_kwargs(config) -> dict:
    """The random walks' label and tourist (`walks.sample_batch`, `run_full_task`)."""
    return {"label": config.data.label, "orientation_aware": bool(config.data.orientation_aware)}


def walk_sets(config, data, T: int, key) -> dict:
    """Fixed random-walk evaluation sets per split: `config.eval.num_walks` T-move walks."""
    out = {}
    for i, s in enumerate(maps.SPLITS):
        walks = localization.sample_batch(jax.random.fold_in(key, i), jnp.asarray(data["tables"][s]),
                                          config.eval.num_walks, T, **walk_kwargs(config))
        out[s] = jax.device_get(walks)
    return out


def human_trajectories(config, data) -> dict:
    """{split: the one-utterance human examples' trajectories} as tourist / guide inputs, the
    guide reading T = min(moves, generated.T_max) steps; the target is the tourist's corner when
    it spoke, whatever `data.label` (the released TalkTheWalkLanguage)."""
    keys = ("obs", "actions", "num_moves", "landmarks", "target")
    return {s: {**take(data["human"][1][s], keys),
                "T": np.minimum(data["human"][1][s]["num_moves"], config.generated.T_max)}
            for s in maps.SPLITS}
