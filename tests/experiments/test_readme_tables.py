"""Every README table names its source, and every number of a backed table is found, as printed,
in the committed results file it names (`experiments/readme_tables.py`)."""
import json

import pytest

from experiments import readme_tables as rt


def test_every_readme_table_is_marked_and_every_backed_number_is_in_its_file():
    problems, kinds = [], {}
    for readme in rt.readmes():
        for table in rt.tables(readme):
            kinds[table.kind] = kinds.get(table.kind, 0) + 1
            problems += rt.check(table)
    assert not problems, "\n".join(problems)
    assert kinds.get("results", 0) >= 4      # the tables backed so far


README = """# x

<!-- results: results/run.json -->
| agent | TC | SPD | paper TC |
| --- | --- | --- | --- |
| GA | 0.123 (0.004) | 12.5 | 0.999 |
| paper, GA | 0.777 | 1.0 | |
| RConcat | 45.6% | 1,234 | |

<!-- table: settings -->
| key | value |
| --- | --- |
| lr | 0.5 |
"""


def write(tmp_path, readme=README, results=None):
    (tmp_path / "results").mkdir(exist_ok=True)
    (tmp_path / "results" / "run.json").write_text(json.dumps(results if results is not None else {
        "command": "python -m x", "results": {"ga": {"tc": 0.1234, "tc_std": 0.0041,
                                                       "spd": 12.46},
                                              "rconcat": {"tc": 0.456, "spd": "1,234 m"}}}))
    path = tmp_path / "README.md"
    path.write_text(readme)
    return str(path)


def problems(path):
    return [p for t in rt.tables(path) for p in rt.check(t)]


def test_a_worked_example(tmp_path):
    path = write(tmp_path)
    backed, settings = rt.tables(path)
    assert (backed.kind, backed.source, backed.line) == ("results", "results/run.json", 4)
    assert settings.kind == "table"
    # the labels, the paper's row and the paper's column are not checked
    assert [n for _, n in rt.printed_numbers(backed)] == ["0.123", "0.004", "12.5", "45.6",
                                                          "1,234"]
    assert problems(path) == []


@pytest.mark.parametrize("old, new, message", [
    ("| GA | 0.123 (0.004)", "| GA | 0.124 (0.004)", "'0.124' (cell '0.124 (0.004)') is not in"),
    ("| 12.5 |", "| 12.4 |", "'12.4'"),
    ("<!-- results: results/run.json -->\n", "", "no marker"),
    ("results/run.json", "results/other.json", "results file results/other.json does not exist"),
])
def test_a_changed_number_or_a_missing_source_is_named(tmp_path, old, new, message):
    found = problems(write(tmp_path, README.replace(old, new, 1)))
    assert found and message in found[0]


def test_a_results_file_names_its_command(tmp_path):
    assert "has no 'command'" in problems(write(tmp_path, results={"results": {}}))[0]


def test_keep_writes_the_run_and_its_command(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.json").write_text(json.dumps({"test": {"tc": 0.5}}))
    out = tmp_path / "results" / "kept.json"
    kept = rt.keep(str(tmp_path / "run"), str(out), "python -m y")
    assert json.loads(out.read_text()) == kept == {"command": "python -m y",
                                                   "results": {"test": {"tc": 0.5}}}


def test_keep_writes_a_benchmark_table_as_its_text(tmp_path):
    table = tmp_path / "bench.md"
    table.write_text("| work | rate |\n| --- | --- |\n| peak | 1,234 GFLOP/s |\n")
    kept = rt.keep(str(table), str(tmp_path / "results" / "bench.json"), "python -m z",
                   wall_time="90 s")
    assert kept == {"command": "python -m z", "wall_time": "90 s", "output": table.read_text()}
    assert 1234.0 in rt.numbers_in(kept)
