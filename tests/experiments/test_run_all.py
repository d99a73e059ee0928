"""`experiments.benchmarks.run_all` writes one Markdown table (a quick run of the cheapest rows)."""
import json

import pytest

from experiments.benchmarks import run_all
from tests.conftest import xla_optimizations


def test_quick_bound_row_table(tmp_path):
    out, rows = tmp_path / "bench.md", tmp_path / "bench.json"
    run_all.main(["--quick", "--only=ttw_bound", f"--out={out}", f"--json={rows}"])
    lines = out.read_text().splitlines()
    saved = json.loads(rows.read_text())
    assert saved["header"] == lines[0]
    # no row of this one has a FLOP rate, so no matmul peak is measured
    assert [(r["bench"], r["index"]) for r in saved["rows"]] == [("ttw_bound", 0)]
    assert [f"| {r['work']} | {r['ours']} | {r['reference']} | {r['ratio']} | {r['peak']} |"
            for r in saved["rows"]] == lines[4:5]
    assert lines[0].startswith("Quick run of `python -m experiments.benchmarks.run_all --quick`")
    assert lines[2] == ("| work | this project | compared with | ratio | fraction of the measured "
                        "matmul peak |")
    bound = lines[4]
    assert "exact bound" in bound and "recorded anchor" in bound
    (seconds, h), (ratio, hr) = printed(bound.split("|")[2].split()[0]), printed(bound.split("|")[4])
    assert 0 < seconds < 60
    assert 114 / (seconds + h) - hr <= ratio <= 114 / max(seconds - h, 1e-3) + hr


def printed(cell: str) -> tuple[float, float]:
    """A figure as printed ('1,096x', '0.104') and half a unit of its last printed digit."""
    text = cell.strip().rstrip("x").replace(",", "")
    decimals = len(text.partition(".")[2])
    return float(text), 0.5 * 10.0 ** -decimals


def test_unknown_benchmark_is_refused():
    with pytest.raises(SystemExit):
        run_all.main(["--quick", "--only=nope"])


def test_a_failing_benchmark_is_a_row_and_the_others_still_run(tmp_path, monkeypatch):
    def boom(**_):
        raise ValueError("no such data\nsecond line")
    monkeypatch.setitem(run_all.BENCHES, "boom", boom)
    out = tmp_path / "bench.md"
    with pytest.raises(SystemExit, match="benchmarks failed: boom"):
        run_all.main(["--quick", "--only=boom,ttw_bound", f"--out={out}"])
    lines = out.read_text().splitlines()
    assert lines[4] == "| boom: failed | ValueError: no such data |  |  |  |"
    assert "exact bound" in lines[5]


def test_another_runs_figures_become_labelled_columns():
    rows = [dict(bench="peak", index=0, work="peak", ours="200 GFLOP/s", reference="", ratio="",
                 peak=""),
            dict(bench="sim", index=0, work="sim", ours="9 steps/s", reference="1 steps/s (loop)",
                 ratio="9x", peak=""),
            dict(bench="sim", index=1, work="sim, no refill", ours="3 steps/s", reference="",
                 ratio="slots 3x faster", peak=""),
            dict(bench="dense", index=0, work="dense", ours="2 s", reference="36 s (recorded anchor)",
                 ratio="18x", peak="100 GFLOP/s = 50%")]
    gpu = {"device": "GPU X", "header": "Run of ...: GPU X.", "rows": [
        dict(rows[0], ours="5,000 GFLOP/s"), dict(rows[1], ours="90 steps/s", ratio="90x"),
        dict(rows[3], ours="0.1 s", ratio="360x", peak="2,000 GFLOP/s = 40%")]}
    lines = run_all.to_markdown(rows, "Run of ...: cpu.", [gpu]).splitlines()
    assert lines[:2] == ["Run of ...: cpu.", "Columns 'GPU X': Run of ...: GPU X."]
    assert lines[3] == ("| work | this project | compared with | ratio | fraction of the measured "
                        "matmul peak | GPU X: this project | GPU X: fraction of the measured "
                        "matmul peak |")
    assert lines[4].count("---") == 7
    assert lines[5].endswith("| 5,000 GFLOP/s |  |")
    assert lines[6].endswith("| 90 steps/s; 90x vs 1 steps/s (loop) |  |")
    assert lines[7].endswith("| not run |  |")        # the other run has no such row
    # A recorded anchor was measured on the CPU: the other machine's ratio to it is not shown.
    assert lines[8].endswith("| 100 GFLOP/s = 50% | 0.1 s | 2,000 GFLOP/s = 40% |")
    # A device with a datasheet figure gets a third column: the same rate against the vendor's
    # dense peak of the row's dtype (float32 at the default precision is TF32 on an H200).
    h200 = dict(gpu, device="NVIDIA H200", rows=gpu["rows"] + [dict(
        rows[3], index=1, work="dense, bfloat16", peak="98,950 GFLOP/s = 20%")])
    lines = run_all.to_markdown(rows + [dict(rows[3], index=1, work="dense, bfloat16")],
                                "Run of ...: cpu.", [h200]).splitlines()
    assert lines[3].endswith("| NVIDIA H200: fraction of the datasheet dense peak |")
    assert lines[8].endswith("| 2,000 GFLOP/s = 40% | 0.40% of 494.5 TFLOP/s (NVIDIA H200 SXM "
                             "dense TF32) |")
    assert lines[9].endswith("| 98,950 GFLOP/s = 20% | 10% of 989.5 TFLOP/s (NVIDIA H200 SXM "
                             "dense bfloat16) |")
    assert lines[6].endswith("|  |  |")               # no FLOP rate: no fraction


def test_datasheet_peaks_by_device_kind():
    from experiments.benchmarks.measure import datasheet_peak
    assert datasheet_peak("NVIDIA H200") == (494_500.0, "NVIDIA H200 SXM dense TF32")
    assert datasheet_peak("NVIDIA H100 80GB HBM3", "bfloat16")[0] == 989_500.0
    assert datasheet_peak("NVIDIA H100 PCIe")[0] == 378_000.0
    assert datasheet_peak("NVIDIA A100-SXM4-40GB", "float32", "highest")[0] == 19_500.0
    assert datasheet_peak("TPU v5 lite")[0] == datasheet_peak("TPU v5 lite", "bfloat16")[0] \
        == 197_000.0
    assert datasheet_peak("TPU v5")[0] == 459_000.0 and datasheet_peak("TPU v4")[0] == 275_000.0
    assert datasheet_peak("cpu") is None and datasheet_peak("NVIDIA GeForce RTX 4090") is None


def test_a_stored_run_renders_with_both_peaks(tmp_path):
    """`--render`: the table of stored runs, nothing measured (a layout change after the run)."""
    stored, other = tmp_path / "cpu.json", tmp_path / "h200.json"
    stored.write_text(json.dumps({"device": "cpu", "header": "Run: cpu.", "rows": [
        dict(bench="masc", index=0, work="MASC", ours="1 s", reference="", ratio="",
             peak="100 GFLOP/s = 50%")]}))
    other.write_text(json.dumps({"device": "NVIDIA H200", "header": "Run: H200.", "rows": [
        dict(bench="masc", index=0, work="MASC", ours="1 ms", reference="", ratio="",
             peak="49,450 GFLOP/s = 14%")]}))
    out = tmp_path / "t.md"
    run_all.main([f"--render={stored}", f"--column_from={other}", f"--out={out}"])
    assert out.read_text().splitlines()[-1] == (
        "| MASC | 1 s |  |  | 100 GFLOP/s = 50% | 1 ms | 49,450 GFLOP/s = 14% | "
        "10% of 494.5 TFLOP/s (NVIDIA H200 SXM dense TF32) |")


def test_figures_keep_three_significant_digits_on_any_machine():
    from experiments.benchmarks.measure import pct, sig
    assert [sig(x) for x in (479.3, 32.14, 0.27, 0.08714, 99.96, 9.996, 1669.7, 12345678.0, 0)] == [
        "479", "32.1", "0.270", "0.0871", "100", "10.0", "1,670", "12,345,678", "0"]
    assert pct(174.4, 212) == "174 GFLOP/s = 82%"
    assert pct(237, 345487) == "237 GFLOP/s = 0.069%"   # a GPU's peak


def test_device_sized_rows_run_in_both_dtypes_at_test_sizes(tmp_path, monkeypatch):
    """`--device_sizes=small`: the rows an accelerator runs at filling sizes, here at CPU-test
    sizes: both simulators and the RCM rollouts at their batch, MASC and LingUNet in float32
    and bfloat16, each with its figure."""
    rows = tmp_path / "rows.json"
    # the simulator and RCM scripts' outputs as they print them (their own runs are theirs)
    outputs = {"touchdown_env_bench": " batch    jax steps/s  python steps/s    ratio\n"
                                      "  2048     26,221,465         157,939   166.0x\n",
               "arramon_env_bench": "| navigation | 2,048 | 96% | 1,149,429 | 51,738 (256) | 22x |\n",
               "rxr_rollout_bench": "    64         scan     91,234    0.70\n"}
    monkeypatch.setattr(run_all, "script", lambda module, *a: outputs[module.rsplit(".", 1)[1]])
    with xla_optimizations(False):      # compilation is most of these rows' time here
        run_all.main(["--quick", "--only=device", "--device_sizes=small", f"--json={rows}"])
    got = [r for r in json.loads(rows.read_text())["rows"] if r["bench"].startswith("device")]
    works = [r["work"] for r in got]
    assert len(got) == 7 and all("failed" not in w for w in works), works
    assert sum("bfloat16" in w for w in works) == 2 and sum("float32" in w for w in works) == 2
    assert all(r["ours"].split()[0].replace(",", "").replace(".", "").isdigit() for r in got)
    assert "2,048 episodes at once" in works[0] and got[0]["ours"] == "26,221,465 steps/s"
    assert got[2]["ours"] == "91,234 steps/s"
