r"""Checks a release before a run and names every bad file at once (exit status 1 if any).

  python -m experiments.validate --dataset=touchdown --data_dir=/path/to/touchdown/data \
      --graph_dir=/path/to/touchdown/graph

`touchdown`: the record files, the graph and every SDR feature map `features/<panoid>.npy`
(bodies read to the end; `--headers_only` checks headers and sizes), see
`ttw_jax/touchdown/validate.py`.
"""
import sys

from absl import app, flags

from ttw_jax.touchdown import validate as touchdown_validate

DATASETS = ("touchdown",)


def report(dataset: str, data_dir: str, graph_dir: str = "", headers_only: bool = False
           ) -> tuple[str, int]:
    """(the printed report, the number of problems)."""
    if dataset != "touchdown":
        raise app.UsageError(f"--dataset must be one of {DATASETS}, got {dataset!r}")
    problems, checked = touchdown_validate.validate_release(data_dir, graph_dir or None,
                                                            bodies=not headers_only)
    lines = [f"{dataset}: {checked} files checked, {len(problems)} with problems"]
    lines += [f"  {p}" for p in problems]
    return "\n".join(lines), len(problems)


def _define_flags():
    """The command's flags (defined when it runs, so importing this module defines none)."""
    flags.DEFINE_enum("dataset", "touchdown", DATASETS, "Which release.")
    flags.DEFINE_string("data_dir", None, "The release's data folder (records, features/).")
    flags.DEFINE_string("graph_dir", "", "The graph folder (nodes.txt, links.txt), if any.")
    flags.DEFINE_bool("headers_only", False, "Feature maps: headers and sizes, not bodies.")
    flags.mark_flags_as_required(["data_dir"])


def main(argv):
    del argv
    F = flags.FLAGS
    text, bad = report(F.dataset, F.data_dir, F.graph_dir, F.headers_only)
    print(text)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    _define_flags()
    app.run(main)
