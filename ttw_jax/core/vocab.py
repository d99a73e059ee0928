"""Word vocabularies shared by every text-conditioned model.

`tokenize` lower-cases and splits on whitespace and punctuation (ASCII and Devanagari danda), so
it keeps words of any script whole (Hindi and Telugu words carry combining vowel signs that
`\\w` would split). The same function builds and encodes.
"""
from __future__ import annotations

import dataclasses
import json
import re
import warnings
from collections import Counter
from typing import Iterable, Sequence

import numpy as np

from ttw_jax.core import paths

PAD, UNK = 0, 1
_PUNCT = r"!-/:-@\[-`{-~\u0964\u0965\u2018-\u201f\u2026"
_TOKEN = re.compile(rf"[^\s{_PUNCT}]+|[{_PUNCT}]")


def tokenize(text: str) -> list[str]:
    """Lower-cased words (maximal runs of non-space, non-punctuation characters) and single
    punctuation marks."""
    return _TOKEN.findall(text.lower())


class TruncationWarning(UserWarning):
    """Some inputs were longer than the configured maximum and were cut."""


TRUNCATE_MODES = ("warn", "error", "ignore")


def token_limit(max_tokens: int, texts: Iterable[str]) -> int:
    """`max_tokens` when positive, else (0) the longest of `texts` in tokens (at least 1): a
    limit sized from the data, which cuts none of them."""
    if max_tokens > 0:
        return max_tokens
    return max([len(tokenize(t)) for t in texts] + [1])


def report_truncation(lengths, max_len: int, what: str, unit: str, mode: str = "warn") -> int:
    """Counts the `lengths` [E] above `max_len`; when there are any, warns (`mode` "warn"),
    raises ValueError ("error") with the counts and the longest, or stays silent ("ignore", for
    text nothing reads). Returns the count."""
    if mode not in TRUNCATE_MODES:
        raise ValueError(f"truncate must be one of {TRUNCATE_MODES}, got {mode!r}")
    lengths = np.asarray(lengths)
    cut = int(np.sum(lengths > max_len))
    if cut:
        message = (f"{cut} of {len(lengths)} {what} have more than {max_len} {unit} (longest "
                   f"{int(lengths.max())}) and are cut to {max_len}; raise the limit to keep "
                   "them whole")
        if mode == "error":
            raise ValueError(message.replace("and are cut to", "and would be cut to") +
                             " (0 sizes it from the data): official text is never cut")
        if mode == "warn":
            warnings.warn(message, TruncationWarning, stacklevel=3)
    return cut


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """Word ids: 0 padding, 1 unknown, then words by decreasing training frequency."""
    words: tuple[str, ...]

    @classmethod
    def build(cls, texts: Iterable[str], min_count: int = 1) -> "Vocabulary":
        counts = Counter(w for t in texts for w in tokenize(t))
        kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        return cls(("<pad>", "<unk>", *kept))

    @property
    def index(self) -> dict[str, int]:
        return {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, texts: Sequence[str], max_len: int, what: str = "texts",
               truncate: str = "warn") -> tuple[np.ndarray, np.ndarray]:
        """(ids [E, max_len] int32, lengths [E] int32). Texts longer than `max_len` tokens are
        cut, never silently: `truncate` "warn" (a `TruncationWarning` with the counts, naming
        them `what`) or "error" (ValueError); "ignore" for text that nothing reads."""
        index = self.index
        ids = np.zeros((len(texts), max_len), np.int32)
        lengths = np.zeros(len(texts), np.int32)
        full = np.zeros(len(texts), np.int64)
        for i, t in enumerate(texts):
            toks = [index.get(w, UNK) for w in tokenize(t)]
            full[i] = len(toks)
            toks = toks[:max_len]
            ids[i, :len(toks)] = toks
            lengths[i] = max(len(toks), 1)
        report_truncation(full, max_len, what, "tokens", truncate)
        return ids, lengths

    def save(self, path: paths.PathLike) -> None:
        """Writes `path` atomically (`paths.write_text`): another process never reads half a
        vocabulary."""
        paths.write_text(path, json.dumps(list(self.words)))

    @classmethod
    def load(cls, path: paths.PathLike) -> "Vocabulary":
        return cls(tuple(json.loads(paths.resolve(path).read_text(encoding="utf-8"))))

    @classmethod
    def load_or_build(cls, path: paths.PathLike, texts: Iterable[str],
                      save: bool = True) -> "Vocabulary":
        """The vocabulary saved at `path` (a resumed run), else one built from `texts` and saved
        there when `save` (pass False on all but one process)."""
        if paths.resolve(path).exists():
            return cls.load(path)
        vocab = cls.build(texts)
        if save:
            vocab.save(path)
        return vocab
