"""Checks a whole Talk The Walk release before a run: every file read to the end, every problem
named.

`validate_release(data_dir, maps_dir, features_dir)` reads what the builders and trainers read:

* the dialogue files `talkthewalk.{train,valid,test}.json` present in `data_dir`
  (`dialogues.read_dialogues`: no empty dialogue, act times finite; an empty file and an
  episode repeated are problems) and the configuration files `configurations.{split}.json`
  (`dialogues.read_configurations`, not empty; no window in two of them, the `real` builder's
  `configuration_windows`);
* with `maps_dir`, the map of every neighbourhood there, `<nbh>/map.json` or `<nbh>_map.json`
  (`maps.find_map_file`, `maps.load_map`; a map without landmarks is a problem), and a map for
  every neighbourhood the dialogues use;
* with `features_dir`, the landmark-classification files present (`landmarks.release`):
  `resnetfeat.json` (`read_resnet`: finite as stored and as float32; with the maps, a vector for
  every relevant view of their corners, `landmarks.features.build_corners`) and
  `<nbh>/text.json` (`read_text`). A FastText `.vec` file is optional and not read.

Unlike a run, which stops at the first bad file, it reports one line per bad file (file, then
episode / entry / key and field) and goes on.
"""
from __future__ import annotations

import os

from ttw_datasets.talk_the_walk.talk_the_walk_dataset_builder import configuration_windows
from ttw_jax.core import paths
from ttw_jax.core.records import RecordFormatError, copies, problem_line
from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.landmarks import features as lf, release
from ttw_jax.talk_the_walk.language import dialogues as td

ERRORS = (RecordFormatError, ValueError, OSError)


def check_dialogues(data_dir: str) -> tuple[list[str], int, dict[str, str]]:
    """(problems, files checked, {neighbourhood: the first dialogue file using it}) of the
    dialogue and configuration files present in `data_dir`."""
    problems, checked, used = [], 0, {}
    for name in td.DIALOGUE_FILES.values():
        path = os.path.join(data_dir, name)
        if not paths.isfile(path):
            continue
        checked += 1
        try:
            episodes = td.read_dialogues(path)
        except ERRORS as e:
            problems.append(problem_line(path, e))
            continue
        for ep in episodes:
            used.setdefault(ep["neighborhood"], path)
        problem = _empty_or_repeated(path, episodes, "episode")
        if problem:
            problems.append(problem)
    configs, sound = 0, True
    for name in td.CONFIGURATION_FILES.values():
        path = os.path.join(data_dir, name)
        if not paths.isfile(path):
            continue
        configs += 1
        try:
            if not td.read_configurations(path):
                problems.append(f"{path}: no configuration (an empty list)")
        except ERRORS as e:
            problems.append(problem_line(path, e))
            sound = False
    if configs > 1 and sound:            # each file read: the windows they share
        try:
            configuration_windows(data_dir)
        except ERRORS as e:
            problems.append(" ".join(str(e).splitlines()))
    return problems, checked + configs, used


def _empty_or_repeated(path: str, items: list, what: str) -> str | None:
    """The problem of a file whose list of `what`s is empty or holds one twice
    (`core.records.copies`: it would count twice in training and in the metrics), or None."""
    if not items:
        return f"{path}: no {what} (an empty list)"
    repeated = copies(items)
    if repeated:
        i, earlier = repeated[0]
        return f"{path}: {what} {i}: repeats {what} {earlier}"
    return None


def check_maps(maps_dir: str, used: dict[str, str]) -> tuple[list[str], int, list]:
    """(problems, files checked, the maps read) of every neighbourhood's map in `maps_dir`, and
    one line for the neighbourhoods in `used` (name -> a file using it) without a map."""
    if not paths.isdir(maps_dir):
        return [f"{maps_dir}: not a folder. {maps.SOURCE_HINT}"], 0, []
    problems, checked, loaded, absent = [], 0, [], []
    for name in maps.NEIGHBORHOODS:
        path = maps.find_map_file(maps_dir, name)
        if path is None:
            absent.append(name)
            continue
        checked += 1
        try:
            loaded.append(maps.load_map(path, name))
        except ERRORS as e:
            problems.append(problem_line(path, e))
            continue
        if (loaded[-1].corners[..., 0] == maps.EMPTY_ID).all():
            problems.append(f"{path}: no landmark (an empty list)")
    lacking = [n for n in absent if n in used]
    if lacking:
        expected = ", ".join(p for n in lacking for p in maps.map_paths(maps_dir, n))
        problems.append(f"{maps_dir}: no map for {len(lacking)} neighbourhoods the dialogues use "
                        f"({', '.join(f'{n!r} in {used[n]}' for n in lacking)}); expected: "
                        f"{expected}. {maps.SOURCE_HINT}")
    elif not checked:
        expected = ", ".join(os.path.basename(p) for p in maps.map_paths("", "<nbh>"))
        problems.append(f"{maps_dir}: no map file (expected {expected} for <nbh> in "
                        f"{maps.NEIGHBORHOODS}). {maps.SOURCE_HINT}")
    return problems, checked, loaded


def check_features(features_dir: str, nmaps: list) -> tuple[list[str], int]:
    """(problems, files checked) of the landmark-classification files present in
    `features_dir`; the ResNet vectors against the relevant views of `nmaps`' corners."""
    if not paths.isdir(features_dir):
        return [f"{features_dir}: not a folder. {release.SOURCE_HINT}"], 0
    problems, checked = [], 0
    path = os.path.join(features_dir, release.RESNET_FILE)
    if paths.isfile(path):
        checked += 1
        try:
            resnet = release.read_resnet(path)
            if nmaps:
                lf.build_corners(nmaps, resnet=resnet, resnet_source=path)
        except ERRORS as e:
            problems.append(problem_line(path, e))
    for name in maps.NEIGHBORHOODS:
        path = os.path.join(features_dir, name, release.TEXT_FILE)
        if paths.isfile(path):
            checked += 1
            try:
                release.read_text(path)
            except ERRORS as e:
                problems.append(problem_line(path, e))
    if not checked:
        problems.append(f"{features_dir}: no landmark feature file (expected "
                        f"{release.RESNET_FILE} or <nbh>/{release.TEXT_FILE}). "
                        f"{release.SOURCE_HINT}")
    return problems, checked


def validate_release(data_dir: str, maps_dir: str | None = None,
                     features_dir: str | None = None) -> tuple[list[str], int]:
    """(problems, files checked): one line per bad file, in the order above. `data_dir` without
    a dialogue file is a problem unless `maps_dir` is given (the maps alone serve the synthetic
    dialogues on real maps)."""
    problems, checked, used = check_dialogues(data_dir)
    if not paths.isdir(data_dir):
        problems.append(f"{data_dir}: not a folder. {td.SOURCE_HINT}")
    elif not maps_dir and not any(paths.isfile(os.path.join(data_dir, n))
                                for n in td.DIALOGUE_FILES.values()):
        problems.append(f"{data_dir}: no dialogue file (expected any of "
                        f"{', '.join(td.DIALOGUE_FILES.values())}). {td.SOURCE_HINT}")
    nmaps = []
    if maps_dir:
        more, n, nmaps = check_maps(maps_dir, used)
        problems += more
        checked += n
    if features_dir:
        more, n = check_features(features_dir, nmaps)
        problems += more
        checked += n
    return problems, checked
