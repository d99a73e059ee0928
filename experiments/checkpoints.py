r"""Verifies every checkpoint of a run offline, without its model (exit status 1 if any is bad).

  python -m experiments.checkpoints --workdir=/tmp/ttw_emergent

Checks each `checkpoints` folder under the workdir: the run's own `<workdir>/checkpoints`, a
stage's `<workdir>/<stage>/checkpoints`, a sweep's `<workdir>/s<seed>/...` (the workdir may be a
bucket, `gs://...`, or a folder of steps itself). Each step's arrays are restored as saved
(no template) and their SHA-256 recomputed (`ttw_jax.core.train.checkpoint`); one line per step,
`ok`, `no checksum`, `mismatch` or `does not decode`, then a summary. A step without a checksum is
bad in a run that writes checksums and only unverified in a legacy one, as a resume treats it;
steps set aside by an earlier resume (`<step>.corrupt-<status>`) are listed. Nothing is written.
"""
from __future__ import annotations

import sys

from absl import app, flags, logging
from etils import epath

from ttw_jax.core import paths
from ttw_jax.core.train.checkpoint import ASIDE, NO_CHECKSUM, Checkpointer

FOLDER = "checkpoints"


def checkpoint_dirs(workdir: paths.PathLike, depth: int = 4) -> list[epath.Path]:
    """The `checkpoints` folders at or under `workdir`, up to `depth` levels down (hidden folders
    and the checkpoints' own contents skipped), sorted; `workdir` itself when it holds steps."""
    root = paths.resolve(workdir)
    if not root.is_dir():
        return []
    if root.name == FOLDER or any(c.name.isdigit() for c in root.iterdir()):
        return [root]   # a checkpoints folder itself (numbered steps)
    found, level = [], [root]
    for _ in range(depth):
        below = []
        for folder in level:
            for child in folder.iterdir():
                if not child.is_dir() or child.name.startswith("."):
                    continue
                (found if child.name == FOLDER else below).append(child)
        level = below
    return sorted(found, key=str)


def report(workdir: paths.PathLike) -> tuple[str, int]:
    """(the printed report, the number of bad steps); a workdir without checkpoints counts 1."""
    dirs = checkpoint_dirs(workdir)
    if not dirs:
        return f"no {FOLDER} folder at or under {workdir}", 1
    lines, counts = [], {"steps": 0, "bad": 0, "unverified": 0}
    for d in dirs:
        ckpt = Checkpointer(d, read_only=True)
        try:
            checks = ckpt.verify()
        finally:
            ckpt.close()
        lines.append(f"{d}: {len(checks)} steps")
        for c in checks:
            lines.append(f"  step {c.step}: {c.status}" + (f" ({c.detail})" if c.detail else ""))
            counts["steps"] += 1
            counts["bad"] += c.refused
            counts["unverified"] += c.status == NO_CHECKSUM and not c.refused
        lines += [f"  kept aside: {p.name}" for p in sorted(d.iterdir(), key=str)
                  if ASIDE in p.name]
    lines.append(f"{counts['steps']} steps in {len(dirs)} {FOLDER} folders: {counts['bad']} bad, "
                 f"{counts['unverified']} unverified (no checksum, legacy), "
                 f"{counts['steps'] - counts['bad'] - counts['unverified']} ok")
    return "\n".join(lines), counts["bad"]


def _define_flags():
    """The command's flags (defined when it runs, so importing this module defines none)."""
    flags.DEFINE_string("workdir", None, "A run's workdir (its checkpoints are in "
                        "<workdir>/checkpoints, <workdir>/<stage>/checkpoints, ...), a sweep's "
                        "or a checkpoints folder; local, file:// or gs://.")
    flags.mark_flags_as_required(["workdir"])


def main(argv):
    del argv
    # orbax's own notes (read-only options, each restore) are not the report; our warnings are
    logging.set_verbosity(logging.WARNING)
    logging.get_absl_handler().addFilter(lambda record: "orbax" not in record.pathname)
    text, bad = report(flags.FLAGS.workdir)
    print(text)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    _define_flags()
    app.run(main)
