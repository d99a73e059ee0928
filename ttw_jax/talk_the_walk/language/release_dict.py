"""The Talk The Walk release's word dictionary (`ttw/dict.py`): `dict.txt` read as the release
reads it, or built as its script builds it, and the release's tokenisation.

What the release does (checked against its `ttw/dict.py` and `ttw/data_loader.py`):

- `python ttw/dict.py --data-dir DIR` counts the words of every **tourist** utterance of more than
  2 words (`len(text.split(' ')) > 2`, whitespace words; the three `ACTION:*` texts excluded) of
  `talkthewalk.train.json`, then `valid`, then `test`, in file order, tokenised by
  `split_tokenize` (below), and writes `DIR/dict.txt`: one `word<TAB>count` line per word, by
  decreasing count (a stable sort: ties keep the order in which the words were first seen). Guide
  utterances are not counted. Every count is written, however small.
- `Dictionary(file=DIR/dict.txt, min_freq=3)` (`TalkTheWalkLanguage`'s default, and
  `predict_location_generated.py`'s) reads the lines in order, each split on a tab (else on one
  space) into a word and its count, and keeps the words counted at least `min_freq` times, after
  its 4 special tokens `__PAD__`, `__START__`, `__END__`, `__UNK__` (ids 0-3).

Here the kept words follow this project's 6 special tokens (`dialogues.SPECIAL_TOKENS`: `<pad>`,
`<unk>`, `<bos>`, `<eos>` play `__PAD__`, `__UNK__`, `__START__`, `__END__`; the speaker tokens
`<tourist>` / `<guide>` that start each utterance of a guide's message have no released
counterpart): the same words in the same order, every id shifted by 2 (embedding rows permuted,
nothing else). A word the file lists twice keeps its first id (the release would give it the
second).

Tokenisation: words are encoded by `split_tokenize`, the tokenisation the dictionary was counted
with (`Dictionary(split=True)`). The release's loader encodes with `Dictionary(split=False)`:
NLTK's `TweetTokenizer`, which keeps case, so a capitalised word, which the lower-cased dictionary
never holds, becomes `__UNK__` there; NLTK is not a dependency of this project and that path is not
reproduced.
"""
from __future__ import annotations

import os
from collections import Counter
from typing import Iterable, Mapping, Sequence

from ttw_jax.core import paths
from ttw_jax.core.vocab import Vocabulary
from ttw_jax.talk_the_walk.language import dialogues as td

DICT_FILE = "dict.txt"
MIN_WORDS = 2   # an utterance counts when it has more than this many whitespace words


class DictFormatError(ValueError):
    """A `dict.txt` line is not `word<TAB>count` (or `word count`)."""


def split_tokenize(text: str) -> list[str]:
    """The release's `split_tokenize`: lower-cased, a space put around `.`, `,`, `;`, `:`, `!`
    and `?`, then split on whitespace; anything else (apostrophes, hyphens, quotes) stays inside
    its word. Its `. . .` -> `...` step comes after the dots are spaced out, when no `. . .` is
    left to match: `...` is three `.` tokens."""
    text = text.lower().replace(".", " . ").replace(". . .", "...")
    for mark in ",;:!?":
        text = text.replace(mark, f" {mark} ")
    return text.split()


def counted_utterances(dialogues: Iterable[Mapping]) -> list[str]:
    """The texts `ttw/dict.py` counts, in order: each tourist act that is not an ACTION and has
    more than 2 words split on single spaces."""
    return [act["text"] for ep in dialogues for act in ep["dialog"]
            if act["id"] == "Tourist" and act["text"] not in td.ACTIONS
            and len(act["text"].split(" ")) > MIN_WORDS]


def count_words(dialogue_sets: Sequence[Iterable[Mapping]]) -> list[tuple[str, int]]:
    """[(word, count)] as `ttw/dict.py` writes them for the dialogue lists `dialogue_sets` (train,
    valid, test): by decreasing count, ties in the order the words were first seen."""
    counts = Counter()
    for dialogues in dialogue_sets:
        for text in counted_utterances(dialogues):
            counts.update(split_tokenize(text))   # a Counter keeps first-seen order
    return sorted(counts.items(), key=lambda wc: -wc[1])


def format_dict(counts: Iterable[tuple[str, int]]) -> str:
    """The text of `dict.txt`: `word<TAB>count` per line."""
    return "".join(f"{w}\t{c}\n" for w, c in counts)


def build_dict_file(data_dir: str) -> list[tuple[str, int]]:
    """The (word, count) lines `python ttw/dict.py --data-dir data_dir` would write, counted over
    the release's `talkthewalk.{train,valid,test}.json` in `data_dir` (all three must be there)."""
    sets = []
    for split in ("train", "valid", "test"):
        path = os.path.join(data_dir, td.DIALOGUE_FILES[split])
        if not paths.isfile(path):
            raise FileNotFoundError(f"{path} not found: ttw/dict.py counts the tourist utterances "
                                    f"of talkthewalk.train.json, .valid.json and .test.json. "
                                    f"{td.SOURCE_HINT}")
        sets.append(td.read_dialogues(path))
    return count_words(sets)


def read_dict(path: str) -> list[tuple[str, int]]:
    """[(word, count)] of a `dict.txt`, in file order, each line split as the release's
    `Dictionary` splits it: on a tab, else on one space, into exactly a word and an integer."""
    out = []
    text = paths.resolve(path).read_text(encoding="utf-8")
    for i, line in enumerate(text.splitlines(), 1):
        parts = line.split("\t")
        if len(parts) != 2:
            parts = line.split(" ")
        try:
            if len(parts) != 2:
                raise ValueError
            out.append((parts[0], int(parts[1])))
        except ValueError:
            raise DictFormatError(f"{path}: line {i}: expected 'word<TAB>count' (as ttw/dict.py "
                                  f"writes it), got {line!r}") from None
    return out


def released_vocab(counts: Iterable[tuple[str, int]], min_freq: int = 3) -> Vocabulary:
    """`dialogues.SPECIAL_TOKENS`, then the words of `counts` (file order) counted at least
    `min_freq` times, as the release's `Dictionary(file, min_freq)` keeps them."""
    words, seen = list(td.SPECIAL_TOKENS), set(td.SPECIAL_TOKENS)
    for w, c in counts:
        if c >= min_freq and w not in seen:
            words.append(w)
            seen.add(w)
    return Vocabulary(tuple(words))
