"""Vocabularies: encoding pads, maps unknown words, and never cuts a text silently."""
import warnings

import numpy as np
import pytest

from ttw_jax.core.vocab import PAD, UNK, TruncationWarning, Vocabulary


def test_encode_pads_and_maps_unknown_words():
    vocab = Vocabulary.build(["go left", "go right"])
    ids, lengths = vocab.encode(["Go up, left", ""], 6)
    assert lengths.tolist() == [4, 1]
    assert ids[0, :4].tolist() == [vocab.index["go"], UNK, UNK, vocab.index["left"]]
    assert (ids[0, 4:] == PAD).all() and (ids[1] == PAD).all()


def test_cut_texts_are_counted_in_a_warning_or_refused():
    vocab = Vocabulary.build(["a b c d e"])
    texts = ["a b c d e", "a b", "a b c"]
    with pytest.warns(TruncationWarning, match=r"2 of 3 instructions have more than 2 tokens "
                                               r"\(longest 5\)"):
        ids, lengths = vocab.encode(texts, 2, "instructions")
    assert lengths.tolist() == [2, 2, 2]
    np.testing.assert_array_equal(ids[0], [vocab.index["a"], vocab.index["b"]])
    with pytest.raises(ValueError, match="1 of 3 texts have more than 3 tokens"):
        vocab.encode(texts, 3, truncate="error")
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # nothing cut: no warning
        vocab.encode(texts, 5)
