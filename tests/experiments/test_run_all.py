"""`experiments.benchmarks.run_all` writes one Markdown table (a quick run of the cheapest rows)."""
from experiments.benchmarks import run_all


def test_quick_bound_row_table(tmp_path):
    out = tmp_path / "bench.md"
    run_all.main(["--quick", "--only=ttw_bound", f"--out={out}"])
    lines = out.read_text().splitlines()
    assert lines[0].startswith("Quick run of `python -m experiments.benchmarks.run_all --quick`")
    assert lines[2] == "| work | this project | compared with | ratio | fraction of peak |"
    peak, bound = lines[4], lines[5]
    assert "matmul peak" in peak and float(peak.split("|")[2].split()[0].replace(",", "")) > 0
    assert "exact bound" in bound and "recorded anchor" in bound
    seconds = float(bound.split("|")[2].split()[0])   # printed to 0.01 s
    ratio = float(bound.split("|")[4].strip().rstrip("x"))
    assert 0 < seconds < 60
    assert 114 / (seconds + 0.005) - 0.5 <= ratio <= 114 / max(seconds - 0.005, 1e-3) + 0.5


def test_unknown_benchmark_is_refused():
    import pytest
    with pytest.raises(SystemExit):
        run_all.main(["--quick", "--only=nope"])
