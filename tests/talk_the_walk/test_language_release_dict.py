"""The release's dictionary (`language/release_dict.py`, `data.vocab=released`): its tokenisation,
a hand-built `dict.txt` read as the release reads it, the dictionary `ttw/dict.py` builds from a
hand-written release counted by hand, and the trainer's choice between the two."""
import json

import ml_collections
import pytest

from experiments.ttw_language.configs import default as nl_default
from ttw_jax.talk_the_walk.language import dialogues as td, release_dict as rd
from ttw_jax.talk_the_walk.language import training_data as nl_data

T, G = "Tourist", "Guide"


def episode(*acts):
    return {"neighborhood": "fidi", "boundaries": [0, 0, 3, 3], "start_location": [0, 0, 0],
            "target_location": [1, 1, 0],
            "dialog": [{"id": who, "text": text, "episode_done": False, "time": float(i)}
                       for i, (who, text) in enumerate(acts)]}


# What ttw/dict.py counts: tourist acts, not ACTION texts, of more than 2 words split on ' '.
RELEASE = {
    "train": [episode((T, "I see a Bank."),                  # i see a bank .
                      (G, "ok, where is the bank?"),          # a guide's: not counted
                      (T, td.FORWARD),                        # an action: not counted
                      (T, "a bank"),                          # 2 words: not counted
                      (T, "i'm near a bank, a bar!"))],       # i'm near a bank , a bar !
    "valid": [episode((T, "Bank  here"))],                    # 3 words by ' ' (two spaces)
    "test": [episode((G, "what now?"), (T, "see a bar..."))],  # see a bar . . .
}
# Counts, first seen: i 1, see 2, a 4, bank 3, . 4, i'm 1, near 1, "," 1, bar 2, ! 1, here 1;
# by decreasing count, ties in that order:
COUNTED = [("a", 4), (".", 4), ("bank", 3), ("see", 2), ("bar", 2), ("i", 1), ("i'm", 1),
           ("near", 1), (",", 1), ("!", 1), ("here", 1)]


def write_release(folder, with_dict: str | None = None) -> str:
    for split, eps in RELEASE.items():
        (folder / td.DIALOGUE_FILES[split]).write_text(json.dumps(eps))
    if with_dict is not None:
        (folder / rd.DICT_FILE).write_text(with_dict)
    return str(folder)


def test_split_tokenize_by_hand():
    assert rd.split_tokenize("Hello, I'm at the Bank... near a coffee-shop?!") == [
        "hello", ",", "i'm", "at", "the", "bank", ".", ".", ".", "near", "a", "coffee-shop",
        "?", "!"]
    assert rd.split_tokenize("A:b;c  D") == ["a", ":", "b", ";", "c", "d"]


def test_the_dictionary_ttw_dict_py_builds_counted_by_hand(tmp_path):
    assert rd.counted_utterances(RELEASE["train"]) == ["I see a Bank.", "i'm near a bank, a bar!"]
    assert rd.count_words([RELEASE[s] for s in ("train", "valid", "test")]) == COUNTED
    assert rd.build_dict_file(write_release(tmp_path)) == COUNTED
    assert rd.format_dict(COUNTED[:2]) == "a\t4\n.\t4\n"
    vocab = rd.released_vocab(COUNTED, min_freq=2)       # the words seen at least twice
    assert vocab.words == (*td.SPECIAL_TOKENS, "a", ".", "bank", "see", "bar")
    assert rd.released_vocab(COUNTED).words[len(td.SPECIAL_TOKENS):] == ("a", ".", "bank")


def test_a_hand_built_dict_txt_is_read_as_the_release_reads_it(tmp_path):
    path = tmp_path / rd.DICT_FILE
    path.write_text("the\t120\nbank\t40\ni'm 7\ncoffee\t3\nzebra\t2\nbank\t3\n")
    counts = rd.read_dict(str(path))
    assert counts == [("the", 120), ("bank", 40), ("i'm", 7), ("coffee", 3), ("zebra", 2),
                      ("bank", 3)]
    vocab = rd.released_vocab(counts, min_freq=3)        # zebra: 2 < 3; bank: its first id
    assert vocab.words == (*td.SPECIAL_TOKENS, "the", "bank", "i'm", "coffee")
    ids = td.encode_text(vocab, "I'm at the Bank.", tokenizer=rd.split_tokenize)
    assert ids == [8, td.UNK, 6, 7, td.UNK]              # i'm, at, the, bank, .
    # this project's `tokenize` splits the apostrophe off: i ' m at the bank .
    assert td.encode_text(vocab, "I'm at the Bank.") == [td.UNK] * 4 + [6, 7, td.UNK]
    path.write_text("the\t120\ntwo words\t3\t4\n")
    with pytest.raises(rd.DictFormatError, match=r"dict.txt: line 2: expected 'word<TAB>count'"):
        rd.read_dict(str(path))


def released(manual_dir: str, tfds_config: str = "real") -> ml_collections.ConfigDict:
    c = nl_default.get_config()
    c.data.vocab, c.data.tfds_config, c.data.manual_dir = "released", tfds_config, manual_dir
    return c


def test_the_trainer_reads_dict_txt_or_builds_it(tmp_path):
    for name in ("built", "shipped"):
        (tmp_path / name).mkdir()
    built = write_release(tmp_path / "built")
    c = released(built)
    source = nl_data.vocab_source(c)
    assert source == f"built as ttw/dict.py from {built}"
    assert nl_data.build_vocab(c, RELEASE, source).words[6:] == ("a", ".", "bank")
    shipped = write_release(tmp_path / "shipped", "bar\t9\nhere\t1\n")
    c = released(shipped)
    source = nl_data.vocab_source(c)
    assert source == str(tmp_path / "shipped" / rd.DICT_FILE)
    assert nl_data.build_vocab(c, RELEASE, source).words[6:] == ("bar",)
    # Synthetic dialogues: counted as ttw/dict.py would count them, over the three splits.
    c = released("", "synthetic")
    source = nl_data.vocab_source(c)
    assert source == "built as ttw/dict.py from synthetic dialogues"
    assert nl_data.build_vocab(c, RELEASE, source).words[6:] == ("a", ".", "bank")
    c.data.vocab = "ours"   # both speakers' train utterances, `tokenize`: 'bank' 3 times
    assert nl_data.vocab_source(c) == "train utterances"
    assert nl_data.build_vocab(c, RELEASE, "train utterances").words[6:] == ("a", "bank")
