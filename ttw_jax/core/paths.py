"""Paths the library reads and writes: local files, `file://` URIs, or any `etils.epath` scheme
(`gs://`, `s3://`, ...), so a workdir or data folder may live on a bucket.

`resolve(p)` is the one entry point: `file:///abs` becomes the local `/abs`, a relative local path
becomes absolute (a run's files do not move when the process changes directory) and a URI is kept.
Writes of small files (`write_text`) are atomic: locally a temporary file renamed over the target,
on an object store a single object upload (which readers see whole or not at all).
"""
from __future__ import annotations

import os

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
