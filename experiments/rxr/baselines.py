r"""The simple baselines of Ku et al. (2020), Table 4, on R2R / RxR: each moves N times then
stops, N = the mean number of steps of the train split's reference paths (rounded).

  python -m experiments.rxr.baselines --config=r2r --manual_dir=../shared/data/r2r \
      --connectivity_dir=../shared/data/matterport/connectivity --split=val_seen --seeds=5

Also replays the reference paths (the gold actions) as a check: NE 0, SR = nDTW = 1.
"""
import json
import tempfile

import jax
import numpy as np
from absl import app, flags

from experiments.rxr import train
from experiments.rxr.configs import default
from ttw_jax.rxr import evaluation as r2r_eval

FLAGS = flags.FLAGS
flags.DEFINE_string("config", "r2r", "rxr TFDS config (r2r, synthetic, guide, ...).")
flags.DEFINE_string("manual_dir", "../shared/data/r2r", "Directory with the instruction files "
                    "(synthetic: unused).")
flags.DEFINE_string("connectivity_dir", "../shared/data/matterport/connectivity",
                    "Matterport <scan>_connectivity.json directory.")
flags.DEFINE_string("tfds_dir", None, "TFDS data dir (default: a temporary directory).")
flags.DEFINE_string("split", "val_seen", "Split to evaluate.")
flags.DEFINE_integer("horizon", 15, "Maximum number of actions.")
flags.DEFINE_integer("seeds", 5, "Seeds per baseline (mean and std reported).")
flags.DEFINE_string("output", None, "Optional JSON file for the results.")


def gold_factory(graph, consts, batch):
    def policy(carry, state, t, key):
        return carry, batch["gold"][:, jax.numpy.minimum(t, batch["gold"].shape[1] - 1)], None
    return policy, None


def run_baselines(tfds_config: str, split: str, manual_dir: str, connectivity_dir: str,
                  tfds_dir: str, horizon: int, seeds: int, workdir: str) -> dict:
    c = default.get_config()
    c.data.tfds_config, c.data.tfds_dir = tfds_config, tfds_dir
    c.data.manual_dir, c.data.connectivity_dir = manual_dir, connectivity_dir
    c.data.dev_split, c.data.eval_splits, c.data.features = split, split, ""
    c.data.max_tokens, c.data.max_path = 8, 64
    data = train.load_data(c, workdir)
    graph, geodesic = jax.device_put(data["graph"]), jax.device_put(data["geodesic"])
    eps = data["episodes"][split]
    n = int(round(float(np.mean(data["episodes"][c.data.train_split]["path_len"] - 1))))
    out = {"episodes": len(eps["start"]), "horizon": horizon, "steps": n}
    gold = r2r_eval.evaluate(r2r_eval.make_rollout(gold_factory, eps["gold"].shape[1]), graph,
                             geodesic, None, eps, jax.random.key(0))
    out["gold"] = {k: gold[k] for k in r2r_eval.METRICS}
    for name in r2r_eval.BASELINES:
        run = r2r_eval.make_rollout(r2r_eval.baseline_factory(name, n), horizon)
        res = [r2r_eval.evaluate(run, graph, geodesic, None, eps, jax.random.key(s))
               for s in range(seeds)]
        out[name] = {k: float(np.mean([r[k] for r in res])) for k in r2r_eval.METRICS}
        out[name].update({f"{k}_std": float(np.std([r[k] for r in res]))
                          for k in r2r_eval.METRICS})
    return out


def main(argv):
    del argv
    with tempfile.TemporaryDirectory() as tmp:
        out = run_baselines(FLAGS.config, FLAGS.split, FLAGS.manual_dir, FLAGS.connectivity_dir,
                            FLAGS.tfds_dir or tmp, FLAGS.horizon, FLAGS.seeds, tmp)
    print(f"{out['episodes']} episodes of rxr/{FLAGS.config}:{FLAGS.split}; baselines move "
          f"{out['steps']} steps then stop (mean over {FLAGS.seeds} seeds, std in brackets)")
    print(f"{'policy':16s} " + " ".join(f"{k.upper():>14s}" for k in r2r_eval.METRICS))
    for name in ("gold", *r2r_eval.BASELINES):
        m = out[name]
        print(f"{name:16s} " + " ".join(
            f"{m[k]:6.3f} ({m[k + '_std']:.3f})" if k + "_std" in m else f"{m[k]:14.3f}"
            for k in r2r_eval.METRICS))
    if FLAGS.output:
        with open(FLAGS.output, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    app.run(main)
