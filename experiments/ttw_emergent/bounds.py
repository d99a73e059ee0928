r"""Exact Bayes upper bounds on Talk The Walk localization, every setting in one table.

  python -m experiments.ttw_emergent.bounds --maps_dir=../shared/data/ttw/maps --max_T=3 \
      --markdown=/tmp/ttw_bounds.md --json_out=/tmp/ttw_bounds.json

Rows: label (the corner predicted: where the walk ends, "final", or starts, "start"), tourist
(orientation-agnostic UP/RIGHT/DOWN/LEFT, or orientation-aware TURNLEFT/TURNRIGHT/FORWARD with the
released code's visibility rule), T, and whether the guide knows the actions; columns: train /
valid / test windows, in percent. Without --maps_dir the synthetic neighbourhoods are used. The
table starts with its provenance line (`ttw_jax.core.train.provenance.title`: the maps read).
"""
from __future__ import annotations

import itertools

import ml_collections
from absl import app, flags
from etils import epath

from experiments.ttw_emergent.train import maps_data
from ttw_jax.core.train import provenance
from ttw_jax.core.train.workdir import write_json
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.upper_bound import bayes_rate
from ttw_jax.talk_the_walk.walks import LABELS

flags.DEFINE_string("maps_dir", "", "Talk The Walk maps (official release data dir); empty: synthetic")
flags.DEFINE_integer("max_T", 3, "bounds for T = 0..max_T")
flags.DEFINE_string("labels", ",".join(LABELS), "comma-separated: final,start")
flags.DEFINE_string("tourists", "agnostic,aware", "comma-separated: agnostic,aware")
flags.DEFINE_string("markdown", "", "also write the markdown table to this file")
flags.DEFINE_string("json_out", "", "also write the rows (fractions) and the provenance as JSON "
                    "(schema_version and provenance as in results.json)")
FLAGS = flags.FLAGS


def bounds_table(windows: dict[str, maps.Windows], max_T: int, labels, tourists) -> list[dict]:
    """One dict per (label, tourist, T, actions) with the bound per split (fractions)."""
    rows = []
    for label, tourist, T, cond in itertools.product(labels, tourists, range(max_T + 1),
                                                     (True, False)):
        if T == 0 and not cond:   # no actions to condition on: the same number
            continue
        row = {"label": label, "tourist": tourist, "T": T, "actions": cond if T else "-"}
        for split, w in windows.items():
            correct, total = bayes_rate(w.landmarks, T, condition_on_actions=cond, label=label,
                                        orientation_aware=tourist == "aware")
            row[split] = correct / total
        rows.append(row)
    return rows


def to_markdown(rows: list[dict]) -> str:
    lines = ["| label | tourist | T | actions | train | valid | test |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['label']} | {r['tourist']} | {r['T']} | {r['actions']} | "
                     + " | ".join(f"{100 * r[s]:.2f}" for s in maps.SPLITS) + " |")
    return "\n".join(lines)


def main(argv):
    del argv
    windows = maps.load_windows(FLAGS.maps_dir or None)
    tourists = [t for t in FLAGS.tourists.split(",") if t]
    if set(tourists) - {"agnostic", "aware"}:
        raise app.UsageError(f"--tourists takes agnostic,aware; got {FLAGS.tourists!r}")
    settings = ml_collections.ConfigDict({k: FLAGS[k].value for k in
                                          ("maps_dir", "max_T", "labels", "tourists")})
    prov = provenance.provenance(settings, data=maps_data(FLAGS.maps_dir, 0),
                                 hidden_splits=maps.HIDDEN_SPLITS)
    rows = bounds_table(windows, FLAGS.max_T, FLAGS.labels.split(","), tourists)
    table = provenance.title(prov) + "\n\n" + to_markdown(rows)
    print(table)
    if FLAGS.json_out:
        write_json(FLAGS.json_out, provenance.finalize({"rows": rows}, prov), indent=1)
    if FLAGS.markdown:
        out = epath.Path(FLAGS.markdown)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(table + "\n")


if __name__ == "__main__":
    app.run(main)
