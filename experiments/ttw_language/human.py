r"""Prints the human baselines of the Talk The Walk full task from the release's dialogues: per
split and over all splits, the dialogue status counts, the success rate #success / (#success +
#failed) by recorded status and by replaying the acts, how often the two agree, and the mean
#steps, beside the paper's 76.74 % and 15.05 (Table 8) and Table 21's status counts. The
definitions are in `ttw_jax/talk_the_walk/language/human.py`.

  python -m experiments.ttw_language.human --data_dir=/path/to/talkthewalk/data
  python -m experiments.ttw_language.human --synthetic=500 --maps_dir=../shared/data/ttw/maps

`--data_dir` holds `talkthewalk.{train,valid,test}.json` (BUILD.md); `--synthetic=N` plays N
synthetic dialogues per split instead, on the maps of `--maps_dir` (synthetic maps without it).
The text starts with the provenance line and `--json_out` holds `schema_version` and `provenance`
(`ttw_jax.core.train.provenance`): the release folder read, or the synthetic dialogues' seed.
"""
import json
import sys

import ml_collections
from absl import app, flags

from ttw_jax.core.train import provenance
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.language import human, synthetic as sd

ALL = "all"


def outcomes_by_split(splits, data_dir: str = "", synthetic: int = 0, maps_dir: str = "",
                      seed: int = 0) -> dict[str, list[dict]]:
    """{split: `human.dialogue_outcomes` rows}: of `data_dir/talkthewalk.{split}.json`, or of
    `synthetic` generated dialogues per split (seed `seed` + the split's position in `splits`)
    on the maps of `maps_dir` (synthetic maps from `seed` when empty)."""
    if synthetic:
        nmaps = maps.load_maps(maps_dir) if maps_dir else maps.synthetic_maps(seed)
        return {s: human.dialogue_outcomes(sd.synthetic_dialogues(nmaps, synthetic, seed + i, s),
                                           f"<synthetic {s}>")
                for i, s in enumerate(splits)}
    if not data_dir:
        raise ValueError("give --data_dir (the folder of talkthewalk.{train,valid,test}.json) or "
                         "--synthetic=N")
    files = human.dialogue_files(data_dir, splits)
    return {s: human.read_outcomes(path) for s, path in files.items()}


def report(splits, data_dir: str = "", synthetic: int = 0, maps_dir: str = "", seed: int = 0,
           steps: str = "forward") -> tuple[str, dict]:
    """(the printed text, {split or 'all': `human.summarize`} plus 'paper' and 'source', with
    `schema_version` and `provenance`)."""
    by_split = outcomes_by_split(splits, data_dir, synthetic, maps_dir, seed)
    summaries = {s: human.summarize(rows, steps) for s, rows in by_split.items()}
    summaries[ALL] = human.summarize([r for rows in by_split.values() for r in rows], steps)
    source = (f"{synthetic} synthetic dialogues per split on "
              f"{'the maps of ' + maps_dir if maps_dir else 'synthetic maps'} (seed {seed})"
              if synthetic else f"the dialogues of {data_dir}")
    settings = ml_collections.ConfigDict(dict(splits=list(splits), data_dir=data_dir,
                                              synthetic=synthetic, maps_dir=maps_dir, seed=seed,
                                              steps=steps))
    prov = provenance.provenance(
        settings, data=(provenance.synthetic_data(seed) if synthetic
                        else provenance.release_data(data_dir)),
        hidden_splits=maps.HIDDEN_SPLITS)
    text = "\n".join([provenance.title(prov), f"Talk The Walk human baselines: {source}", "",
                      human.format_summaries(summaries), "",
                      "success rate = #success / (#success + #failed), timeouts and disconnects "
                      "left out (paper: Table 8, counts: Table 21); #steps = mean "
                      f"{human.STEP_MEASURES[steps]} per successful dialogue (our reading)."])
    result = {**summaries, "paper": {"success_rate": human.PAPER_SUCCESS_RATE,
                                     "steps": human.PAPER_STEPS,
                                     "status_counts": human.PAPER_STATUS_COUNTS},
              "source": source}
    return text, provenance.finalize(result, prov)


def _define_flags():
    """The command's flags (defined when it runs, so importing this module defines none)."""
    flags.DEFINE_string("data_dir", "", "The folder of talkthewalk.{train,valid,test}.json.")
    flags.DEFINE_list("splits", list(maps.SPLITS), "The splits to read.")
    flags.DEFINE_string("json_out", "", "Also write every summary to this JSON file.")
    flags.DEFINE_integer("synthetic", 0, "Play this many synthetic dialogues per split instead "
                                         "of reading --data_dir.")
    flags.DEFINE_string("maps_dir", "", "With --synthetic: the landmark maps to play them on "
                                        "(synthetic maps when empty).")
    flags.DEFINE_integer("seed", 0, "With --synthetic: the seed of the maps and dialogues.")
    flags.DEFINE_enum("steps", "forward", list(human.STEP_MEASURES),
                      "What #steps counts per successful dialogue: FORWARD acts, corner-changing "
                      "moves or all tourist actions.")


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    f = flags.FLAGS
    if not f.synthetic and not f.data_dir:
        raise app.UsageError("give --data_dir (the folder of talkthewalk.{train,valid,test}.json)"
                             " or --synthetic=N")
    try:
        text, result = report(f.splits, f.data_dir, f.synthetic, f.maps_dir, f.seed, f.steps)
    except (FileNotFoundError, ValueError) as e:   # missing files, malformed records
        sys.exit(f"error: {e}")
    print(text)
    if f.json_out:
        with open(f.json_out, "w") as out:
            json.dump(result, out, indent=1)


if __name__ == "__main__":
    _define_flags()
    app.run(main)
