"""Human baselines of the Talk The Walk full task, computed from the release's dialogues (de Vries
et al. 2018, Table 8: success 76.74 % on every split, 15.05 #steps; Table 21: dialogue status).

Every episode of `talkthewalk.{split}.json` was played by two crowd workers in the official
MTurk world. Its `status` is what the world recorded last: 'success' (an evaluation found the
tourist on the target corner), 'failed' (the last evaluation missed), 'timeout' or 'disconnect';
it may be null or absent ('missing' here). The world's rules, which the replay follows: a Guide
act `EVALUATE_LOCATION` evaluates the tourist's corner (x, y) against the target's (orientation
ignored); a hit ends the task as a success, a miss counts as failed and the task goes on until
the third miss, which ends it as failed. The tourist's corner comes from `dialogues.replay` (turns
rotate, FORWARD moves one corner, clamped to the window).

Definitions (the paper states the rate's, the #steps reading is ours):
- success rate = #success / (#success + #failed) in percent, timeouts and disconnects left out:
  Table 21's totals give 10310 / (10310 + 3124) = 76.75 %, the 76.74 of Table 8 (the same figure
  for train, valid and test, i.e. one figure over the whole release). The status is the recorded
  one; a record without it counts by its replay outcome ('unfinished' ones are left out).
- #steps: the paper does not define the human figure. The default here is the mean number of
  FORWARD acts of the successful dialogues (the moves that walk, as the models' steps do, blocked
  ones included); the summaries also give the mean corner-changing moves and the mean tourist
  actions (turns included), over the successful dialogues and over all.
"""
from __future__ import annotations

import os
from collections import Counter
from typing import Mapping, Sequence

from ttw_jax.core import paths
from ttw_jax.core.records import is_int, list_of
from ttw_jax.talk_the_walk.language import dialogues as td

STATUSES = ("success", "failed", "timeout", "disconnect")  # as the MTurk world records them
MISSING = "missing"                                         # status null or absent
STATUS_KEYS = (*STATUSES, MISSING)
OUTCOMES = ("success", "failed", "unfinished")              # by replaying the acts
MAX_EVALUATIONS = 3                                         # the third miss ends the task
# The replay outcome a recorded status agrees with (a timeout or disconnect ends no evaluation).
AGREEING_OUTCOME = {"success": "success", "failed": "failed", "timeout": "unfinished",
                    "disconnect": "unfinished"}
# The per-dialogue counts a #steps figure can be the mean of.
STEP_MEASURES = {"forward": "FORWARD acts", "moves": "corner-changing moves",
                 "actions": "tourist actions"}
COUNTS = ("evaluations", "forward", "moves", "actions")
PAPER_SUCCESS_RATE = 76.74   # percent, Table 8 (train = valid = test)
PAPER_STEPS = 15.05          # Table 8
PAPER_STATUS_COUNTS = {"success": 10310, "failed": 3124, "disconnect": 3344}  # Table 21 totals


def recorded_status(ep: Mapping, path: str, index: int) -> str:
    """The episode's `status` (one of `STATUSES`), or `MISSING` when it is null or absent;
    DialogueFormatError `{path}: episode {index}: field 'status': ...` for anything else."""
    status = ep.get("status")
    if status is None:
        return MISSING
    if status not in STATUSES:
        raise td.DialogueFormatError(f"{path}: episode {index}: field 'status': expected one of "
                                     f"{STATUSES} or null, got {status!r}")
    return status


def replay_outcome(ep: Mapping) -> dict:
    """The task as the MTurk world played it, replayed from a validated episode's acts.

    Returns a dict of plain Python values:
      outcome: 'success' (an EVALUATE_LOCATION on the target corner), 'failed' (the
        `MAX_EVALUATIONS`-th missed evaluation) or 'unfinished' (neither, e.g. a disconnect);
      evaluations, failed_evaluations: Guide EVALUATE_LOCATION acts up to the end;
      forward: FORWARD acts; moves: tourist moves that changed the corner (a FORWARD blocked
        by the window edge does not); actions: all tourist ACTION acts (turns included);
        all three count acts up to the end (the whole dialogue when unfinished);
      end_act: index in `dialog` of the act that ended the task, None when unfinished;
      acts_after_end: acts recorded after it (0 in a well-formed episode);
      final: the replayed [x, y, orientation] after every act of the dialogue.
    """
    locations = td.replay(ep)      # len(dialog) + 1: the start, then after each act
    target = list(ep["target_location"][:2])
    dialog = ep["dialog"]
    counts = Counter()
    outcome, end_act = "unfinished", None
    for j, act in enumerate(dialog):
        before, after = locations[j], locations[j + 1]
        if act["id"] == "Tourist" and act["text"] in td.ACTIONS:
            counts["actions"] += 1
            counts["forward"] += act["text"] == td.FORWARD
            counts["moves"] += before[:2] != after[:2]
        elif act["id"] == "Guide" and act["text"] == td.EVALUATE:
            counts["evaluations"] += 1
            if list(after[:2]) == target:
                outcome = "success"
            else:
                counts["failed_evaluations"] += 1
                if counts["failed_evaluations"] == MAX_EVALUATIONS:
                    outcome = "failed"
            if outcome != "unfinished":
                end_act = j
                break
    return {"outcome": outcome,
            **{k: counts[k] for k in ("evaluations", "failed_evaluations", "forward", "moves",
                                      "actions")},
            "end_act": end_act,
            "acts_after_end": 0 if end_act is None else len(dialog) - 1 - end_act,
            "final": list(locations[-1])}


def dialogue_outcomes(dialogues: Sequence, path: str = "<dialogues>",
                      validate: bool = True) -> list[dict]:
    """Per episode (in order) the `replay_outcome` dict plus
      status: the recorded status (`recorded_status`: one of `STATUSES` or 'missing');
      location_agrees: whether the recorded final `location` [x, y, orientation] (optional)
        equals the replayed one; None when the episode has none.
    With `validate` every episode is first checked by `dialogues.validate_dialogue` (an error
    names `path`, the episode index and the field); pass False for episodes read by
    `dialogues.read_dialogues`, which are checked already."""
    out = []
    for i, ep in enumerate(dialogues):
        if validate:
            td.validate_dialogue(ep, path, i)
        row = {"status": recorded_status(ep, path, i), **replay_outcome(ep)}
        location = ep.get("location")
        if location is not None and not list_of(is_int, 3, 3)(location):
            raise td.DialogueFormatError(f"{path}: episode {i}: field 'location': expected a "
                                         f"list of 3 integers [x, y, orientation], got "
                                         f"{location!r}")
        row["location_agrees"] = None if location is None else list(location) == row["final"]
        out.append(row)
    return out


def dialogue_files(data_dir: str, splits: Sequence[str]) -> dict[str, str]:
    """{split: `data_dir/talkthewalk.{split}.json`}; FileNotFoundError naming every expected
    file that is missing, and where the release is (`dialogues.SOURCE_HINT`)."""
    unknown = [s for s in splits if s not in td.DIALOGUE_FILES]
    if unknown:
        raise ValueError(f"unknown split(s) {unknown}; expected some of {tuple(td.DIALOGUE_FILES)}")
    files = {s: os.path.join(data_dir, td.DIALOGUE_FILES[s]) for s in splits}
    missing = [p for p in files.values() if not paths.isfile(p)]
    if missing:
        raise FileNotFoundError(f"missing Talk The Walk dialogue files; expected: "
                                f"{', '.join(missing)}. {td.SOURCE_HINT}")
    return files


def read_outcomes(path: str) -> list[dict]:
    """`dialogue_outcomes` of a `talkthewalk.{split}.json` file (read and validated by
    `dialogues.read_dialogues`)."""
    return dialogue_outcomes(td.read_dialogues(path), path, validate=False)


def rated_status(row: Mapping) -> str:
    """The status a dialogue counts with in the success rate: the recorded one, or for a record
    without status its replay outcome ('unfinished' is rated like a disconnect: left out)."""
    return row["outcome"] if row["status"] == MISSING else row["status"]


def _rate(counts: Mapping[str, int]) -> float | None:
    rated = counts.get("success", 0) + counts.get("failed", 0)
    return 100.0 * counts.get("success", 0) / rated if rated else None


def _means(rows: Sequence[Mapping]) -> dict[str, float | None]:
    return {k: (sum(r[k] for r in rows) / len(rows) if rows else None) for k in COUNTS}


def summarize(outcomes: Sequence[Mapping], steps: str = "forward") -> dict:
    """Aggregates of `dialogue_outcomes` rows (N dialogues), plain Python values:
      dialogues: N;
      status_counts: {status: n} over `STATUS_KEYS` (recorded; 'missing' = null or absent);
      outcome_counts: {outcome: n} over `OUTCOMES` (replay);
      confusion: {status: {outcome: n}} (recorded status x replay outcome);
      success_rate: percent, #success / (#success + #failed) by `rated_status` (the paper's
        definition), None without any; rated: #success + #failed it is taken over;
      success_rate_replay: the same by replay outcome; rated_replay: its denominator;
      agreement, compared: dialogues with a recorded status whose replay outcome is the one it
        implies (`AGREEING_OUTCOME`), and how many have a recorded status;
      steps_measure, steps: the #steps figure, the mean of `STEP_MEASURES[steps]` per
        successful dialogue (by `rated_status`), None without any;
      mean_successful, mean_all: {count: mean per dialogue} of `COUNTS` (evaluations, forward,
        moves, actions) over the successful dialogues and over all;
      location_compared, location_agrees: dialogues with a recorded final location, and those
        where it equals the replayed one;
      acts_after_end: dialogues with acts recorded after the act that ended the task.
    """
    if steps not in STEP_MEASURES:
        raise ValueError(f"unknown #steps measure {steps!r}; expected one of "
                         f"{tuple(STEP_MEASURES)}")
    status_counts = Counter(r["status"] for r in outcomes)
    outcome_counts = Counter(r["outcome"] for r in outcomes)
    rated = Counter(rated_status(r) for r in outcomes)
    with_status = [r for r in outcomes if r["status"] != MISSING]
    successful = [r for r in outcomes if rated_status(r) == "success"]
    mean_successful = _means(successful)
    located = [r for r in outcomes if r["location_agrees"] is not None]
    return {
        "dialogues": len(outcomes),
        "status_counts": {s: status_counts[s] for s in STATUS_KEYS},
        "outcome_counts": {o: outcome_counts[o] for o in OUTCOMES},
        "confusion": {s: {o: sum(1 for r in outcomes if r["status"] == s and r["outcome"] == o)
                          for o in OUTCOMES} for s in STATUS_KEYS},
        "success_rate": _rate(rated), "rated": rated["success"] + rated["failed"],
        "success_rate_replay": _rate(outcome_counts),
        "rated_replay": outcome_counts["success"] + outcome_counts["failed"],
        "agreement": sum(1 for r in with_status if AGREEING_OUTCOME[r["status"]] == r["outcome"]),
        "compared": len(with_status),
        "steps_measure": steps, "steps": mean_successful[steps],
        "mean_successful": mean_successful, "mean_all": _means(outcomes),
        "location_compared": len(located),
        "location_agrees": sum(1 for r in located if r["location_agrees"]),
        "acts_after_end": sum(1 for r in outcomes if r["acts_after_end"]),
    }


def _fmt(value, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else f"{value:.{digits}f}"


def format_summaries(summaries: Mapping[str, Mapping]) -> str:
    """A Markdown table of `summarize` outputs, one column per name (e.g. train, valid, test,
    all), beside the paper's figures (Table 8's success rate and #steps, Table 21's counts)."""
    names = list(summaries)
    measure = next(iter(summaries.values()))["steps_measure"]
    lines = ["| | " + " | ".join(names) + " | paper |",
             "| --- |" + " --- |" * (len(names) + 1)]

    def row(label, get, paper=None):
        lines.append(f"| {label} | " + " | ".join(_fmt(get(s)) for s in summaries.values())
                     + f" | {_fmt(paper)} |")

    row("dialogues", lambda s: s["dialogues"], sum(PAPER_STATUS_COUNTS.values()))
    for status in STATUS_KEYS:
        row(f"status {status}", lambda s, k=status: s["status_counts"][k],
            PAPER_STATUS_COUNTS.get(status))
    for outcome in OUTCOMES:
        row(f"replay {outcome}", lambda s, k=outcome: s["outcome_counts"][k])
    row("success rate, % (status)", lambda s: s["success_rate"], PAPER_SUCCESS_RATE)
    row("success rate, % (replay)", lambda s: s["success_rate_replay"])
    lines.append("| replay agrees with status | " + " | ".join(
        f"{s['agreement']:,} / {s['compared']:,}" for s in summaries.values()) + " | |")
    lines.append("| replayed final location = recorded | " + " | ".join(
        f"{s['location_agrees']:,} / {s['location_compared']:,}" for s in summaries.values())
        + " | |")
    row(f"#steps ({STEP_MEASURES[measure]}, successful)", lambda s: s["steps"], PAPER_STEPS)
    for key in COUNTS:
        row(f"{key}, mean over successful", lambda s, k=key: s["mean_successful"][k])
        row(f"{key}, mean over all", lambda s, k=key: s["mean_all"][k])
    return "\n".join(lines)
