"""Reading and validating Touchdown records (`ttw_jax.touchdown.records`)."""
import json
import math

import numpy as np
import pytest

from tests.conftest import shared_path
from ttw_jax.touchdown import records as tr


def record(route_id=7, **changes):
    """A small valid record in the original schema (values as the release stores them)."""
    rec = {
        "route_id": route_id, "navigation_text": "Go straight and stop.",
        "td_location_text": "Touchdown is on the mailbox.",
        "route_panoids": ["a", "b", "c"], "start_heading": 0.0, "end_heading": 90.5,
        "main_pano": "c", "main_heading": "90.5", "main_static_center": '{"x":0.5,"y":0.25}',
        "pre_pano": "b", "pre_heading": "", "pre_static_center": '{"x":0.1,"y":0.9}',
        "post_pano": "d", "post_heading": "12", "post_static_center": '{"x":-1,"y":-1}',
    }
    rec.update(changes)
    return {k: v for k, v in rec.items() if v is not None}


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def test_the_shared_sample_parses():
    path = shared_path("touchdown", "touchdown_unseen_dev_sample.json")
    records = tr.read_records(path, sdr=True)
    assert len(records) == 800
    assert tr.read_records(path) == records
    # Independent reading of the raw file.
    raw = [json.loads(line) for line in open(path) if line.strip()]
    visible, empty_headings = 0, 0
    for r in raw:
        for v in ("main", "pre", "post"):
            c = json.loads(r[v + "_static_center"])
            if not (c["x"] == -1 and c["y"] == -1):
                visible += 1
                empty_headings += r[v + "_heading"] == ""
    nav = [tr.navigation_example(r) for r in records]
    assert len(nav) == 800
    for n, r in zip(nav, raw):
        assert n == {k: r[k] for k in tr.NAVIGATION_FIELDS}
        assert type(n["route_id"]) is int and type(n["start_heading"]) is float
    sdr = [e for r in records for e in tr.sdr_examples(r)]
    assert len(sdr) == visible
    assert sum(math.isnan(e["heading"]) for e in sdr) == empty_headings
    assert len({(e["route_id"], e["which"]) for e in sdr}) == len(sdr)
    assert all(0 <= e["center_x"] <= 1 and 0 <= e["center_y"] <= 1 for e in sdr)
    assert {e["which"] for e in sdr} == {"main", "pre", "post"}


def test_examples_of_one_record():
    rec = record()
    assert tr.navigation_example(rec) == {
        "route_id": 7, "navigation_text": "Go straight and stop.", "route_panoids": ["a", "b", "c"],
        "start_heading": 0.0, "end_heading": 90.5}
    main, pre = tr.sdr_examples(rec)   # post is not visible
    assert main == {"route_id": 7, "which": "main", "panoid": "c", "heading": 90.5,
                    "center_x": 0.5, "center_y": 0.25,
                    "td_location_text": "Touchdown is on the mailbox."}
    assert (pre["which"], pre["panoid"], pre["center_x"], pre["center_y"]) == ("pre", "b", 0.1, 0.9)
    assert math.isnan(pre["heading"])   # empty in the record, as in parts of the release


def test_numpy_values_are_accepted_bools_and_non_finite_numbers_are_not():
    """The shared rule of `ttw_jax.core.records`: numpy integers / floats (e.g. from a generator)
    are accepted (they used not to be); bools, NaN and infinity are not."""
    nav = tr.navigation_example(record(np.int64(7), start_heading=np.float32(0.5),
                                       end_heading=np.int32(90)))
    assert nav["route_id"] == 7 and type(nav["route_id"]) is int
    assert (nav["start_heading"], nav["end_heading"]) == (0.5, 90.0)
    assert type(nav["end_heading"]) is float
    for bad, message in [(record(True), "field 'route_id' is not an integer: True"),
                         (record(start_heading=math.nan), "field 'start_heading' is not a heading"),
                         (record(end_heading=math.inf), "field 'end_heading' is not a heading"),
                         (record(main_heading="inf"), "field 'main_heading' is not a heading")]:
        with pytest.raises(tr.RecordFormatError, match=message):
            tr.sdr_examples(bad)


def test_blank_lines_are_skipped(tmp_path):
    path = write_lines(tmp_path / "dev.json", ["", json.dumps(record(1)), "   ",
                                               json.dumps(record(2))])
    assert [r["route_id"] for r in tr.read_records(path, sdr=True)] == [1, 2]


def test_missing_file_names_the_path_and_the_source(tmp_path):
    path = str(tmp_path / "train.json")
    with pytest.raises(FileNotFoundError, match="train.json") as e:
        tr.read_records(path)
    assert path in str(e.value) and "github.com/lil-lab/touchdown" in str(e.value)


@pytest.mark.parametrize("bad_line, field", [
    ('{"route_id": 3, "navigation_text": ', "invalid JSON"),
    (json.dumps(record(3, route_panoids=None)), "missing field 'route_panoids'"),
    (json.dumps(record(3, route_panoids=["a"])), "field 'route_panoids'"),
    (json.dumps(record(3, route_panoids=["a", 5])), "field 'route_panoids'"),
    (json.dumps(record(3, route_panoids=["a", "../b"])), "field 'route_panoids'"),
    (json.dumps(record(3, start_heading="0.0")), "field 'start_heading' is not a heading"),
    (json.dumps(record(3, start_heading=1e300)), "field 'start_heading' is not a heading: an "
                                                 "angle in degrees within +-720"),
    (json.dumps(record(3, end_heading=-1e9)), "field 'end_heading' is not a heading"),
    (json.dumps(record("3")), "field 'route_id' is not an integer"),
    (json.dumps(record(3, navigation_text=None)), "missing field 'navigation_text'"),
    (json.dumps(record(2)), "field 'route_id' 2 repeats line 2"),
    ("[1, 2]", "expected a JSON object"),
])
def test_malformed_line_names_file_line_and_field(tmp_path, bad_line, field):
    path = write_lines(tmp_path / "dev.json", [json.dumps(record(1)), json.dumps(record(2)),
                                               bad_line, json.dumps(record(4))])
    with pytest.raises(tr.RecordFormatError) as e:
        tr.read_records(path)
    assert str(e.value).startswith(f"{path}:3: ")
    assert field in str(e.value)


@pytest.mark.parametrize("changes, field", [
    ({"main_static_center": "x=0.5,y=0.2"}, "field 'main_static_center'"),
    ({"pre_static_center": {"x": 0.5, "y": 0.2}}, "field 'pre_static_center'"),
    ({"post_static_center": '{"x": "0.5", "y": 0.2}'}, "field 'post_static_center'"),
    ({"main_static_center": '{"x": 1.5, "y": 0.2}'}, "field 'main_static_center'"),
    ({"pre_heading": "north"}, "field 'pre_heading' is not a heading"),
    ({"main_heading": "1e300"}, "field 'main_heading' is not a heading"),
    ({"post_pano": None}, "missing field 'post_pano'"),
    ({"main_pano": "../../etc/passwd"}, "field 'main_pano' is not a non-empty panoid without path"),
    ({"main_pano": "/abs"}, "field 'main_pano' is not a non-empty panoid without path"),
    ({"td_location_text": None}, "missing field 'td_location_text'"),
])
def test_malformed_sdr_fields_are_checked_only_with_sdr(tmp_path, changes, field):
    path = write_lines(tmp_path / "dev.json", [json.dumps(record(1)), "",
                                               json.dumps(record(2, **changes))])
    assert len(tr.read_records(path)) == 2   # navigation fields are fine
    with pytest.raises(tr.RecordFormatError) as e:
        tr.read_records(path, sdr=True)
    assert str(e.value).startswith(f"{path}:3: ")
    assert field in str(e.value)


def test_check_panoids(tmp_path):
    records = [record(1, route_panoids=["a", "b"]), record(2, route_panoids=["b", "zz", "a"])]
    tr.check_panoids(records[:1], {"a": 0, "b": 1}, "dev.json")
    with pytest.raises(tr.RecordFormatError) as e:
        tr.check_panoids(records, {"a": 0, "b": 1}, "touchdown/x:dev")
    msg = str(e.value)
    assert msg.startswith("touchdown/x:dev, route_id 2: field 'route_panoids': panoid 'zz' not "
                          "in the graph")
    # with the official file at hand: its name and the record's line, not a sorted index
    (tmp_path / "dev.json").write_text("\n".join(json.dumps(r) for r in records[::-1]) + "\n")
    from ttw_jax.touchdown.dataset import record_location
    with pytest.raises(tr.RecordFormatError) as e:
        tr.check_panoids(records, {"a": 0, "b": 1}, "touchdown/x:dev",
                         lambda rec: record_location(str(tmp_path), "dev", rec))
    assert str(e.value).startswith(f"{tmp_path / 'dev.json'}:1: field 'route_panoids': panoid "
                                   "'zz' not in the graph")
