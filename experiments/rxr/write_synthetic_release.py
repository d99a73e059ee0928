r"""Writes a synthetic RxR release that the paper configs (`configs/paper*.py`) run on, no download:

  python -m experiments.rxr.write_synthetic_release --out=/tmp/rxr_synthetic \
      --connectivity_dir=../shared/data/matterport/connectivity

`<out>/rxr/` is a release in the official layout (`ttw_jax.rxr.release.write_release`: guide and
follower files, pose traces, text features of `--text_dim` (768, multilingual BERT's width) with
the train split's cross-translations) of the synthetic instructions (`ttw_jax.rxr.synthetic`:
paths on the real Matterport graphs of the synthetic config's scans, each naming the landmarks
along it, in en-US or hi-IN); `<out>/img_features.tsv` holds the view features of every
viewpoint of those scans as a Matterport3DSimulator TSV (`ttw_jax.rxr.view_features`), each view
showing the landmark of the neighbour that lies in it (`ttw_jax.rxr.views.synthetic_view_features`),
so the agent can learn to follow the instructions. The command prints the paper config's command
on them, e.g.

  python -m experiments.rxr.main --config=paper --workdir=/tmp/rxr_paper \
      --config.data.manual_dir=/tmp/rxr_synthetic/rxr \
      --config.data.features=/tmp/rxr_synthetic/img_features.tsv \
      --config.data.connectivity_dir=../shared/data/matterport/connectivity

It is a synthetic task in the release's files, for trying the pipeline (TFDS preparation,
streaming, masks, training, evaluation), not for numbers comparable with the paper's.
"""
from __future__ import annotations

import os
from typing import Sequence

from absl import app, flags

from ttw_datasets.rxr.rxr_dataset_builder import SYNTHETIC_TRAIN_SCANS, SYNTHETIC_UNSEEN_SCANS
from ttw_jax.rxr import view_features, views
from ttw_jax.rxr.graph import load_matterport_graph
from ttw_jax.rxr.release import write_release
from ttw_jax.rxr.synthetic import node_landmarks, synthetic_split_records

DEFAULT_SIZES = "train=200,val_seen=40,val_unseen=40"
NUM_LANDMARKS = 16   # the landmark kinds of `ttw_jax.rxr.synthetic`
FEATURE_NOISE = 0.3  # as the synthetic config's (`data.feature_noise`)


def parse_sizes(text: str) -> list[tuple[str, int, int]]:
    """"train=200,val_seen=40" -> [(split, instructions, split seed)] (the seeds 0, 1, ...)."""
    out = []
    for i, part in enumerate(p for p in text.split(",") if p.strip()):
        name, sep, count = part.partition("=")
        if not sep or not name.strip() or not count.strip().isdigit():
            raise ValueError(f"--sizes: {part!r} is not <split>=<number of instructions>")
        out.append((name.strip(), int(count), i))
    if not out:
        raise ValueError("--sizes names no split")
    return out


def write(out: str, connectivity_dir: str, sizes: Sequence[tuple[str, int, int]],
          seed: int = 0, train_scans: Sequence[str] = SYNTHETIC_TRAIN_SCANS,
          unseen_scans: Sequence[str] = SYNTHETIC_UNSEEN_SCANS, text_dim: int = 768,
          feature_dim: int = 64, pose_traces: bool = True,
          cross_translations: bool = True) -> dict:
    """Writes `<out>/rxr/` (the release) and `<out>/img_features.tsv` (module docstring); returns
    {"manual_dir", "features", "counts": {split: guide instructions}, "viewpoints"}."""
    records = synthetic_split_records(connectivity_dir, list(train_scans), list(unseen_scans),
                                      list(sizes), seed=seed)
    scans = list(train_scans) + list(unseen_scans)
    graph, nodes, _ = load_matterport_graph(connectivity_dir, scans)
    manual = os.path.join(out, "rxr")
    counts = write_release(manual, graph, nodes, records, dim=text_dim, seed=seed,
                           pose_traces=pose_traces, cross_translations=cross_translations)
    landmarks = node_landmarks([i.split("/", 1)[1] for i in nodes.ids], NUM_LANDMARKS)
    table = views.synthetic_view_features(graph, landmarks, NUM_LANDMARKS, feature_dim,
                                          FEATURE_NOISE, seed=seed)
    features = os.path.join(out, "img_features.tsv")
    view_features.write_tsv(features, nodes.ids, table)
    return {"manual_dir": manual, "features": features, "counts": counts,
            "viewpoints": len(nodes.ids)}


def _define_flags():
    """The command's flags (defined when it runs, so importing this module defines none)."""
    flags.DEFINE_string("out", None, "Output folder: <out>/rxr (the release) and "
                        "<out>/img_features.tsv.")
    flags.DEFINE_string("connectivity_dir", None, "The Matterport <scan>_connectivity.json "
                        "files (e.g. ../shared/data/matterport/connectivity).")
    flags.DEFINE_integer("seed", 0, "Paths, instructions, text and view features.")
    flags.DEFINE_string("sizes", DEFAULT_SIZES, "Instructions per split: <split>=<n>,... (a split "
                        "whose name holds 'unseen' uses --unseen_scans, the others --train_scans).")
    flags.DEFINE_list("train_scans", list(SYNTHETIC_TRAIN_SCANS), "Scans of the seen splits.")
    flags.DEFINE_list("unseen_scans", list(SYNTHETIC_UNSEEN_SCANS), "Scans of the unseen splits.")
    flags.DEFINE_integer("text_dim", 768, "Width of the text features (multilingual BERT: 768).")
    flags.DEFINE_integer("feature_dim", 64, "Width D of the view features [36, D].")
    flags.DEFINE_bool("pose_traces", True, "Pose traces and follower files (the guide_follower "
                      "configs need them); without, guide files and text features only, faster.")
    flags.DEFINE_bool("cross_translations", True, "The train split's text features in the two "
                      "other languages (configs/paper_xlate.py).")
    flags.mark_flags_as_required(["out", "connectivity_dir"])


def main(argv):
    del argv
    F = flags.FLAGS
    got = write(F.out, F.connectivity_dir, parse_sizes(F.sizes), F.seed, F.train_scans,
                F.unseen_scans, F.text_dim, F.feature_dim, F.pose_traces, F.cross_translations)
    print(f"wrote {got['manual_dir']} ({', '.join(f'{s}: {n}' for s, n in got['counts'].items())}"
          f" guide instructions) and {got['features']} ({got['viewpoints']} viewpoints)")
    print("try: python -m experiments.rxr.main --config=paper --workdir=/tmp/rxr_paper "
          f"--config.data.manual_dir={got['manual_dir']} "
          f"--config.data.features={got['features']} "
          f"--config.data.connectivity_dir={F.connectivity_dir}")


if __name__ == "__main__":
    _define_flags()
    app.run(main)
