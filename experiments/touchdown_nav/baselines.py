r"""Stop / Frequent / Random baselines on Touchdown records, horizon 50 (Chen et al. 2019, Table 3),
plus the gold actions replayed through the simulator as a check of the rules.

  python -m experiments.touchdown_nav.baselines --manual_dir=../shared/data/touchdown \
      --graph_dir=../shared/data/touchdown/graph --split=dev_sample --seeds=5
"""
import json
import tempfile

import jax
import numpy as np
from absl import app, flags

from ttw_jax.core.vocab import Vocabulary
from ttw_jax.touchdown import env as td, episodes as nav_episodes, evaluation as nav_eval
from ttw_jax.touchdown.dataset import load_touchdown_split_records
from ttw_jax.touchdown.reference import TouchdownReference

FLAGS = flags.FLAGS
flags.DEFINE_string("config", "navigation", "touchdown TFDS config.")
flags.DEFINE_string("manual_dir", "../shared/data/touchdown", "Directory with the record files.")
flags.DEFINE_string("graph_dir", "../shared/data/touchdown/graph", "nodes.txt / links.txt dir.")
flags.DEFINE_string("tfds_dir", None, "TFDS data dir (default: a temporary directory).")
flags.DEFINE_string("split", "dev_sample", "Split to evaluate.")
flags.DEFINE_integer("horizon", td.TEST_HORIZON, "Maximum number of actions.")
flags.DEFINE_integer("seeds", 5, "Random baseline: number of seeds (mean and std reported).")
flags.DEFINE_string("output", None, "Optional JSON file for the results.")


def gold_factory(consts, batch):
    return td.replay_policy, batch["gold"]


def run_baselines(config, split, manual_dir, graph_dir, tfds_dir, horizon, seeds) -> dict:
    graph, nodes, links, records = load_touchdown_split_records(
        config, [split], tfds_dir=tfds_dir, manual_dir=manual_dir, graph_dir=graph_dir)
    vocab = Vocabulary.build([])
    eps = nav_episodes.episodes(records[split], nodes, TouchdownReference(links), vocab, 8, 128,
                                 128)
    hops = nav_episodes.hops_to_goal(graph, eps["goal"])
    sim = td.compile_sim(graph)
    out = {"episodes": len(eps["goal"]), "horizon": horizon}
    gold_run = nav_eval.make_rollout(gold_factory, 128)
    gold = nav_eval.evaluate(gold_run, sim, None, eps, hops, jax.random.key(0))
    out["gold"] = {k: gold[k] for k in ("tc", "spd", "sed")}
    out["gold"]["tc_count"] = int(gold["episodes"]["tc"].sum())
    for name in ("stop", "frequent", "random"):
        run = nav_eval.make_rollout(nav_eval.baseline_factory(name), horizon)
        res = [nav_eval.evaluate(run, sim, None, eps, hops, jax.random.key(s))
               for s in range(seeds if name == "random" else 1)]
        out[name] = {k: float(np.mean([r[k] for r in res])) for k in ("tc", "spd", "sed")}
        if name == "random":
            out[name].update({f"{k}_std": float(np.std([r[k] for r in res]))
                              for k in ("tc", "spd", "sed")})
    return out


def main(argv):
    del argv
    with tempfile.TemporaryDirectory() as tmp:
        out = run_baselines(FLAGS.config, FLAGS.split, FLAGS.manual_dir, FLAGS.graph_dir,
                            FLAGS.tfds_dir or tmp, FLAGS.horizon, FLAGS.seeds)
    print(f"{out['episodes']} episodes of touchdown/{FLAGS.config}:{FLAGS.split}, "
          f"horizon {out['horizon']}")
    print(f"{'policy':10s} {'TC':>7s} {'SPD':>7s} {'SED':>7s}")
    for name in ("gold", "stop", "frequent", "random"):
        m = out[name]
        print(f"{name:10s} {m['tc']:7.4f} {m['spd']:7.2f} {m['sed']:7.4f}"
              + (f"   (std over {FLAGS.seeds} seeds: {m['tc_std']:.4f} {m['spd_std']:.2f} "
                 f"{m['sed_std']:.4f})" if name == "random" else ""))
    if FLAGS.output:
        with open(FLAGS.output, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    app.run(main)
