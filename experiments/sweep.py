r"""Any experiment over several seeds, one table of mean +- std.

  python -m experiments.sweep --experiment=touchdown_nav --seeds=3 --workdir=/tmp/sweep_ga
  python -m experiments.sweep --experiment=touchdown_sdr --seeds=0,1,2 --workdir=/tmp/sweep_concat \
      --config.model.name=concat

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
import json
import sys
from typing import Callable, Sequence

import ml_collections
import numpy as np

from ttw_jax.core import paths
from ttw_jax.core.train import provenance

NOT_METRICS = ("config", "schema_version", "provenance")


def seed_list(text: str) -> list[int]:
    """`--seeds`: "3" -> [0, 1, 2]; "0,4,7" -> [0, 4, 7]."""
    parts = [p for p in text.split(",") if p.strip()]
    if len(parts) == 1:
        n = int(parts[0])
        if n < 1:
            raise ValueError(f"--seeds={text}: a count of at least 1, or a list of seeds")
        return list(range(n))
    return [int(p) for p in parts]


def numbers(tree, prefix: str = "") -> dict[str, float]:
    """{"a/b/c": value} of every number in a results dict (booleans and `NOT_METRICS` skipped)."""
    out = {}
    for k, v in tree.items():
        if k in NOT_METRICS:
            continue
        key = f"{prefix}/{k}" if prefix else str(k)
        if isinstance(v, dict):
            out.update(numbers(v, key))
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and v is not None:
            out[key] = float(v)
    return out


def summarize(results: Sequence[dict]) -> dict[str, tuple[float, float]]:
    """{path: (mean, std over the runs)} of the numbers every run reports."""
    flat = [numbers(r) for r in results]
    common = [k for k in flat[0] if all(k in f for f in flat)]
    return {k: (float(np.mean([f[k] for f in flat])), float(np.std([f[k] for f in flat])))
            for k in common}


def to_markdown(summary: dict[str, tuple[float, float]], title: str) -> str:
    """Rows: each path without its last part (`test/ga`); columns: the last parts (`tc`)."""
    rows: dict[str, dict[str, tuple[float, float]]] = {}
    for path, ms in summary.items():
        row, _, col = path.rpartition("/")
        rows.setdefault(row or "(run)", {})[col] = ms
    cols = []
    for r in rows.values():
        cols += [c for c in r if c not in cols]
    lines = [title, "", "| result | " + " | ".join(cols) + " |", "|" + " --- |" * (len(cols) + 1)]
    for name, r in rows.items():
        cells = [f"{r[c][0]:.4g} +- {r[c][1]:.2g}" if c in r else "" for c in cols]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def train_or_read(train_and_evaluate: Callable[..., dict], config: ml_collections.ConfigDict,
                  rdir) -> dict:
    """The results of `config`'s run in `rdir`: read back if it finished (a finished run of
    another config there is refused), else trained (resuming from its checkpoints). A file of
    an earlier schema is read under the renamed keys (`provenance.read_results`), and a metric
    it selected by an old name (`eval.metric=acc@80`) counts as the new one."""
    done = rdir / "results.json"
    if not done.exists():
        return train_and_evaluate(config, rdir)
    res = provenance.read_results(done)
    # Compared as JSON holds it: a tuple of the config (e.g. ArraMon's data.partition) is a
    # list in results.json.
    if _renamed_metrics(res["config"]) != json.loads(json.dumps(config.to_dict())):
        raise ValueError(f"{rdir} holds a finished run of another config; choose a new "
                         "--workdir")
    return res


def _renamed_metrics(tree):
    """`tree` (a config dict) with each `...metric` set to a renamed result key set to the new
    one."""
    if not isinstance(tree, dict):
        return tree
    return {k: (provenance.RENAMED_RESULT_KEYS.get(v, v) if k == "metric" and isinstance(v, str)
                else _renamed_metrics(v)) for k, v in tree.items()}


def run_seeds(train_and_evaluate: Callable[..., dict], config: ml_collections.ConfigDict,
              workdir: paths.PathLike, seeds: Sequence[int], name: str) -> dict:
    """Trains (or reads back) one run per seed and writes the table; returns the summary."""
    import jax
    from ttw_jax.core.train.workdir import write_json
    workdir = paths.resolve(workdir)
    results = []
    for seed in seeds:
        c = ml_collections.ConfigDict(config.to_dict())
        c.seed = seed
        results.append(train_or_read(train_and_evaluate, c, workdir / f"s{seed}"))
    summary = summarize(results)
    prov = sweep_provenance(results)
    if jax.process_index() == 0:
        write_json(workdir / "sweep.json", {"schema_version": provenance.SCHEMA_VERSION,
                                            "experiment": name, "seeds": list(seeds),
                                            "summary": summary, "provenance": prov}, indent=2)
        table = to_markdown(summary, f"{name}, mean +- std over seeds {list(seeds)}")
        if prov:
            table = provenance.title(prov) + "\n\n" + table
        paths.write_text(workdir / "sweep.md", table + "\n")
        print(table)
    return summary


def sweep_provenance(results: Sequence[dict]) -> dict | None:
    """The first run's provenance with `seeds` the number of runs (None when a run was written
    before results carried one)."""
    provs = [r.get("provenance") for r in results]
    if not provs or any(p is None for p in provs):
        return None
    return dict(provs[0], seeds=len(results) * provs[0]["seeds"])


def experiment_name(argv: Sequence[str]) -> str:
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
    launch(lambda config, workdir: run_seeds(train.train_and_evaluate, config, workdir,
                                             seed_list(flags.FLAGS.seeds), name), default)
