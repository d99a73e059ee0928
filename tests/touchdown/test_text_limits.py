"""The paper configs keep every instruction and description whole: on the 800 shared Touchdown
records neither the navigation nor the SDR paper config cuts a text, the release's text is never
cut silently (an error names the longest), and the baselines, which read no text, say nothing."""
import warnings

import pytest

from experiments.touchdown_nav import train as nav_train
from experiments.touchdown_nav.configs import baselines as nav_baselines, default as nav_default
from experiments.touchdown_nav.configs import paper as nav_paper
from experiments.touchdown_sdr.configs import paper as sdr_paper
from tests.conftest import shared_path
from ttw_jax.core.vocab import Vocabulary, report_truncation, token_limit, tokenize
from ttw_jax.touchdown import records as td_records


@pytest.fixture(scope="module")
def records():
    return td_records.read_records(shared_path("touchdown", "touchdown_unseen_dev_sample.json"),
                                   sdr=True)


def test_no_paper_config_cuts_a_shared_record(records):
    nav = [r["navigation_text"] for r in records]
    sdr = [v["td_location_text"] for r in records for v in td_records.sdr_examples(r)]
    assert len(nav) == 800 and len(sdr) == 2237
    for config, texts in ((nav_paper.get_config(), nav), (sdr_paper.get_config(), sdr)):
        limit = token_limit(config.data.max_tokens, texts)
        assert report_truncation([len(tokenize(t)) for t in texts], limit, "texts", "tokens",
                                 "error") == 0
    assert token_limit(0, nav) == 456 and token_limit(0, sdr) == 84
    # a fixed 64 (the earlier default) would cut them: on the release, an error naming the longest
    assert report_truncation([len(tokenize(t)) for t in nav], 64, "t", "tokens", "ignore") == 597


def test_release_text_is_never_cut_and_baselines_say_nothing(records):
    vocab = Vocabulary.build([r["navigation_text"] for r in records])
    c = nav_default.get_config()
    c.data.tfds_config = "navigation"
    assert nav_train.truncation(c) == "error"
    with pytest.raises(ValueError, match=r"597 of 800 navigation instructions \(data.max_tokens\) "
                                         r"have more than 64 tokens \(longest 456\) and would be cut"
                                         r" to 64; .*0 sizes it from the data"):
        vocab.encode([r["navigation_text"] for r in records], 64,
                     "navigation instructions (data.max_tokens)", nav_train.truncation(c))
    assert nav_train.truncation(nav_default.get_config()) == "warn"     # synthetic routes
    b = nav_baselines.get_config()
    assert nav_train.truncation(b) == "ignore"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vocab.encode([r["navigation_text"] for r in records], b.data.max_tokens, "t",
                     nav_train.truncation(b))
