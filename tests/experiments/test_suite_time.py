"""The suite-time table (`experiments/benchmarks/suite_time.py`) on a hand-written compile log."""
import json
import os
import subprocess
import sys

import pytest

from experiments.benchmarks import suite_time
from tests.conftest import ROOT


def test_areas_shares_and_slowest_from_a_compile_log(tmp_path):
    rows = [  # wall = 10: trace 1 + lower 1 + compile 5 + cache 1 = 8 s of pipeline
        {"test": "tests/core/test_a.py::test_x", "wall": 10.0, "trace": 1.0, "lower": 1.0,
         "compile": 5.0, "cache_read": 1.0, "programs": 4},
        {"test": "tests/core/test_a.py::test_y", "wall": 2.0, "trace": 0.0, "lower": 0.0,
         "compile": 0.0, "cache_read": 0.0, "programs": 0},
        {"test": "tests/rxr/test_b.py::T::test_z", "wall": 6.0, "trace": 0.5, "lower": 0.5,
         "compile": 2.0, "cache_read": 0.0, "programs": 3}]
    log = tmp_path / "compile.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = suite_time.summarize(suite_time.read_log(str(log)), top=2)
    assert list(s["areas"]) == ["core", "rxr"]                 # by test seconds
    assert s["areas"]["core"] == {"tests": 2, "wall": 12.0, "trace": 1.0, "lower": 1.0,
                                  "compile": 5.0, "cache_read": 1.0, "pipeline": 8.0,
                                  "programs": 4}
    assert s["total"]["wall"] == 18.0 and s["total"]["pipeline"] == 11.0
    assert [r["test"] for r in s["slowest"]] == ["tests/core/test_a.py::test_x",
                                                 "tests/rxr/test_b.py::T::test_z"]
    text = suite_time.table(s)
    assert "| core | 2 | 12 | 8 (67%) | 5 | 4 |" in text
    assert "| all | 3 | 18 | 11 (61%) | 7 | 7 |" in text


def test_a_malformed_line_is_named(tmp_path):
    log = tmp_path / "compile.jsonl"
    log.write_text('{"test": "t", "wall": 1}\n{"test": "u"}\n')
    with pytest.raises(ValueError, match=r"compile.jsonl:2: not a compile-log row"):
        suite_time.read_log(str(log))


def test_the_test_harness_writes_the_log(tmp_path):
    """`--compile-log` (tests/conftest.py): one row per test with every field, in a pytest run
    of one test that compiles (jitted DTW)."""
    log = tmp_path / "compile.jsonl"
    env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "cache")}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-n0",
                    "tests/core/test_sequence.py::test_dtw_example", f"--compile-log={log}"],
                   cwd=ROOT, env=env, check=True, capture_output=True)
    rows = suite_time.read_log(str(log))
    assert [r["test"] for r in rows] == ["tests/core/test_sequence.py::test_dtw_example"]
    assert rows and all(set(r) == {"test", "wall", "trace", "lower", "compile", "cache_read",
                                   "programs"} for r in rows)
    assert any(r["programs"] > 0 and r["compile"] > 0 for r in rows)


def test_the_compile_overhead_benchmark_times_every_program_both_ways(tmp_path):
    """`experiments.benchmarks.compile_overhead` at 2 programs: a row per function and setting,
    each with the pipeline's parts inside its wall time, and the optimisations restored."""
    import jax
    from experiments.benchmarks import compile_overhead
    before = jax.config.read("jax_disable_most_optimizations")
    out = compile_overhead.main(["--programs=2", f"--out={tmp_path / 'o.json'}"])
    assert json.loads((tmp_path / "o.json").read_text()) == out
    assert [(r["program"], r["optimized"]) for r in out["rows"]] == [
        ("trivial", True), ("trivial", False), ("mlp_grad", True), ("mlp_grad", False)]
    for r in out["rows"]:
        assert 0 < r["compile"] and r["trace"] + r["lower"] + r["compile"] <= r["wall"] + 0.2
    assert jax.config.read("jax_disable_most_optimizations") == before
