r"""Prints the dataset statistics of ArraMon split files (the paper's Table 1 and section 4):
instances, instructions per phase, words and vocabulary, instruction / path / action-sequence
lengths and actions per turn, beside the paper's Table 1. Any official file, English or Hindi.

  python -m experiments.arramon.stats --file=../shared/data/arramon/val_seen.json
"""
import json
import os

from absl import app, flags

from ttw_jax.arramon import records as ar
from ttw_jax.arramon.stats import PAPER_INSTANCES, format_statistics, split_statistics


def report(files) -> tuple[str, dict]:
    """(the printed tables, {file: statistics}) of the split files."""
    text, everything = [], {}
    for path in files:
        stats = split_statistics(ar.read_arramon(path))
        name = os.path.splitext(os.path.basename(path))[0]
        everything[path] = stats
        text.append(format_statistics(stats, name))
        if name in PAPER_INSTANCES:
            text.append(f"(the paper's {name}: {PAPER_INSTANCES[name]:,} instances)")
        text.append("")
    return "\n".join(text), everything


def _define_flags():
    """The command's flags (defined when it runs, so importing this module defines none)."""
    flags.DEFINE_multi_string("file", None, "An ArraMon split file (repeat for several).")
    flags.DEFINE_string("json_out", "", "Also write the statistics of every file to this JSON file.")


def main(argv):
    del argv
    text, everything = report(flags.FLAGS.file)
    print(text)
    if flags.FLAGS.json_out:
        with open(flags.FLAGS.json_out, "w") as f:
            json.dump(everything, f, indent=1)


if __name__ == "__main__":
    _define_flags()
    flags.mark_flags_as_required(["file"])
    app.run(main)
