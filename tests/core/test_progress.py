"""Progress reports (`ttw_jax.core.progress`): a bar on a terminal, log lines elsewhere, so that a
log file written by nohup, CI or a batch scheduler holds readable lines, not one line of
carriage returns."""
import io
import logging

import pytest

from ttw_jax.core import progress as P


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_a_bar_only_on_a_terminal_unless_the_environment_says(monkeypatch):
    monkeypatch.delenv(P.ENV, raising=False)
    assert P.use_bar(_Tty()) and not P.use_bar(io.StringIO())
    monkeypatch.setenv(P.ENV, "lines")
    assert not P.use_bar(_Tty())
    monkeypatch.setenv(P.ENV, "bar")
    assert P.use_bar(io.StringIO())
    monkeypatch.setenv(P.ENV, "dots")
    with pytest.raises(ValueError, match="'bar' or 'lines'"):
        P.use_bar()


def test_log_lines_at_most_every_interval_and_once_at_the_end(caplog):
    with caplog.at_level(logging.INFO, logger="absl"):
        quiet = P.LogLines(total=1000, desc="train", unit="it", interval=3600)
        for _ in range(1000):
            quiet.update(1)
        assert quiet.lines == 0
        quiet.set_postfix(loss="0.125")
        quiet.close()
        quiet.close()                    # closing twice writes nothing more
    assert quiet.lines == 1
    assert "train: 1,000/1,000 it" in caplog.text and "loss=0.125" in caplog.text
    every = P.LogLines(total=3, initial=1, desc="x", interval=0)
    every.update(1)
    every.update(1)
    every.close()
    assert every.lines == 3 and every.n == 3


def test_iterating_yields_every_item_and_reports_bytes_scaled(caplog):
    with caplog.at_level(logging.INFO, logger="absl"):
        items = list(P.LogLines(range(5), desc="packing", unit="instance", interval=3600))
        size = P.LogLines(total=3_500_000, desc="decoding", unit="B", unit_scale=True)
        size.update(2_000_000)
        size.close()
    assert items == list(range(5))
    assert "packing: 5/5 instance" in caplog.text
    assert "decoding: 2.0M/3.5M B" in caplog.text


def test_training_under_a_non_terminal_writes_lines_not_a_bar(monkeypatch, capfd, caplog):
    """`fit`'s report when stderr is not a terminal (pytest captures it): log lines with the
    step count and the loss, and no carriage return anywhere on stderr."""
    from tests.core.test_loop import run
    import tempfile
    monkeypatch.delenv(P.ENV, raising=False)
    with caplog.at_level(logging.INFO, logger="absl"), tempfile.TemporaryDirectory() as d:
        run(d, lambda p: {"err": float(abs(p["w"] - 3.0))}, num_steps=6)
    err = capfd.readouterr().err
    assert "\r" not in err
    assert "train: 6/6 it" in caplog.text and "loss=" in caplog.text, caplog.text
