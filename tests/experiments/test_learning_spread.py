"""The learning-test machinery: `learned` records, then checks; a test that uses it is marked
`learning`; `tests/learning_spread.py` tables the spread of what was recorded (worked example)."""
import json

import pytest

from tests.helpers import ALL_RIGHT, Learned, seeded_key
from tests.learning_spread import table


def test_learned_records_every_metric_then_names_each_one_missed(tmp_path):
    log = tmp_path / "log.jsonl"
    learned = Learned("tests/x.py::test_y", 3, str(log))
    learned(acc=(1.0, ">=", ALL_RIGHT), loss=(0.2, "<", 0.5))
    with pytest.raises(AssertionError, match=r"did not learn \(seed 3\): acc = 0.875, needs >= "
                                             r"0.999999; loss = 0.7, needs < 0.5"):
        learned(acc=(0.875, ">=", ALL_RIGHT), loss=(0.7, "<", 0.5), steps=(8, "==", 8))
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [sorted(line["metrics"]) for line in lines] == [["acc", "loss"], ["acc", "loss", "steps"]]
    assert lines[1]["metrics"]["loss"] == {"value": 0.7, "op": "<", "bound": 0.5}
    assert lines[1]["seed"] == 3 and "xla_flags" in lines[1]
    with pytest.raises(ValueError, match="op '~' is not one of"):
        learned(acc=(1.0, "~", 1.0))


def test_seed_zero_is_the_tests_own_key():
    import jax
    assert jax.random.key_data(seeded_key(5, 0)).tolist() == \
        jax.random.key_data(jax.random.key(5)).tolist()
    assert jax.random.key_data(seeded_key(5, 1)).tolist() != \
        jax.random.key_data(seeded_key(5, 0)).tolist()


def test_a_test_using_learned_is_marked_learning(learned, request):
    assert request.node.get_closest_marker("learning") is not None
    learned(marked=(1, "==", 1))


def test_the_table_by_hand():
    """Three runs of one test: loss 0.1, 0.3, 0.6 (< 0.5: the last missed; the bound moved from
    0.4 to 0.5 after the first); accuracy 1.0 in all."""
    def rec(seed, flags, loss, bound):
        return {"test": "t", "seed": seed, "xla_flags": flags,
                "metrics": {"loss": {"value": loss, "op": "<", "bound": bound},
                            "acc": {"value": 1.0, "op": ">=", "bound": ALL_RIGHT}}}
    rows = table([rec(0, "", 0.1, 0.4), rec(1, "--xla_cpu_max_isa=AVX2", 0.6, 0.5),
                  rec(0, "--xla_cpu_max_isa=AVX", 0.3, 0.5)])
    loss, acc = rows
    assert (loss["metric"], loss["bound"], loss["earlier_bounds"]) == ("loss", 0.5, [0.4])
    assert (loss["min"], loss["max"], loss["worst"], loss["worst_run"]) == \
        (0.1, 0.6, 0.6, "seed 1, AVX2")
    assert (loss["runs"], loss["missed"]) == (3, 1)
    assert (acc["worst"], acc["missed"], acc["worst_run"]) == (1.0, 0, "seed 0, default")
