"""ArraMon dataset statistics (the paper's Table 1 and section 4): a hand-counted instance and
the real val_seen."""
import pytest

from experiments.arramon import stats as stats_command
from tests.conftest import shared_path
from ttw_jax.arramon.stats import format_statistics, split_statistics


def _instance():
    return {"instructions": {"navi_inst_gt": ["go left, then stop", "walk"],
                             "assem_inst_gt": ["put it down", "forward and place"]},
            "gt_actions": {"navi_action_gt": [["f", "f", "l", "P", "0"], ["r", "P", "1"]],
                           "assem_action_gt": [["P", "0"], ["f", "P", "1"]]},
            "gt_paths": {"navi_path_gt": [[[0, 0, 0]] * 3, [[0, 0, 0]]],
                         "assem_path_gt": [[[0, 0, 0]], [[0, 0, 0]] * 2]}}


def test_statistics_of_a_hand_counted_instance():
    s = split_statistics([_instance()])
    nav, assem = s["navi"], s["assem"]
    assert s["instances"] == 1 and s["instructions"] == 4
    assert nav["words"] == {"max": 4, "mean": 2.5, "min": 1}          # "left," is one word
    assert nav["tokens"] == {"max": 5, "mean": 3.0, "min": 1}         # "," is a token
    assert nav["path"] == {"max": 3, "mean": 2.0, "min": 1}
    assert nav["actions"] == {"max": 4, "mean": 3.0, "min": 2}        # the turn token dropped
    assert nav["action_counts"] == {"f": 1.0, "l": 0.5, "r": 0.5, "P": 1.0}
    assert nav["instance_path"]["max"] == 2 and nav["instance_actions"]["max"] == 6
    assert assem["actions"] == {"max": 2, "mean": 1.5, "min": 1}
    assert assem["instance_path"]["max"] == 1
    assert (nav["vocabulary"], assem["vocabulary"], s["vocabulary"]) == (5, 6, 11)
    table = format_statistics(s, "one")
    assert "| instruction (words) | navigation | 4 | 2.50 | 147 | 47.99 |" in table
    with pytest.raises(ValueError, match="empty"):
        split_statistics([])


def test_val_seen_statistics_and_the_command():
    out, stats = stats_command.report([shared_path("arramon", "val_seen.json")])
    assert stats[shared_path("arramon", "val_seen.json")]["navi"]["words"]["max"] == 97
    assert out.startswith("val_seen: 1,065 instances, 4,260 instructions (2,130 navigation, "
                          "2,130 assembly)")
    assert "| instruction (tokens) | navigation | 108 |" in out
    assert "| action sequence, both turns | assembly | 34 | 13.39 | 34 | 13.68 |" in out
    assert "(the paper's val_seen: 1,065 instances)" in out
