r"""Any experiment over several seeds, one table of mean +- std.

  python -m experiments.sweep --experiment=touchdown_nav --seeds=3 --workdir=/tmp/sweep_ga
  python -m experiments.sweep --experiment=touchdown_sdr --seeds=0,1,2 --workdir=/tmp/sweep_concat \
      --config.model.name=concat
  python -m experiments.sweep --experiment=touchdown_nav --seeds=3 --parallel --workdir=/tmp/p_ga

`--parallel` trains the seeds in one program (the launcher's `--config.num_seeds=3` for three:
the seed on a leading array axis, `ttw_jax.core.train.seeds`), in the same `s<seed>/` layout and
table; the seeds must then be consecutive. On the seed axis: touchdown_nav, rxr, arramon (in the
simulator, both `train_update`s) and ttw_emergent; the other trainers, ArraMon on the recorded
features and every `baselines` mode run the seeds in turn (`seeds.sequential_seeds`, which says
so in the log).

`--experiment` names a folder of `experiments/` (its launcher's flags follow: `--config`,
`--config.<key>=...`); `--seeds` is a count N (seeds 0 .. N-1) or a list. Every run is the
experiment's ordinary `train.train_and_evaluate` with `config.seed` set, in `<workdir>/s<seed>`,
so a killed sweep resumes where it stopped and finished runs are read back from their
`results.json` (a finished run of another config there is refused; files written before a
result key was renamed, e.g. `acc@40` -> `acc_40`, are read under the new names by
`provenance.read_results`). The table (`<workdir>/sweep.md`, `sweep.json` with its
`schema_version`) has a row per result (`<split> / <agent>`, as the results.json nests them)
and a column per metric: the mean and the standard deviation over the seeds (ddof 0) of every
number the runs report (not `schema_version` nor the `provenance` block).
"""
from __future__ import annotations

import importlib
import sys

from ttw_jax.core.train.seeds import (num_seeds, numbers, run_seeds, summarize,  # noqa: F401
                                      sweep_provenance, to_markdown, train_or_read)


def seed_list(text: str) -> list[int]:
    """`--seeds`: "3" -> [0, 1, 2]; "0,4,7" -> [0, 4, 7]."""
    parts = [p for p in text.split(",") if p.strip()]
    if len(parts) == 1:
        n = int(parts[0])
        if n < 1:
            raise ValueError(f"--seeds={text}: a count of at least 1, or a list of seeds")
        return list(range(n))
    return [int(p) for p in parts]


def run_parallel(train_and_evaluate, config, workdir, seeds: list[int]) -> dict:
    """The seeds in one program: `config.seed` the first, `config.num_seeds` their number
    (consecutive seeds only); returns the summary."""
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        raise ValueError(f"--parallel trains consecutive seeds (seed .. seed + N - 1), got {seeds}")
    if "num_seeds" not in config:
        raise ValueError("--parallel: this experiment's config has no num_seeds key")
    config.seed, config.num_seeds = seeds[0], len(seeds)
    return train_and_evaluate(config, workdir)["summary"]


def experiment_name(argv) -> str:
    for a in argv:
        if a.startswith("--experiment="):
            return a.split("=", 1)[1]
    raise SystemExit("--experiment=<name> (a folder of experiments/) is required")


if __name__ == "__main__":
    from absl import flags

    from ttw_jax.core.train.launch import launch

    name = experiment_name(sys.argv)
    train = importlib.import_module(f"experiments.{name}.train")
    default = importlib.import_module(f"experiments.{name}.configs.default")
    flags.DEFINE_string("experiment", None, "A folder of experiments/: its trainer and configs.")
    flags.DEFINE_string("seeds", "3", "A count N (seeds 0 .. N-1) or a comma list of seeds.")
    flags.DEFINE_bool("parallel", False, "Train the seeds in one program (config.num_seeds).")

    def sweep(config, workdir):
        seeds = seed_list(flags.FLAGS.seeds)
        if num_seeds(config) != 1:
            raise ValueError("set the seeds with --seeds (and --parallel), not config.num_seeds")
        if flags.FLAGS.parallel:
            return run_parallel(train.train_and_evaluate, config, workdir, seeds)
        return run_seeds(train.train_and_evaluate, config, workdir, seeds, name)

    launch(sweep, default)
