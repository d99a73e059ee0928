r"""What the prepared-dataset check costs on a large release: the content fingerprint
(`ttw_jax.core.tfds.source_fingerprint`: size, times and SHA-256 per file, hashes reused while
size and times are unchanged) of a folder of many small files, on the local disk and on an object
store (fsspec's in-memory store served as `gs://`, the way `etils.epath` reaches a bucket: every
file's metadata comes from one recursive listing, as on Cloud Storage, where a listing page holds
1,000 objects; network latency is not simulated).

  python -m experiments.benchmarks.fingerprint_bench [--files=100000] [--size=1024]

Prints, per store: the first fingerprint (every file hashed), the check of an unchanged release
(listing only) and the number of metadata / open requests the check made.
"""
from __future__ import annotations

import os
import tempfile
import time
from unittest import mock

import fsspec
from absl import app, flags

from ttw_jax.core.tfds import source_fingerprint


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def bench(root: str, make, fs=None) -> dict:
    """{first_s, check_s, files, requests} for the folder `root` after `make()` wrote it."""
    make()
    first, t_first = _timed(lambda: source_fingerprint(root))
    calls = {"info": 0, "open": 0, "find": 0}
    patches = []
    if fs is not None:
        for name, key in (("info", "info"), ("_open", "open"), ("find", "find")):
            original = getattr(type(fs), name)

            def wrapper(self, *a, _o=original, _k=key, **k):
                calls[_k] += 1
                return _o(self, *a, **k)
            patches.append(mock.patch.object(type(fs), name, wrapper))
    for p in patches:
        p.start()
    try:
        again, t_check = _timed(lambda: source_fingerprint(root, previous=first))
    finally:
        for p in patches:
            p.stop()
    assert again == first
    return {"files": len(first), "first_s": t_first, "check_s": t_check,
            "requests": calls if fs is not None else None}


def _memory_bucket():
    """fsspec's memory store registered as `gs` (this process only); returns the filesystem."""
    from etils.epath import backend
    from fsspec.implementations.memory import MemoryFileSystem

    class MemoryGS(MemoryFileSystem):
        protocol = ("gs", "gcs")

        @classmethod
        def _strip_protocol(cls, path):
            path = fsspec.utils.stringify_path(path)
            for prefix in ("gs://", "gcs://"):
                path = path.removeprefix(prefix)
            return "/" + path.strip("/")
    fsspec.register_implementation("gs", MemoryGS, clobber=True)
    fsspec.register_implementation("gcs", MemoryGS, clobber=True)
    backend.fsspec_backend._get_filesystem.cache_clear()
    return fsspec.filesystem("gs")


def main(argv):
    del argv
    n, size = flags.FLAGS.files, flags.FLAGS.size
    blob = os.urandom(size)
    with tempfile.TemporaryDirectory() as tmp:
        def make_local():
            for i in range(n):
                d = os.path.join(tmp, f"d{i % 100:02d}")
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, f"{i}.npy"), "wb") as f:
                    f.write(blob)
        local = bench(tmp, make_local)
    mem = _memory_bucket()

    def make_memory():
        for i in range(n):
            mem.pipe_file(f"bench/d{i % 100:02d}/{i}.npy", blob)
    remote = bench("gs://bench", make_memory, mem)
    print(f"{n} files of {size} bytes")
    print("| store | first fingerprint (s) | check, unchanged (s) | requests of the check |")
    print("| --- | --- | --- | --- |")
    print(f"| local disk | {local['first_s']:.1f} | {local['check_s']:.2f} | one stat per file |")
    r = remote["requests"]
    print(f"| object store (in memory, as gs://) | {remote['first_s']:.1f} | {remote['check_s']:.2f} | "
          f"{r['find']} listing, {r['info']} metadata, {r['open']} opens |")


if __name__ == "__main__":
    flags.DEFINE_integer("files", 100_000, "Files in the release.")
    flags.DEFINE_integer("size", 1024, "Bytes per file.")
    app.run(main)
