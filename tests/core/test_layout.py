"""The package layout: one package per system over a shared `core`.

A system package (`ttw_jax.<system>`) imports `ttw_jax.core`, itself and the TFDS builders of its
own datasets, never another system; `ttw_jax.core` imports no system; a TFDS builder imports
`core` and its own system; an experiment imports `core` and one system. No concept-type folder
(`data/`, `models/`, ...) is left at the top of `ttw_jax/`, and every package directory is listed
in `pyproject.toml`, so a non-editable install ships it.
"""
import ast
import os
import tomllib

import pytest

from tests.conftest import ROOT

SYSTEMS = ("talk_the_walk", "touchdown", "rxr", "arramon")
# TFDS builder package (under datasets/, installed as ttw_datasets) -> the system it belongs to.
DATASETS = {"ttw_localization": "talk_the_walk", "talk_the_walk": "talk_the_walk",
            "touchdown": "touchdown", "rxr": "rxr", "arramon": "arramon"}
# Experiment folder -> the system it drives.
EXPERIMENTS = {"ttw_emergent": "talk_the_walk", "ttw_language": "talk_the_walk",
               "ttw_landmarks": "talk_the_walk", "touchdown_nav": "touchdown",
               "touchdown_sdr": "touchdown", "rxr": "rxr", "arramon": "arramon"}


def imports(path: str) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module level) of every import statement of `path`; for
    `from a.b import c` the module is `a.b.c` (`c` may be a module)."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out += [(n, node.lineno, id(node) in top) for n in names]
    return out


def allowed(owner: tuple[str, str]):
    """The predicate on imported ttw_jax / ttw_datasets modules for a file owned by `owner`:
    ("core", "") / ("system", s) / ("dataset", s) / ("experiment", s)."""
    kind, system = owner

    def ok(module: str) -> bool:
        parts = module.split(".")
        if parts[0] == "ttw_datasets":
            return kind != "core" and (len(parts) < 2 or DATASETS.get(parts[1]) == system)
        if parts[0] != "ttw_jax" or len(parts) < 2 or parts[1] not in SYSTEMS:
            return True   # third-party, ttw_jax itself, ttw_jax.core, experiments, tests
        return kind != "core" and parts[1] == system
    return ok


def owner_of(rel: str) -> tuple[str, str] | None:
    parts = rel.split(os.sep)
    if parts[0] == "ttw_jax" and len(parts) > 2:
        return ("core", "") if parts[1] == "core" else ("system", parts[1])
    if parts[0] == "datasets" and len(parts) > 2:
        return "dataset", DATASETS[parts[1]]
    if parts[0] == "experiments" and len(parts) > 2 and parts[1] in EXPERIMENTS:
        return "experiment", EXPERIMENTS[parts[1]]
    return None


def python_files(root: str, *dirs: str):
    for d in dirs:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if f.endswith(".py"):
                    yield os.path.relpath(os.path.join(dirpath, f), root)


def layering_violations(root: str) -> list[str]:
    """Every import that breaks the layering rules, and every function-local import of a
    ttw_jax / ttw_datasets module in library code (it would hide the layering)."""
    out = []
    for rel in python_files(root, "ttw_jax", "datasets", "experiments"):
        owner = owner_of(rel)
        if owner is None:
            continue
        ok = allowed(owner)
        for module, line, top_level in imports(os.path.join(root, rel)):
            if not ok(module):
                out.append(f"{rel}:{line}: a {owner[0]} of {owner[1] or 'core'} imports {module}")
            elif (not top_level and owner[0] in ("core", "system")
                    and module.split(".")[0] in ("ttw_jax", "ttw_datasets")):
                out.append(f"{rel}:{line}: function-local import of {module}")
    for rel in python_files(root, "experiments/benchmarks"):
        used = {m.split(".")[1] for m, _, _ in imports(os.path.join(root, rel))
                if m.startswith("ttw_jax.") and m.split(".")[1] in SYSTEMS}
        if len(used) > 1:
            out.append(f"{rel}: a benchmark of one system imports {sorted(used)}")
    return out


def top_level_violations(root: str) -> list[str]:
    entries = sorted(os.listdir(os.path.join(root, "ttw_jax")))
    return [e for e in entries if e not in {"__init__.py", "__pycache__", "core", *SYSTEMS}]


def write(root, rel, text=""):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def test_no_system_imports_another_and_core_imports_none():
    assert layering_violations(ROOT) == []


def test_only_core_and_the_systems_sit_at_the_top_of_ttw_jax():
    assert top_level_violations(ROOT) == []


def test_the_checks_catch_violations(tmp_path):
    root = str(tmp_path)
    write(root, "ttw_jax/__init__.py")
    write(root, "ttw_jax/core/env.py", "from ttw_jax.arramon import env\n")
    write(root, "ttw_jax/rxr/env.py", "from ttw_jax.touchdown.env import step\n"
                                      "from ttw_jax.core.env import rollout\n")
    write(root, "ttw_jax/rxr/agent.py", "def f():\n    from ttw_jax.rxr import env\n")
    write(root, "ttw_jax/rxr/dataset.py", "from ttw_datasets.rxr import rxr_dataset_builder\n"
                                          "from ttw_datasets.arramon import Builder\n")
    write(root, "datasets/touchdown/builder.py", "import ttw_jax.rxr.records\n")
    write(root, "experiments/arramon/train.py", "from ttw_jax.arramon.env import step\n"
                                                "from ttw_jax.talk_the_walk import maps\n")
    write(root, "experiments/benchmarks/bench.py", "from ttw_jax.rxr import env\n"
                                                   "from ttw_jax.arramon import env as a\n")
    write(root, "ttw_jax/models/masc.py")
    found = layering_violations(root)
    assert len(found) == 7, found      # the allowed imports beside them are not reported
    for needle in ("ttw_jax/core/env.py:1", "ttw_jax/rxr/env.py:1", "ttw_jax/rxr/agent.py:2",
                   "ttw_jax/rxr/dataset.py:2", "datasets/touchdown/builder.py:1",
                   "experiments/arramon/train.py:2", "experiments/benchmarks/bench.py"):
        assert any(f.startswith(needle) for f in found), (needle, found)
    assert top_level_violations(root) == ["models"]


def test_pyproject_lists_every_package():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        setuptools = tomllib.load(f)["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    remap = {v: k for k, v in setuptools.get("package-dir", {}).items()}
    found = set()
    for top in ("ttw_jax", "experiments", "datasets"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            if "__init__.py" in files:
                rel = os.path.relpath(dirpath, ROOT).split(os.sep)
                found.add(".".join([remap.get(rel[0], rel[0])] + rel[1:]))
    assert found - listed == set(), "packages missing from pyproject.toml"
    assert listed - found == set(), "pyproject.toml lists packages that do not exist"


@pytest.mark.parametrize("system", SYSTEMS)
def test_every_system_has_its_tests_folder(system):
    assert os.path.isfile(os.path.join(ROOT, "tests", system, "__init__.py"))
