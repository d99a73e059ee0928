"""Paths the library reads and writes: local files, `file://` URIs, or any `etils.epath` scheme
(`gs://`, `s3://`, ...), so a workdir or data folder may live on a bucket.

`resolve(p)` is the one entry point: `file:///abs` becomes the local `/abs`, a relative local path
becomes absolute (a run's files do not move when the process changes directory) and a URI is kept.
Writes of small files (`write_text`) are atomic: locally a temporary file renamed over the target,
on an object store a single object upload (which readers see whole or not at all).
"""
from __future__ import annotations

import collections.abc
import io
import os
import threading

from typing import Callable

import numpy as np
from etils import epath

PathLike = epath.PathLike


def is_uri(p: PathLike) -> bool:
    """True for `scheme://...` (after `file://` is stripped by `resolve`)."""
    return "://" in os.fspath(p)


def resolve(p: PathLike) -> epath.Path:
    """`p` as an `epath.Path`: `file://` URIs as local paths, relative local paths absolute."""
    s = os.fspath(p)
    if s.startswith("file://"):
        s = s[len("file://"):] or "/"
    if not is_uri(s):
        s = os.path.abspath(os.path.expanduser(s))
    return epath.Path(s)


def is_local(p: PathLike) -> bool:
    """True when `p` (after `resolve`) is on the local file system."""
    return not is_uri(resolve(p))


def write_text(path: PathLike, text: str) -> None:
    """Writes `text` to `path` atomically (see the module docstring)."""
    path = resolve(path)
    if is_uri(path):
        path.write_text(text, encoding="utf-8")
        return
    tmp = epath.Path(f"{path}.tmp.{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_bytes(path: PathLike, data: bytes) -> None:
    """`write_text` for bytes."""
    path = resolve(path)
    if is_uri(path):
        path.write_bytes(data)
        return
    tmp = epath.Path(f"{path}.tmp.{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# Reading a data folder (a release: records, graphs, features) wherever it lives. Local paths
# take the plain `os` / numpy calls (and memory maps); URIs go through `etils.epath`.

def join(p: PathLike, *parts: str) -> str:
    """`os.path.join` that keeps a URI's scheme (`gs://b/x` + `y` -> `gs://b/x/y`)."""
    return os.path.join(os.fspath(p), *parts)


def exists(p: PathLike) -> bool:
    return os.path.exists(p) if not is_uri(p) else resolve(p).exists()


def isfile(p: PathLike) -> bool:
    return os.path.isfile(p) if not is_uri(p) else resolve(p).is_file()


def isdir(p: PathLike) -> bool:
    return os.path.isdir(p) if not is_uri(p) else resolve(p).is_dir()


def listdir(p: PathLike) -> list[str]:
    """The names in folder `p` (FileNotFoundError when it is not there)."""
    if not is_uri(p):
        return os.listdir(p)
    folder = resolve(p)
    if not folder.is_dir():
        raise FileNotFoundError(f"{p}: no such folder")
    return [c.name for c in folder.iterdir()]


def list_files(folder: PathLike, match: Callable[[str], bool], subfolders: bool = False
               ) -> list[str]:
    """The paths of the files in `folder` whose names `match` (and, with `subfolders`, of those
    one folder down), in sorted name order; none when `folder` is absent."""
    if not isdir(folder):
        return []
    out = []
    for name in sorted(listdir(folder)):
        path = join(folder, name)
        if match(name):
            out.append(path)
        elif subfolders and isdir(path):
            out += [join(path, n) for n in sorted(listdir(path)) if match(n)]
    return out


def open_binary(p: PathLike):
    """A binary file object for reading (seekable, also on a bucket)."""
    return open(p, "rb") if not is_uri(p) else resolve(p).open("rb")


# numpy parses every `.npy` header (also an `.npz` member's) with `ast.literal_eval`, and CPython
# 3.11 keeps the AST builder's recursion count per interpreter, not per thread: two threads
# parsing at once (grain's loader threads reading feature files) can fail with "SystemError: AST
# constructor recursion depth mismatch" (python/cpython#106905). Every read here holds this lock.
NPY_LOCK = threading.Lock()


class LockedNpz(collections.abc.Mapping):
    """An `.npz` archive (`np.lib.npyio.NpzFile`) whose members are read under `NPY_LOCK`; a
    context manager that closes it, like the archive."""

    def __init__(self, npz):
        self._npz = npz
        self.files = npz.files

    def __getitem__(self, key: str) -> np.ndarray:
        with NPY_LOCK:
            return self._npz[key]

    def __contains__(self, key) -> bool:     # the archive's names, no member read
        return key in self._npz

    def __iter__(self):
        return iter(self._npz.files)

    def __len__(self) -> int:
        return len(self._npz.files)

    def __enter__(self) -> "LockedNpz":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._npz.close()


def load_numpy(p: PathLike, mmap_mode: str | None = None):
    """`np.load` of an `.npy` array or `.npz` archive (a `LockedNpz`), never unpickled;
    `mmap_mode` maps a local `.npy`, a URI is read into memory. Thread-safe (`NPY_LOCK`)."""
    with NPY_LOCK:
        if not is_uri(p):
            out = np.load(p, mmap_mode=mmap_mode, allow_pickle=False)
        else:
            with resolve(p).open("rb") as f:
                out = np.load(io.BytesIO(f.read()), allow_pickle=False)
    return LockedNpz(out) if isinstance(out, np.lib.npyio.NpzFile) else out


def _stamp_ns(info: dict) -> int:
    """A remote object's modification stamp in ns, from whichever field its store reports."""
    for key in ("mtime", "updated", "LastModified", "last_modified", "created"):
        value = info.get(key)
        if value is None:
            continue
        if hasattr(value, "timestamp"):
            return int(value.timestamp() * 1e9)
        if isinstance(value, (int, float)):
            return int(value * 1e9)
        try:
            import datetime
            return int(datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
                       .timestamp() * 1e9)
        except ValueError:
            continue
    return int(info.get("generation", 0) or 0)


def file_stats(folder: PathLike) -> dict[str, tuple[int, int, int]]:
    """{path under `folder`: (size, mtime ns, ctime ns)} of every file below it, hidden files
    and folders (a leading '.') skipped. A bucket is listed in one recursive listing (object
    stores return sizes and times with the names), not one request per file; its ctime is 0."""
    out = {}
    if not is_uri(folder):
        for dirpath, dirnames, files in os.walk(folder):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for f in sorted(x for x in files if not x.startswith(".")):
                path = os.path.join(dirpath, f)
                st = os.stat(path)
                out[os.path.relpath(path, folder)] = (st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        return out
    import fsspec
    fs, root = fsspec.core.url_to_fs(os.fspath(resolve(folder)))
    root = root.rstrip("/")
    for name, info in sorted(fs.find(root, detail=True).items()):
        rel = name[len(root):].lstrip("/") if name.startswith(root) else name
        if info.get("type", "file") != "file" or any(p.startswith(".") for p in rel.split("/")):
            continue
        out[rel] = (int(info.get("size") or 0), _stamp_ns(info), 0)
    return out
