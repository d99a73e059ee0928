"""Reading one JSON file with errors that name the file (and the line and column if malformed)."""
from __future__ import annotations

import json
import os


def read_json(path: str, error: type[Exception], hint: str = ""):
    """The decoded content of `path`. FileNotFoundError (`{path}: file not found. {hint}`) when
    it is missing; `error` (`{path}: line L, column C: invalid JSON (...)`) when malformed."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: file not found. {hint}".rstrip())
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{path}: line {e.lineno}, column {e.colno}: invalid JSON ({e.msg})") from None
