r"""Checks a release before a run and names every bad file at once (exit status 1 if any).

  python -m experiments.validate --dataset=touchdown --data_dir=/path/to/touchdown/data \
      --graph_dir=/path/to/touchdown/graph
  python -m experiments.validate --dataset=rxr --data_dir=/path/to/rxr \
      --graph_dir=/path/to/connectivity [--view_features=/path/to/features.tsv] \
      [--house_dir=/path/to/matterport/v1/scans]
  python -m experiments.validate --dataset=arramon --data_dir=/path/to/arramon \
      [--features_dir=/path/to/arramon_features]
  python -m experiments.validate --dataset=talk_the_walk --data_dir=/path/to/talkthewalk \
      --maps_dir=/path/to/talkthewalk [--features_dir=/path/to/landmark_features]

Each reads what the builders and trainers read, bodies to the end (`--headers_only`: headers and
sizes of the feature files, not their values); any folder may be a bucket (`gs://...`):
`touchdown`: the record files, the graph and every SDR feature map `features/<panoid>.npy`
(`ttw_jax/touchdown/validate.py`); `rxr`: the R2R / RxR annotation files against the Matterport
connectivity graphs, every pose trace and text-feature file (those the records name, then the
others in their folders, so a bad annotation file hides none) and a view-feature file
(`ttw_jax/rxr/validate.py`), then, with the graphs, the follower files' stored `metrics`
recomputed (`ttw_jax/rxr/follower_metrics.py`: per split and metric, how many agree, and the
worst cases; distances between the `--house_dir` panorama centres where given; information, not
problems; `--nofollower_metrics` skips it); `arramon`: the split files, the vocabulary and every
recorded pose and feature file in their folders, so a bad split file hides none
(`ttw_jax/arramon/validate.py`), then, with `--features_dir`,
each split's recorded agent positions against the replayed demonstration (the tag alignment:
how many differ, the worst, and whether tags shifted by one step would fit better; information,
except a recording that looks shifted); `talk_the_walk`: the dialogues,
configurations, maps and landmark-classification features (`ttw_jax/talk_the_walk/validate.py`).
"""
import sys

from absl import app, flags

from ttw_jax.arramon import validate as arramon_validate
from ttw_jax.rxr import follower_metrics as follower_metrics_check, validate as rxr_validate
from ttw_jax.talk_the_walk import validate as ttw_validate
from ttw_jax.touchdown import validate as touchdown_validate

DATASETS = ("touchdown", "rxr", "arramon", "talk_the_walk")


def report(dataset: str, data_dir: str, graph_dir: str = "", headers_only: bool = False,
           features_dir: str = "", maps_dir: str = "", view_features: str = "",
           house_dir: str = "", follower_metrics: bool = True) -> tuple[str, int]:
    """(the printed report, the number of problems; the follower metrics' lines, for `rxr`
    with `graph_dir`, count none)."""
    notes = []
    bodies = not headers_only
    if dataset == "touchdown":
        problems, checked = touchdown_validate.validate_release(data_dir, graph_dir or None,
                                                                bodies=bodies)
    elif dataset == "rxr":
        problems, checked = rxr_validate.validate_release(data_dir, graph_dir or None, bodies,
                                                          view_features or None)
        followers = any(a == "follower" for _, _, a in rxr_validate.annotation_files(data_dir))
        if follower_metrics and graph_dir:
            notes = follower_metrics_check.check_follower_metrics(
                data_dir, graph_dir, house_dir or None).lines()
        elif follower_metrics and followers:
            notes = ["follower metrics: not recomputed (they need the connectivity graphs, "
                     "--graph_dir)"]
    elif dataset == "arramon":
        problems, checked = arramon_validate.validate_release(data_dir, features_dir or None,
                                                              bodies, notes)
    elif dataset == "talk_the_walk":
        problems, checked = ttw_validate.validate_release(data_dir, maps_dir or None,
                                                          features_dir or None)
    else:
        raise app.UsageError(f"--dataset must be one of {DATASETS}, got {dataset!r}")
    lines = [f"{dataset}: {checked} files checked, {len(problems)} with problems"]
    lines += [f"  {p}" for p in problems] + notes
    return "\n".join(lines), len(problems)


def _define_flags():
    """The command's flags (defined when it runs, so importing this module defines none)."""
    flags.DEFINE_enum("dataset", "touchdown", DATASETS, "Which release.")
    flags.DEFINE_string("data_dir", None, "The release's data folder (records, features/, ...).")
    flags.DEFINE_string("graph_dir", "", "touchdown: the graph folder (nodes.txt, links.txt); "
                        "rxr: the Matterport connectivity folder.")
    flags.DEFINE_string("features_dir", "", "arramon: the recorded pose / feature folders; "
                        "talk_the_walk: resnetfeat.json and <nbh>/text.json.")
    flags.DEFINE_string("maps_dir", "", "talk_the_walk: the maps (<nbh>/map.json or "
                        "<nbh>_map.json).")
    flags.DEFINE_string("view_features", "", "rxr: a view-feature file (.tsv, .hdf5, .npz).")
    flags.DEFINE_string("house_dir", "", "rxr: the Matterport3D house segmentations "
                        "(<scan>/house_segmentations/<scan>.house): the follower metrics' "
                        "distances between panorama centres, else between connectivity poses.")
    flags.DEFINE_bool("follower_metrics", True, "rxr, with --graph_dir: recompute the follower "
                      "files' stored metrics and report how many agree.")
    flags.DEFINE_bool("headers_only", False, "Feature files: headers and sizes, not bodies.")
    flags.mark_flags_as_required(["data_dir"])


def main(argv):
    del argv
    F = flags.FLAGS
    text, bad = report(F.dataset, F.data_dir, F.graph_dir, F.headers_only, F.features_dir,
                       F.maps_dir, F.view_features, F.house_dir, F.follower_metrics)
    print(text)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    _define_flags()
    app.run(main)
