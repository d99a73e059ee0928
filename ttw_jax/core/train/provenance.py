"""What produced a result: the `provenance` block of every `results.json`, its schema, and its reader.

A results.json (schema `SCHEMA_VERSION`) is the trainer's results dict plus two keys:

    schema_version: int       SCHEMA_VERSION (files without it are version 1)
    provenance:
      data:        {"kind": "release", "folder": str, "fingerprint": str}
                   or {"kind": "synthetic", "seed": int}
      perception:  {"kind": "file", "file": str, "fingerprint": str, "width": int}
                   or {"kind": "synthetic", "seed": int, "width": int} or {"kind": "none"}
      protocol:    {"name": "official"} or {"name": <proxy>, "why": str}
      code:        {"revision": git commit, "modified": bool, "version": package version}
                   (no revision outside a git checkout)
      config_hash: sha256 (16 hex digits) of the config's JSON, keys sorted
      device:      {"platform": "cpu" | "gpu" | "tpu", "kind": device_kind, "count": int,
                    "processes": int}
      dtype:       the config's compute dtype ("float32" when it has none)
      seeds:       number of seeds the numbers average over (1: a single run)
      hidden_splits: [split, ...] evaluated without references (predictions only)
      token_limits: {config key: int}, the text lengths the run padded to (a key set to 0 is
                    sized from the data: the longest text of the splits it loaded); only in
                    runs that read text

`title(provenance)` is the line every printed table starts with; it says "synthetic data",
"synthetic perception" and the proxy protocol's name whenever they apply.

Fingerprints are sampled, so that a multi-gigabyte release costs milliseconds: SHA-256 over every
file's relative name and size (sorted by name) and the first and last `SAMPLE_BYTES` of at most
`SAMPLED_FILES` of them, evenly spaced (all of them in a folder of fewer files). Two folders with
the same fingerprint hold the same files of the same sizes, with the same sampled contents.

Renamed result keys (`RENAMED_RESULT_KEYS`) stay readable for one schema version: `read_results`
upgrades an older file (warning once per key) and returns a `Results` mapping on which the old
name still reads the new key's value (with a warning).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import warnings
from typing import Any, Mapping

import ml_collections

import ttw_jax
from ttw_jax.core import paths

SCHEMA_VERSION = 2
SAMPLE_BYTES = 1 << 16
SAMPLED_FILES = 256   # files whose heads and tails a folder's fingerprint reads, evenly spaced
# old result key -> new key (schema 1 -> 2: TensorBoard-safe metric names, commit 13c5bd8)
RENAMED_RESULT_KEYS = {f"{m}@{r}": f"{m}_{r}" for m in ("acc", "consistency")
                       for r in (40, 80, 120)}
OFFICIAL = "official"
NONE = {"kind": "none"}


def fingerprint(path: paths.PathLike) -> str:
    """Sampled content fingerprint (16 hex digits) of a file or of every file under a folder
    (module docstring)."""
    root = paths.resolve(path)
    if root.is_dir():
        entries = sorted((rel, st[0]) for rel, st in paths.file_stats(path).items())
        files = [(rel, size, root / rel) for rel, size in entries]
    else:
        files = [(root.name, root.stat().length, root)]
    h = hashlib.sha256()
    every = max(1, -(-len(files) // SAMPLED_FILES))
    for i, (rel, size, p) in enumerate(files):
        h.update(f"{rel}\0{size}\0".encode())
        if i % every:
            continue
        with p.open("rb") as f:
            h.update(f.read(SAMPLE_BYTES))
            if size > 2 * SAMPLE_BYTES:
                f.seek(size - SAMPLE_BYTES)
                h.update(f.read(SAMPLE_BYTES))
    return h.hexdigest()[:16]


def release_data(folder: paths.PathLike, prepared: str = "") -> dict:
    """The `data` entry of a run on an official release in `folder`; with no folder (a run
    reading a TFDS copy prepared earlier), the prepared dataset's name and no fingerprint."""
    if not os.fspath(folder):
        return {"kind": "release", "folder": f"prepared TFDS data {prepared}".strip(),
                "fingerprint": None}
    return {"kind": "release", "folder": os.fspath(folder), "fingerprint": fingerprint(folder)}


def synthetic_data(seed: int) -> dict:
    return {"kind": "synthetic", "seed": int(seed)}


def perception_file(path: paths.PathLike, width: int) -> dict:
    """The `perception` entry of features read from `path` (a file or a folder of files)."""
    return {"kind": "file", "file": os.fspath(path), "fingerprint": fingerprint(path),
            "width": int(width)}


def synthetic_perception(seed: int, width: int) -> dict:
    return {"kind": "synthetic", "seed": int(seed), "width": int(width)}


def protocol(name: str = OFFICIAL, why: str = "") -> dict:
    """The evaluation protocol: "official", or a named proxy with the reason it is used."""
    if name != OFFICIAL and not why:
        raise ValueError(f"protocol {name!r} is a proxy: say why it is used")
    return {"name": name} if name == OFFICIAL else {"name": name, "why": why}


@functools.lru_cache(maxsize=None)
def _git(*args: str) -> str | None:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "-C", here, *args], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def code_revision() -> dict:
    """{"revision", "modified", "version"} of the installed ttw_jax (no revision outside git)."""
    out: dict[str, Any] = {"version": ttw_jax.__version__}
    rev = _git("rev-parse", "HEAD")
    if rev:
        status = _git("status", "--porcelain", "--untracked-files=no")
        out.update(revision=rev, modified=bool(status))
    return out


def config_hash(config: ml_collections.ConfigDict | Mapping) -> str:
    d = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def device(num_devices: int = 0) -> dict:
    """The devices a run trained on: the first `num_devices` (`config.num_devices`; 0 all)."""
    import jax    # here, so that the launcher imports this module before JAX is set up
    d = jax.devices()[0]
    return {"platform": d.platform, "kind": d.device_kind,
            "count": int(num_devices) or jax.device_count(), "processes": jax.process_count()}


def provenance(config, *, data: dict, perception: dict = NONE, protocol: dict | None = None,
               seeds: int = 1, hidden_splits=(),
               token_limits: Mapping[str, int | None] | None = None) -> dict:
    """The `provenance` block of a run of `config` (module docstring); `token_limits` ({config
    key: the limit used, None where the run used none}) only where one is given."""
    out = {"data": data, "perception": perception,
           "protocol": protocol or {"name": OFFICIAL}, "code": code_revision(),
           "config_hash": config_hash(config),
           "device": device(config.get("num_devices", 0) if hasattr(config, "get") else 0),
           "dtype": str(config.get("dtype", "float32") if hasattr(config, "get") else "float32"),
           "seeds": int(seeds), "hidden_splits": list(hidden_splits)}
    limits = {k: int(v) for k, v in (token_limits or {}).items() if v is not None}
    if limits:
        out["token_limits"] = limits
    return out


def tags(prov: Mapping) -> list[str]:
    """What makes the numbers incomparable with the paper's, in words (may be empty)."""
    out = []
    if prov["data"].get("kind") == "synthetic":
        out.append("synthetic data")
    if prov["perception"].get("kind") == "synthetic":
        out.append("synthetic perception")
    if prov["protocol"]["name"] != OFFICIAL:
        out.append(f"proxy protocol '{prov['protocol']['name']}', not the paper's")
    return out


def title(prov: Mapping) -> str:
    """The provenance line a printed table starts with."""
    data = prov["data"]
    what = (f"synthetic (seed {data['seed']})" if data["kind"] == "synthetic"
            else f"{data['folder']} [{data['fingerprint']}]")
    per = prov["perception"]
    seen = {"none": "none", "synthetic": f"synthetic (width {per.get('width')})",
            "file": f"{per.get('file')} [{per.get('fingerprint')}], width {per.get('width')}"}
    code = prov["code"]
    rev = (f"{code['revision'][:10]}{'+modified' if code.get('modified') else ''}"
           if "revision" in code else f"ttw_jax {code['version']}")
    dev = prov["device"]
    head = ", ".join(tags(prov)).upper()
    return ((f"[{head}] " if head else "")
            + f"data: {what}; perception: {seen.get(per['kind'], per['kind'])}; "
            f"protocol: {prov['protocol']['name']}; code: {rev}; config {prov['config_hash']}; "
            f"{dev['count']} {dev['kind']}; {prov['dtype']}; "
            + ("single run" if prov["seeds"] == 1 else f"{prov['seeds']} seeds"))


ALLOW_SYNTHETIC = "data.allow_synthetic_perception"


def check_perception(real_data: bool, synthetic: bool, allowed: bool, key: str) -> None:
    """Refuses a synthetic perception stand-in (`key`, e.g. "data.features=synthetic") with
    real text and graphs unless `data.allow_synthetic_perception` is set: its numbers are not
    the paper's, and only the flag makes every table say so."""
    if real_data and synthetic and not allowed:
        raise ValueError(
            f"{key} with an official release: synthetic stand-in perception (not the "
            f"release's features) makes numbers that no paper's table can stand beside. Name the "
            f"release's perception files, or set --config.{ALLOW_SYNTHETIC}=True to run anyway "
            "(every table and results.json then says 'synthetic perception')")


def check_hidden(hidden, uses: Mapping[str, Any]) -> None:
    """Refuses every use in `uses` ({what: split or splits}, e.g. {"data.dev_split (model
    selection)": "test"}) of a split in `hidden`, whose references the release withholds: such
    a split gets predictions for its leaderboard, never metrics."""
    bad = []
    for what, value in uses.items():
        names = [value] if isinstance(value, str) else list(value)
        for split in names:
            if split in hidden:
                bad.append(f"{what} uses {split!r}")
    if bad:
        raise ValueError("; ".join(bad) + f": the release withholds the references of "
                         f"{sorted(hidden)} (a leaderboard scores them), so no metric can be "
                         "computed there; evaluate it to write its predictions, and select on a "
                         "split with references")


def finalize(results: dict, prov: dict) -> dict:
    """`results` with `schema_version` first and `provenance` last."""
    body = {k: v for k, v in results.items() if k not in ("schema_version", "provenance")}
    return {"schema_version": SCHEMA_VERSION, **body, "provenance": prov}


class Results(dict):
    """A results dict on which a renamed key (`RENAMED_RESULT_KEYS`) reads its new key, with a
    DeprecationWarning, for one schema version."""

    def __getitem__(self, key):
        if key not in self and key in RENAMED_RESULT_KEYS and RENAMED_RESULT_KEYS[key] in self:
            warnings.warn(f"result key {key!r} is now {RENAMED_RESULT_KEYS[key]!r}; the old name "
                          f"is read until schema version {SCHEMA_VERSION + 1}",
                          DeprecationWarning, stacklevel=2)
            key = RENAMED_RESULT_KEYS[key]
        return super().__getitem__(key)

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default


def upgrade(obj, where: str = "results"):
    """`obj` (a parsed results.json) with renamed keys under their new names (a warning per key
    found) and every dict a `Results`."""
    if isinstance(obj, dict):
        out = Results()
        for k, v in obj.items():
            new = RENAMED_RESULT_KEYS.get(k, k)
            if new != k:
                warnings.warn(f"{where}: result key {k!r} is now {new!r} (schema version "
                              f"{SCHEMA_VERSION})", DeprecationWarning, stacklevel=2)
            out[new] = upgrade(v, where)
        return out
    if isinstance(obj, list):
        return [upgrade(v, where) for v in obj]
    return obj


def read_results(path: paths.PathLike) -> Results:
    """A results.json (any schema version up to `SCHEMA_VERSION`) as `Results`; ValueError for
    a newer schema or a file that is not a JSON object."""
    text = paths.resolve(path).read_text(encoding="utf-8")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: a results file holds a JSON object")
    version = obj.get("schema_version", 1)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version {version!r} is newer than this ttw_jax reads "
                         f"({SCHEMA_VERSION}); update ttw_jax")
    return upgrade(obj, os.fspath(path))
