r"""The random walk on an ArraMon split, several seeds, beside the paper's row.

  python -m experiments.arramon.baselines --manual_dir=../shared/data/arramon --split=val_seen

Uniform over (forward, left, right, pick-up/place) in both phases, the paper's step limit (150)
per phase, the cascaded two-turn task. CTC-k is reported twice: with the fallback rule (a phase
that ends without a pick-up scores 0) and by final distance alone, which is how the paper's
row comes out (README, "ArraMon").
"""
from __future__ import annotations

import jax
import numpy as np
from absl import app, flags

from ttw_jax.arramon import dataset as arramon_data, env, episodes as ae, evaluation as arr_eval
from ttw_jax.core.vocab import Vocabulary

FLAGS = flags.FLAGS
flags.DEFINE_string("tfds_config", "english", "arramon TFDS config")
flags.DEFINE_string("manual_dir", "../shared/data/arramon", "directory with the .json files")
flags.DEFINE_string("tfds_dir", None, "TFDS data directory")
flags.DEFINE_string("split", "val_seen", "split to evaluate")
flags.DEFINE_integer("seeds", 5, "random-walk seeds")
flags.DEFINE_integer("horizon", env.STEP_LIMIT, "steps per phase")
PAPER = {"navi_ndtw": 0.045, "ctc3": 0.030, "ctc5": 0.054, "ctc7": 0.092}   # Kim et al. 2020


def random_walk(records, seeds: int, horizon: int) -> dict[str, dict[str, list[float]]]:
    """{"strict" | "distance": {metric: [value per seed]}} of the random walk on `records`."""
    vocab = Vocabulary.build(s for r in records for s in r["instructions"]["navi_inst_gt"])
    walkable, index = ae.walkable_for(records)
    episodes = ae.episodes(records, vocab, map_index=index)
    out = {}
    for name, strict in (("strict", True), ("distance", False)):
        run = arr_eval.make_task_rollout(arr_eval.random_runners(), horizon, strict=strict)
        res = [arr_eval.evaluate(run, walkable, None, episodes, jax.random.key(seed), 512)
               for seed in range(seeds)]
        out[name] = {m: [r[m] for r in res] for m in arr_eval.METRICS + ("navi_steps",)}
    return out


def main(argv):
    del argv
    records = arramon_data.load_split_records(FLAGS.tfds_config, [FLAGS.split], FLAGS.tfds_dir,
                                              FLAGS.manual_dir)[FLAGS.split]
    res = random_walk(records, FLAGS.seeds, FLAGS.horizon)
    print(f"Random walk on {FLAGS.split} ({len(records)} instances, {FLAGS.seeds} seeds, "
          f"{FLAGS.horizon} steps per phase; mean ± std over seeds, overall = mean of the turns)")
    print("| CTC rule | " + " | ".join(arr_eval.METRICS) + " |")
    print("|---" * (len(arr_eval.METRICS) + 1) + "|")
    for name, per in res.items():
        print(f"| {name} | " + " | ".join(f"{np.mean(per[m]):.3f} ± {np.std(per[m]):.3f}"
                                         for m in arr_eval.METRICS) + " |")
    print("| paper | " + " | ".join(f"{PAPER[m]:.3f}" if m in PAPER else "" for m in
                                     arr_eval.METRICS) + " |")


if __name__ == "__main__":
    app.run(main)
