"""Leaderboard prediction files: the R2R and RxR formats written and read back, and scored
against the references with the evaluation's metrics."""
import json
import math

import numpy as np
import pytest

from tests.rxr.test_episodes import square
from ttw_jax.rxr import predictions
from ttw_jax.rxr.graph import geodesic_table


def episodes_of(paths, iids, path_ids):
    ref = np.full((len(paths), 4), -1, np.int32)
    for i, p in enumerate(paths):
        ref[i, :len(p)] = p
    return {"instruction_id": np.asarray(iids), "path_id": np.asarray(path_ids),
            "heading": np.asarray([0.25] * len(paths), np.float32), "path": ref,
            "path_len": np.asarray([len(p) for p in paths], np.int32)}


def test_r2r_and_rxr_files_round_trip_and_score(tmp_path):
    graph, nodes = square()        # a(0,0) b(0,2) c(2,2) d(2,0), 2 m edges around
    eps = episodes_of([[0, 1, 2], [0, 3]], [32, 41], [3, 4])
    pred = np.asarray([[0, 1, 2, -1], [0, 1, -1, -1]])
    r2r = predictions.prediction_rows(pred, [3, 2], eps, nodes, graph, "r2r")
    # a -> b heads north (0), b -> c east (pi/2); instruction 32 is path 3's third (k = 2)
    assert r2r[0] == {"instr_id": "3_2", "trajectory": [["a", 0.25, 0.0], ["b", 0.0, 0.0],
                                                        ["c", pytest.approx(math.pi / 2), 0.0]]}
    assert r2r[1]["instr_id"] == "4_1"
    predictions.write_predictions(str(tmp_path / "p.json"), r2r, "r2r")
    rxr = predictions.prediction_rows(pred, [3, 2], eps, nodes, graph, "rxr")
    assert rxr[1] == {"instruction_id": 41, "path": ["a", "b"]}
    predictions.write_predictions(str(tmp_path / "p.jsonl"), rxr, "rxr")
    for name in ("p.json", "p.jsonl"):
        got = predictions.read_predictions(str(tmp_path / name))
        assert got == {32: ["a", "b", "c"], 41: ["a", "b"]}
    scores = predictions.score_predictions(got, eps, nodes,
                                           geodesic_table(graph, np.zeros(4, np.int32)))
    # episode 0 follows its reference exactly; episode 1 ends at b, 4 m (two edges) from d
    assert scores["sr"] == pytest.approx(0.5) and scores["ne"] == pytest.approx(2.0)
    assert scores["pl"] == pytest.approx((4 + 2) / 2) and scores["ndtw"] < 1.0
    with pytest.raises(ValueError, match="1 of 2 instructions have no prediction"):
        predictions.score_predictions({32: ["a"]}, eps, nodes,
                                      geodesic_table(graph, np.zeros(4, np.int32)))
    (tmp_path / "bad.json").write_text(json.dumps([{"instr_id": "x", "trajectory": []}]))
    with pytest.raises(ValueError, match="entry 0: not an R2R prediction"):
        predictions.read_predictions(str(tmp_path / "bad.json"))
    # MatterSim logs a row per turn: repeats are one visit; an instruction predicted twice is
    # refused; a BOM is tolerated
    turns = [{"instr_id": "3_2", "trajectory": [["a", 0, 0], ["a", 1, 0], ["b", 1, 0]]},
             {"instr_id": "3_2", "trajectory": [["a", 0, 0]]}]
    (tmp_path / "turns.json").write_text("\ufeff" + json.dumps(turns[:1]), encoding="utf-8")
    assert predictions.read_predictions(str(tmp_path / "turns.json")) == {32: ["a", "b"]}
    (tmp_path / "twice.json").write_text(json.dumps(turns))
    with pytest.raises(ValueError, match="entry 1: instruction 32 predicted twice"):
        predictions.read_predictions(str(tmp_path / "twice.json"))
    (tmp_path / "bad.jsonl").write_text('{"instruction_id": 1, "path": []}\n')
    with pytest.raises(ValueError, match="line 1: not an RxR prediction"):
        predictions.read_predictions(str(tmp_path / "bad.jsonl"))
