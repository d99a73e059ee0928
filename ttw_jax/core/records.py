"""Reading and checking record files: one error family, readers that name file and line, and
field checks with one rule for every system.

Readers: `read_json` / `read_json_list` (one JSON document), `read_jsonl` (one JSON object per
non-blank line, records `where` = `{path}:{line}`) and `read_lines` (non-blank text lines); `.gz`
files are decompressed. A missing file raises FileNotFoundError `{path}: file not found. {hint}`,
anything else `error` (a `RecordFormatError`) naming the file, and the line and column of
malformed JSON.

Values: an integer is a Python or numpy integer, not a bool (`is_int`); a number is an integer or
a Python / numpy float, not a bool, and finite (`is_number`). `Fields` reads the fields of one
record with these rules; its messages are `{where}: missing field 'name'`, `{where}: field
'name' is not WHAT: VALUE` (`Fields.bad`) and `{where}: field 'name': PROBLEM` (`Fields.fail`).
Numeric fields of every system follow one rule, `QUANTITIES` (`quantity_problem`,
`Fields.quantity`: headings, angles, distances, coordinates, times finite and in range), and every
feature array one more (`nonfinite_problem`: finite in the dtype it is stored in and in the dtype
it is used in); `copies` finds records repeated exactly.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import tokenize
import zipfile
import zlib
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from ttw_jax.core import paths


class RecordFormatError(ValueError):
    """A data file exists but its content is malformed; the message names the file, the line or
    entry, and the field. Each system's format error is a subclass."""


ErrorType = type[RecordFormatError]


# ----------------------------------------------------------------------------- files

@contextlib.contextmanager
def damaged(path: Any, error: ErrorType = RecordFormatError) -> Iterator[None]:
    """Inside it, what numpy, zipfile and zlib raise for a damaged or truncated file (a bad zip
    directory, a short member, a corrupt stream, a short `.npy`, an `.npy` header that does not
    parse: numpy's tokenizer raises TokenError or SyntaxError) becomes `error` naming `path`;
    a missing file and this project's own format errors pass through unchanged."""
    try:
        yield
    except (RecordFormatError, FileNotFoundError):
        raise
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error, SyntaxError,
            tokenize.TokenError) as e:
        raise error(f"{path}: not readable: damaged, truncated or not in the expected format "
                    f"({type(e).__name__}: {str(e)[:200]})") from None


def problem_line(path: Any, error: BaseException) -> str:
    """One line of a release check (`<system>.validate`) for `error` about `path`: its message
    on one line (the readers' messages start with the file), prefixed with `path` and the
    error's type when it does not start with it."""
    text = " ".join(str(error).splitlines())
    return text if text.startswith(str(path)) else f"{path}: {type(error).__name__}: {text}"


def check_npy_size(path: Any, error: ErrorType = RecordFormatError) -> tuple[tuple, np.dtype]:
    """(shape, dtype) from an `.npy` file's header, after checking that the file holds every
    byte the header announces and no more (a truncated file, or bytes appended after the array,
    is `error` naming it and both sizes)."""
    with damaged(path, error), paths.open_binary(path) as f:
        version = np.lib.format.read_magic(f)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        with paths.NPY_LOCK:        # numpy's header parser is not thread-safe (paths.NPY_LOCK)
            shape, _, dtype = read_header(f)
        expected = f.tell() + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        f.seek(0, io.SEEK_END)
        size = f.tell()
    if dtype.hasobject:
        raise error(f"{path}: an object array (it would need pickle, which is never used)")
    if size < expected:
        raise error(f"{path}: truncated: {size} bytes, the header announces {expected}")
    if size > expected:
        raise error(f"{path}: {size - expected} bytes after the array (the header announces "
                    f"{expected} bytes in all, the file has {size})")
    return tuple(shape), dtype


def _lines(path: str, error: ErrorType, hint: str) -> Iterator[str]:
    """Every line of a text file (gzip-compressed if it ends in `.gz`; any `paths.resolve`
    path; a leading UTF-8 byte-order mark is dropped)."""
    file = paths.resolve(path)
    if not file.is_file():
        raise FileNotFoundError(f"{path}: file not found. {hint}".rstrip())
    try:
        with file.open("rb") as raw:
            f = (gzip.open(raw, "rt", encoding="utf-8-sig") if str(path).endswith(".gz")
                 else io.TextIOWrapper(raw, encoding="utf-8-sig"))
            yield from f
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as e:
        raise error(f"{path}: unreadable ({type(e).__name__}: {e})") from None


def read_lines(path: str, error: ErrorType = RecordFormatError, hint: str = ""
               ) -> Iterator[tuple[int, str]]:
    """(line number from 1, text without the newline) of each non-blank line of a text file."""
    for line_no, line in enumerate(_lines(path, error, hint), 1):
        if line.strip():
            yield line_no, line.rstrip("\r\n")


def read_jsonl(path: str, error: ErrorType = RecordFormatError, hint: str = ""
               ) -> Iterator[tuple[str, int, dict]]:
    """(where = `{path}:{line}`, line number, object) of each non-blank line of a JSON-lines
    file; `error` `{path}:{line}: ...` for a line that is not a JSON object."""
    for line_no, line in read_lines(path, error, hint):
        where = f"{path}:{line_no}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise error(f"{where}: invalid JSON at column {e.colno}: {e.msg}") from None
        except RecursionError:
            raise error(f"{where}: JSON nested too deeply to read") from None
        if not isinstance(rec, dict):
            raise error(f"{where}: expected a JSON object, got {type(rec).__name__}")
        yield where, line_no, rec


def read_json(path: str, error: ErrorType = RecordFormatError, hint: str = "") -> Any:
    """The decoded content of a JSON file; `error` `{path}: invalid JSON at line L, column C:
    ...` when malformed."""
    try:
        return json.loads("".join(_lines(path, error, hint)))
    except json.JSONDecodeError as e:
        raise error(f"{path}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}"
                    ) from None
    except RecursionError:
        raise error(f"{path}: JSON nested too deeply to read") from None


def read_json_list(path: str, items: str, error: ErrorType = RecordFormatError,
                   hint: str = "") -> list:
    """`read_json` of a file whose top level is a list of `items` (e.g. "episodes")."""
    data = read_json(path, error, hint)
    if not isinstance(data, list):
        raise error(f"{path}: top level: expected a JSON list of {items}, got "
                    f"{type(data).__name__}")
    return data


# ----------------------------------------------------------------------------- values and fields

INT32_MAX = 2**31 - 1


def is_int(v: Any) -> bool:
    """A Python or numpy integer, not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    """A finite integer (`is_int`) or Python / numpy float."""
    return is_int(v) or (isinstance(v, (float, np.floating)) and math.isfinite(v))


def is_string(v: Any) -> bool:
    """A str that encodes to UTF-8 (a JSON `\\ud800` escape gives a lone surrogate, which does
    not, and would fail later wherever the text is written or tokenized)."""
    if not isinstance(v, str):
        return False
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_nonempty_string(v: Any) -> bool:
    return is_string(v) and v != ""


def is_file_stem(v: Any) -> bool:
    """An id that names a file inside its data folder: a non-empty string with no path separator
    (`/`, `\\`), no NUL, not `.` or `..` (a record's `scan` or panoid never leaves the folder)."""
    return (is_nonempty_string(v) and not any(c in v for c in "/\\\0")
            and v not in (".", ".."))


def list_of(check: Callable[[Any], bool], min_len: int = 0, max_len: int | None = None
            ) -> Callable[[Any], bool]:
    """A check: a list of `min_len` to `max_len` (default: any number of) items passing `check`."""
    return lambda v: (isinstance(v, list) and min_len <= len(v)
                      and (max_len is None or len(v) <= max_len) and all(map(check, v)))


def is_missing(v: Any) -> bool:
    """None or NaN: an optional value that is absent."""
    return v is None or (isinstance(v, (float, np.floating)) and math.isnan(v))


def shown(value: Any, limit: int = 80) -> str:
    """`repr(value)`, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def copies(items: Sequence[Any]) -> list[tuple[int, int]]:
    """(index, index of the first equal item before it) of each item of a list of JSON values
    that repeats an earlier one exactly (compared as canonical JSON): a copied record or episode
    would count twice in training and in the metrics."""
    first: dict[str, int] = {}
    out = []
    for i, item in enumerate(items):
        key = json.dumps(item, sort_keys=True)
        if key in first:
            out.append((i, first[key]))
        else:
            first[key] = i
    return out


# One rule for the numeric fields of every system: a value of a kind is finite and inside its
# kind's (lowest, highest). The bounds are wide (a value outside changes results and is never a
# real measurement): the releases' own values sit well inside (Touchdown headings -65..470 deg,
# R2R headings 0..2pi rad, Matterport heights 0..9 m, R2R distances 5..26 m).
QUANTITIES: dict[str, tuple[float, float, str]] = {
    "degrees": (-720.0, 720.0, "an angle in degrees within +-720"),
    "radians": (-4 * math.pi, 4 * math.pi, "an angle in radians within +-4 pi"),
    "distance": (0.0, 1e6, "a distance >= 0 (metres, at most 1e6)"),
    "coordinate": (-1e7, 1e7, "a coordinate within +-1e7"),
    "time": (0.0, 1e7, "a time >= 0 (seconds, at most 1e7)"),
    "count": (0.0, 2.0**31 - 1, "a count >= 0"),
}


def quantity_problem(value: Any, kind: str) -> str | None:
    """Why `value` is not a finite number of `kind` (a key of `QUANTITIES`), or None."""
    low, high, what = QUANTITIES[kind]
    if not is_number(value) or not low <= float(value) <= high:
        return f"is not {what}: {shown(value)}"
    return None


def first_nonfinite(array: np.ndarray, used_dtype: Any = np.float32
                    ) -> tuple[tuple[int, ...], np.dtype] | None:
    """(the index of the first element of a numeric array that is not finite as stored or as
    `used_dtype`, the dtype it is first not finite in), or None when every element is."""
    a = np.asarray(array)
    if a.dtype.kind not in "fc":
        return None
    for dtype in (a.dtype, np.dtype(used_dtype)):
        with np.errstate(over="ignore", invalid="ignore"):
            finite = np.isfinite(a.astype(dtype, copy=False))
        if not finite.all():
            index = np.unravel_index(int(np.argmin(finite.ravel())), a.shape)
            return tuple(int(i) for i in index), dtype
    return None


def nonfinite_problem(array: np.ndarray, used_dtype: Any = np.float32) -> str | None:
    """Why a numeric array is not finite in the dtype it is stored in and in `used_dtype`, the
    one it is cast to for training (float64 1e300 is finite, but infinite as float16), or None;
    the message names the first bad index (`first_nonfinite`)."""
    bad = first_nonfinite(array, used_dtype)
    if bad is None:
        return None
    a, (index, dtype) = np.asarray(array), bad
    value = a[index].item()
    if dtype == a.dtype:
        return f"non-finite value {value!r} at index {index} (stored as {a.dtype})"
    return (f"value {value!r} at index {index} is not finite as {dtype}, the dtype it is used "
            f"in (stored as {a.dtype})")


class Fields:
    """Checked access to the fields of one record `rec`; errors are `error`s naming `where` (file
    and line or entry) and the field."""

    def __init__(self, rec: Mapping, where: str, error: ErrorType = RecordFormatError):
        self.rec, self.where, self.error = rec, where, error

    def bad(self, name: str, what: str, value: Any) -> RecordFormatError:
        """`{where}: field '{name}' is not {what}: {value}` (to raise)."""
        return self.error(f"{self.where}: field '{name}' is not {what}: {shown(value)}")

    def fail(self, name: str, problem: str) -> RecordFormatError:
        """`{where}: field '{name}': {problem}` (to raise)."""
        return self.error(f"{self.where}: field '{name}': {problem}")

    def get(self, name: str, check: Callable[[Any], bool] | None = None, what: str = "") -> Any:
        """The value of `name` (`a.b` walks nested objects); an error if it is missing or
        `check(value)` is false (`what` describes the expected value)."""
        value, seen = self.rec, []
        for part in name.split("."):
            if not isinstance(value, Mapping):
                raise self.bad(".".join(seen), "an object", value)
            seen.append(part)
            if part not in value:
                raise self.error(f"{self.where}: missing field '{'.'.join(seen)}'")
            value = value[part]
        if check is not None and not check(value):
            raise self.bad(name, what, value)
        return value

    def int(self, name: str, minimum: int | None = None, maximum: int = INT32_MAX) -> int:
        """An integer >= `minimum` (if given) and <= `maximum`: ids are stored as int32, so an
        id beyond its range is named here rather than overflowing later."""
        what = "an integer" if minimum is None else f"an integer >= {minimum}"
        value = int(self.get(name, lambda v: is_int(v) and (minimum is None or v >= minimum),
                             what))
        if not -INT32_MAX - 1 <= value <= maximum:
            raise self.fail(name, f"{value} is out of range (at most {maximum}, stored as int32)")
        return value

    def number(self, name: str, what: str = "a finite number") -> float:
        return float(self.get(name, is_number, what))

    def quantity(self, name: str, kind: str) -> float:
        """A number of `kind` under the shared rule (`QUANTITIES`)."""
        value = self.get(name)
        problem = quantity_problem(value, kind)
        if problem:
            raise self.fail(name, problem)
        return float(value)

    def optional_number(self, name: str) -> float:
        """A finite number; NaN when the field is absent, null or NaN."""
        v = self.rec.get(name)
        if is_missing(v):
            return math.nan
        if not is_number(v):
            raise self.bad(name, "a number (or absent)", v)
        return float(v)

    def file_stem(self, name: str) -> str:
        """A string field that names a file inside the data folder (`is_file_stem`)."""
        return self.get(name, is_file_stem, "an id without path separators (not '.' or '..')")

    def string(self, name: str, nonempty: bool = False) -> str:
        if nonempty:
            return self.get(name, is_nonempty_string, "a non-empty string")
        return self.get(name, is_string, "a string")
