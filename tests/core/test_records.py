"""The record-checking kit (`ttw_jax.core.records`): readers name file, line and column; one rule
for integers, numbers and strings; `Fields` names the field."""
import gzip
import json
import math

import numpy as np
import pytest

from ttw_jax.arramon.records import ArramonFormatError
from ttw_jax.core import records as core
from ttw_jax.rxr import records as rr
from ttw_jax.rxr.graph import ConnectivityFormatError
from ttw_jax.rxr.path_sampling import RegionFormatError
from ttw_jax.talk_the_walk.landmarks.release import FeatureFormatError
from ttw_jax.talk_the_walk.language.dialogues import DialogueFormatError
from ttw_jax.talk_the_walk.maps import MapFormatError
from ttw_jax.touchdown import records as tr
from ttw_jax.touchdown.graph import GraphFormatError


class OwnError(core.RecordFormatError):
    pass


@pytest.mark.parametrize("error", [ArramonFormatError, rr.RecordFormatError, tr.RecordFormatError,
                                   DialogueFormatError, MapFormatError, FeatureFormatError,
                                   ConnectivityFormatError, GraphFormatError, RegionFormatError])
def test_every_system_format_error_is_a_record_format_error(error):
    assert issubclass(error, core.RecordFormatError) and issubclass(error, ValueError)
    assert error is not core.RecordFormatError   # catching it catches that system only


# ----------------------------------------------------------------------------- values

@pytest.mark.parametrize("value, ok", [
    (3, True), (-7, True), (10**30, True), (np.int64(3), True), (np.uint8(255), True),
    (True, False), (np.bool_(True), False), (3.0, False), (np.float32(3), False), ("3", False),
    (None, False)])
def test_is_int_takes_python_and_numpy_integers_but_not_bools(value, ok):
    assert core.is_int(value) is ok


@pytest.mark.parametrize("value, ok", [
    (3, True), (-2.5, True), (0.0, True), (np.int32(4), True), (np.float32(1.5), True),
    (np.float64(-1e300), True), (False, False), (np.bool_(False), False), (math.nan, False),
    (math.inf, False), (-math.inf, False), (np.float32("nan"), False), (np.float64("inf"), False),
    ("1.5", False), (None, False), ([1.0], False)])
def test_is_number_is_finite_and_not_a_bool(value, ok):
    assert core.is_number(value) is ok


def test_is_missing_strings_and_lists():
    assert all(core.is_missing(v) for v in (None, math.nan, np.float32("nan")))
    assert not any(core.is_missing(v) for v in (0, 0.0, "", math.inf, []))
    assert core.is_string("") and not core.is_string(b"a") and not core.is_string(None)
    assert core.is_nonempty_string("a") and not core.is_nonempty_string("")
    pair_or_triple = core.list_of(core.is_int, 2, 3)
    assert pair_or_triple([1, 2]) and pair_or_triple([1, np.int64(2), 3])
    assert not pair_or_triple([1]) and not pair_or_triple([1, 2, 3, 4])
    assert not pair_or_triple((1, 2))            # a tuple is not a JSON list
    assert not pair_or_triple([1, True])         # one bad item
    assert core.list_of(core.is_string)([]) and not core.list_of(core.is_string, 1)([])


def test_shown_cuts_long_values():
    assert core.shown([1, 2]) == "[1, 2]"
    long = core.shown("x" * 200)
    assert len(long) == 80 and long.startswith("'xxx") and long.endswith("...")


# ----------------------------------------------------------------------------- Fields

def fields(rec, error=core.RecordFormatError):
    return core.Fields(rec, "data.jsonl:4", error)


def message(call) -> str:
    with pytest.raises(core.RecordFormatError) as e:
        call()
    return str(e.value)


def test_get_names_file_line_and_field():
    f = fields({"a": {"b": 1}, "c": [], "d": "x"})
    assert f.get("a.b") == 1 and f.get("d", core.is_string, "a string") == "x"
    assert message(lambda: f.get("z")) == "data.jsonl:4: missing field 'z'"
    assert message(lambda: f.get("a.z")) == "data.jsonl:4: missing field 'a.z'"
    assert message(lambda: f.get("c.b")) == "data.jsonl:4: field 'c' is not an object: []"
    assert message(lambda: f.get("d", core.is_int, "an id")) == (
        "data.jsonl:4: field 'd' is not an id: 'x'")
    assert str(f.bad("q", "a thing", 5)) == "data.jsonl:4: field 'q' is not a thing: 5"
    assert str(f.fail("q", "too late")) == "data.jsonl:4: field 'q': too late"


def test_errors_are_of_the_given_class():
    f = fields({}, OwnError)
    with pytest.raises(OwnError, match="missing field 'n'"):
        f.int("n")
    assert isinstance(f.bad("n", "x", 1), OwnError) and isinstance(f.fail("n", "x"), OwnError)


def test_int_rejects_bools_and_accepts_numpy_integers():
    f = fields({"n": np.int64(7), "b": True, "s": "7", "neg": -1, "big": 2.0})
    assert f.int("n") == 7 and type(f.int("n")) is int
    assert message(lambda: f.int("b")) == "data.jsonl:4: field 'b' is not an integer: True"
    assert "field 's' is not an integer: '7'" in message(lambda: f.int("s"))
    assert "field 'big' is not an integer: 2.0" in message(lambda: f.int("big"))
    assert f.int("neg") == -1
    assert "field 'neg' is not an integer >= 0: -1" in message(lambda: f.int("neg", 0))


def test_number_rejects_nan_inf_and_bools():
    f = fields({"x": np.float32(0.5), "i": 3, "nan": math.nan, "inf": -math.inf, "b": False,
                "s": "1.0"})
    assert f.number("x") == 0.5 and type(f.number("x")) is float and f.number("i") == 3.0
    assert message(lambda: f.number("nan")) == (
        "data.jsonl:4: field 'nan' is not a finite number: nan")
    assert "field 'inf' is not a finite number: -inf" in message(lambda: f.number("inf"))
    assert "field 'b' is not a finite number: False" in message(lambda: f.number("b"))
    assert "field 's' is not a heading: '1.0'" in message(lambda: f.number("s", "a heading"))


def test_optional_number_is_nan_when_absent_null_or_nan():
    f = fields({"none": None, "nan": math.nan, "x": np.int16(2), "inf": math.inf, "s": "far"})
    assert all(math.isnan(f.optional_number(k)) for k in ("absent", "none", "nan"))
    assert f.optional_number("x") == 2.0 and type(f.optional_number("x")) is float
    assert "field 'inf' is not a number (or absent): inf" in message(
        lambda: f.optional_number("inf"))
    assert "field 's' is not a number (or absent): 'far'" in message(lambda: f.optional_number("s"))


def test_string():
    f = fields({"s": "", "n": 5})
    assert f.string("s") == ""
    assert "field 's' is not a non-empty string: ''" in message(
        lambda: f.string("s", nonempty=True))
    assert "field 'n' is not a string: 5" in message(lambda: f.string("n"))


# ----------------------------------------------------------------------------- files

def test_read_json_and_its_errors(tmp_path):
    path = tmp_path / "data.json"
    path.write_text('[{"a": 1},\n {"b": 2}]')
    assert core.read_json(str(path)) == [{"a": 1}, {"b": 2}]
    assert core.read_json_list(str(path), "things") == [{"a": 1}, {"b": 2}]
    path.write_text('[{"a": 1},\n {"b" 2}]')    # column 7 of line 2: the missing ':'
    with pytest.raises(OwnError) as e:
        core.read_json(str(path), OwnError)
    assert str(e.value) == f"{path}: invalid JSON at line 2, column 7: Expecting ':' delimiter"
    path.write_text('{"a": 1}')
    with pytest.raises(OwnError, match=f"^{path}: top level: expected a JSON list of things, "
                                       f"got dict$"):
        core.read_json_list(str(path), "things", OwnError)
    path.write_bytes(b'["caf\xe9"]')    # Latin-1, not UTF-8
    with pytest.raises(OwnError, match=f"^{path}: unreadable \\(UnicodeDecodeError"):
        core.read_json(str(path), OwnError)


def test_a_missing_file_names_the_path_and_the_hint(tmp_path):
    path = str(tmp_path / "nowhere" / "train.json")
    with pytest.raises(FileNotFoundError) as e:
        core.read_json(path, hint="Get it from example.org.")
    assert str(e.value) == f"{path}: file not found. Get it from example.org."
    with pytest.raises(FileNotFoundError, match="file not found.$"):
        core.read_json(path)
    for reader in (core.read_jsonl, core.read_lines):
        with pytest.raises(FileNotFoundError, match=f"{path}: file not found. See BUILD.md."):
            list(reader(path, hint="See BUILD.md."))
    with pytest.raises(FileNotFoundError, match=f"^{tmp_path}: file not found"):   # a folder
        core.read_json(str(tmp_path))


def test_read_jsonl_numbers_lines_and_skips_blank_ones(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"a": 1}\n\n   \n{"a": 2}\n')
    assert list(core.read_jsonl(str(path))) == [(f"{path}:1", 1, {"a": 1}),
                                                 (f"{path}:4", 4, {"a": 2})]
    gz = tmp_path / "data.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"a": "ü"}) + "\n")
    assert list(core.read_jsonl(str(gz))) == [(f"{gz}:1", 1, {"a": "ü"})]


@pytest.mark.parametrize("line, problem", [
    ('{"a": 1,, "b": 2}', "invalid JSON at column 9: Expecting property name enclosed in double "
                          "quotes"),
    ("[1, 2]", "expected a JSON object, got list"),
    ('"text"', "expected a JSON object, got str"),
])
def test_read_jsonl_names_file_line_and_column(tmp_path, line, problem):
    path = tmp_path / "data.jsonl"
    path.write_text('{"a": 1}\n\n' + line + '\n{"a": 3}\n')
    with pytest.raises(OwnError) as e:
        list(core.read_jsonl(str(path), OwnError))
    assert str(e.value) == f"{path}:3: {problem}"


def test_read_lines_and_unreadable_files(tmp_path):
    path = tmp_path / "links.txt"
    path.write_text("a,1,b\n\n  \nc,2,d\r\n")
    assert list(core.read_lines(str(path))) == [(1, "a,1,b"), (4, "c,2,d")]
    gz = tmp_path / "links.txt.gz"
    gz.write_bytes(b"not gzip at all")
    with pytest.raises(OwnError, match=f"^{gz}: unreadable \\(BadGzipFile"):
        list(core.read_lines(str(gz), OwnError))


@pytest.mark.parametrize("kind", ["npy", "npz", "npy_size"])
def test_numpy_headers_are_parsed_under_one_lock(tmp_path, kind):
    """numpy parses `.npy` headers with `ast.literal_eval`, which CPython 3.11 does not make
    thread-safe (a loader thread failed with "AST constructor recursion depth mismatch"): every
    read (`paths.load_numpy`, an `.npz` member, `check_npy_size`) waits for `paths.NPY_LOCK`."""
    import threading
    from ttw_jax.core import paths
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    path = str(tmp_path / f"x.{kind[:3]}")
    np.save(path, x) if kind != "npz" else np.savez(path, x=x)
    npz = paths.load_numpy(path) if kind == "npz" else None
    read = {"npy": lambda: paths.load_numpy(path), "npz": lambda: npz["x"],
            "npy_size": lambda: core.check_npy_size(path)}[kind]
    got = []
    with paths.NPY_LOCK:
        t = threading.Thread(target=lambda: got.append(read()))
        t.start()
        t.join(0.3)
        assert t.is_alive() and not got            # waiting for the lock
    t.join(10)
    assert len(got) == 1
    if kind == "npy_size":
        assert got[0] == ((2, 3), np.dtype(np.float32))
    else:
        np.testing.assert_array_equal(got[0], x)
    if npz is not None:
        with npz as z:
            assert "x" in z and list(z) == ["x"] and dict(z.items())["x"].shape == (2, 3)
