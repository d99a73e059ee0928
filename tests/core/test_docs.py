"""Every command, import, path and link the docs show still works as written (checked without
running them): README.md, BUILD.md, every experiment's README.md and the experiments' docstrings.

- `python -m <module> ...`: the module exists; for an experiment launcher (`experiments.<x>.main`,
  or another module of the experiment that runs through `launch`) every `--config.a.b=...` names a
  field of the config it selects (`--config=...` or the launcher's default) and the other flags are
  the launcher's (or the module's own); for any other module every flag is
  one it defines (absl `flags.DEFINE_*` or argparse `add_argument`).
- Python snippets: every `import` / `from ... import ...` resolves.
- Every repository path the docs mention (`ttw_jax/...`, `experiments/...`, `tests/...`) exists,
  and in an experiment's README so does every `configs/<name>.py` of that experiment.
- Every relative Markdown link (and image) points at a file that exists, and its `#anchor` at a
  heading of that file (GitHub's anchor rule).
- Every experiment folder has a README.md that names its launcher command; each system's README
  has a "Train on the official release" section with that command, which the top README's table
  links to; the top README stays short.
"""
import ast
import glob
import importlib
import importlib.util
import os
import re
import shlex

import pytest

from tests.conftest import ROOT
from ttw_jax.core.train.launch import resolve_config_paths, selected_config

EXPERIMENTS = sorted(os.path.basename(os.path.dirname(p)) for p in
                     glob.glob(os.path.join(ROOT, "experiments", "*", "__init__.py"))
                     + glob.glob(os.path.join(ROOT, "experiments", "*", "run_all.py")))
SYSTEMS = [e for e in EXPERIMENTS
           if os.path.exists(os.path.join(ROOT, "experiments", e, "main.py"))]
DOCS = ("README.md", "BUILD.md", *(f"experiments/{e}/README.md" for e in EXPERIMENTS))
OFFICIAL = "Train on the official release"
README_MAX_LINES = 250


def read(doc: str) -> str:
    return open(os.path.join(ROOT, doc), encoding="utf-8").read()


def launcher_flags() -> set[str]:
    source = read(os.path.join("ttw_jax", "core", "train", "launch.py"))
    return set(re.findall(r"flags\.DEFINE_\w+\(\s*\"(\w+)\"", source)) | {"config"}


LAUNCHER_FLAGS = launcher_flags()


def doc_texts() -> dict[str, str]:
    texts = {d: read(d) for d in DOCS if os.path.exists(os.path.join(ROOT, d))}
    for dirpath, _, files in os.walk(os.path.join(ROOT, "experiments")):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                doc = ast.get_docstring(ast.parse(open(path, encoding="utf-8").read()))
                if doc:
                    texts[os.path.relpath(path, ROOT)] = doc
    return texts


def fenced(text: str) -> tuple[list[tuple[str, str]], str]:
    """([(language, body)] of the fenced code blocks, the text outside them)."""
    blocks, prose, current = [], [], None
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if current is None:
                current = (line[3:].strip(), [])
            else:
                blocks.append((current[0], "".join(current[1])))
                current = None
        elif current is not None:
            current[1].append(line)
        else:
            prose.append(line)
    return blocks, "".join(prose)


def commands(text: str) -> list[str]:
    """The `python -m ...` commands of a text: in code blocks (with `\\` continuations and `$VAR`
    expanded from `VAR=...` lines of the same block), in inline code spans, and on their own
    lines (docstrings)."""
    out = []
    blocks, prose = fenced(text)
    for lang, block in blocks:
        if lang not in ("", "bash", "sh"):
            continue
        env = {}
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            m = re.fullmatch(r"([A-Z_]+)=(\S+)", line)
            if m:
                env[m.group(1)] = m.group(2)
                continue
            for var, value in env.items():
                line = line.replace(f"${var}", value)
            out += [c for c in re.findall(r"python -m [^&;|\"]+", line)]
    for span in re.findall(r"`([^`]+)`", prose):
        out += re.findall(r"python -m [^&;\"]+", " ".join(span.split()))
    for line in prose.replace("\\\n", " ").splitlines():
        if line.strip().startswith("python -m ") and "`" not in line:
            out.append(line.strip())
    return [c for c in out if not re.match(r"python -m (pip|pytest)\b", c)]


def parse(command: str) -> tuple[str, list[str]]:
    words = shlex.split(command.replace("[", " ").replace("]", " "))
    return words[2], [w for w in words[3:] if w.startswith("--")]


def defined_flags(module: str) -> set[str]:
    source = open(importlib.util.find_spec(module).origin, encoding="utf-8").read()
    return (set(re.findall(r"flags\.DEFINE_\w+\(\s*\"(\w+)\"", source))
            | set(re.findall(r"add_argument\(\s*\"--(\w+)\"", source)))


def config_of(main_module: str, flag_args: list[str]):
    """The config a launcher command runs: its --config file as the launcher resolves it
    (`resolve_config_paths`), else the experiment's `configs/default.py`."""
    configs_dir = os.path.join(os.path.dirname(importlib.util.find_spec(main_module).origin),
                               "configs")
    args = resolve_config_paths(["main", *flag_args], configs_dir)
    return selected_config(args, os.path.join(configs_dir, "default.py"))


def has_field(config, dotted: str) -> bool:
    node = config
    for part in dotted.split("."):
        if not hasattr(node, "keys") or part not in node.keys():
            return False
        node = node[part]
    return True


def find(module: str):
    try:
        return importlib.util.find_spec(module)
    except ModuleNotFoundError:
        return None


def problems(command: str) -> list[str]:
    module, args = parse(command)
    if find(module) is None:
        return [f"no module {module}"]
    if (ast.get_docstring(ast.parse(open(find(module).origin, encoding="utf-8").read())) or ""
            ).startswith("Moved:"):
        return [f"{module} has moved"]
    names = [a[2:].split("=", 1)[0] for a in args]
    source = open(find(module).origin, encoding="utf-8").read()
    # A launcher: `experiments.<x>.main`, or another module of an experiment built on `launch`
    # (its own flags besides the launcher's).
    if module == "experiments.sweep":
        # The sweep runs the experiment named by --experiment, with that launcher's flags.
        experiment = next((a.split("=", 1)[1] for a in args if a.startswith("--experiment=")), None)
        if experiment is None or find(f"experiments.{experiment}.main") is None:
            return [f"no experiment {experiment}"]
        config = config_of(f"experiments.{experiment}.main", args)
        own = defined_flags(module)
        bad = [n for n in names if n not in LAUNCHER_FLAGS | own and not (
            n.startswith("config.") and has_field(config, n[len("config."):]))]
    elif module.startswith("experiments.") and (module.endswith(".main") or "launch(" in source):
        config = config_of(module, args)
        own = defined_flags(module) if not module.endswith(".main") else set()
        bad = [n for n in names if n not in LAUNCHER_FLAGS | own and not (
            n.startswith("config.") and has_field(config, n[len("config."):]))]
    else:
        known = defined_flags(module) | {"helpfull", "help"}
        bad = [n for n in names if n not in known]
    return [f"unknown flag --{n}" for n in bad]


ALL = sorted({(name, c) for name, text in doc_texts().items() for c in commands(text)})


def test_the_docs_show_commands():
    assert len(ALL) >= 30, ALL
    assert any("--config.data.maps_dir=" in c for _, c in ALL)


@pytest.mark.parametrize("where,command", ALL)
def test_documented_command_runs_as_written(where, command):
    assert problems(command) == [], (where, command)


def test_the_command_check_catches_mistakes():
    assert problems("python -m experiments.ttw_emergent.sweep --workdir=/tmp/x --seeds=0 "
                    "--config.nope=1 --steps=3") == ["unknown flag --config.nope",
                                                     "unknown flag --steps"]
    assert problems("python -m experiments.nope.main --workdir=/tmp/x") == [
        "no module experiments.nope.main"]
    assert problems("python -m experiments.ttw_emergent.main --workdir=/tmp/x "
                    "--config.data.map_dir=x --config.T=2") == ["unknown flag --config.data.map_dir"]
    assert problems("python -m experiments.rxr.baselines --config=r2r") == [
        "experiments.rxr.baselines has moved"]
    assert problems("python -m experiments.sweep --experiment=touchdown_sdr --seeds=2 "
                    "--workdir=/tmp/s --config.model.name=concat --config.model.nope=1") == [
        "unknown flag --config.model.nope"]
    assert problems("python -m experiments.sweep --experiment=nope --workdir=/tmp/s") == [
        "no experiment nope"]
    assert problems("python -m experiments.benchmarks.sdr_bench --splits=val") == [
        "unknown flag --splits"]
    assert problems("python -m experiments.rxr.main --config=baselines --workdir=/tmp/r "
                    "--config.mode=baselines --config.model.kind=full") == [
        "unknown flag --config.model.kind"]
    assert problems("python -m experiments.rxr.main --config=experiments/rxr/configs/r2r.py "
                    "--workdir=/tmp/r --config.data.manual_dir=x") == []


def snippet_imports(text: str) -> list[ast.AST]:
    out = []
    for lang, block in fenced(text)[0]:
        if lang != "python":
            continue
        out += [n for n in ast.walk(ast.parse(block)) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return out


@pytest.mark.parametrize("doc", DOCS)
def test_python_snippets_import_what_exists(doc):
    for node in snippet_imports(read(doc)):
        if isinstance(node, ast.Import):
            for a in node.names:
                importlib.import_module(a.name)
        else:
            module = importlib.import_module(node.module)
            for a in node.names:
                assert hasattr(module, a.name) or find(f"{node.module}.{a.name}"), (
                    doc, node.module, a.name)


def missing_paths(doc: str, text: str) -> list[str]:
    """Repository paths of a doc that do not exist: `ttw_jax/...`, `experiments/...`, `tests/...`,
    `datasets/...` from the root, and in an experiment's README its own `configs/<name>.py`."""
    paths = set(re.findall(r"(?<![\w/.-])((?:ttw_jax|experiments|tests|datasets)/[\w/.]*\w)", text))
    missing = [p for p in paths if not os.path.exists(os.path.join(ROOT, p))]
    if doc.startswith("experiments/"):
        here = os.path.dirname(doc)
        missing += [f"{here}/{p}" for p in set(re.findall(r"(?<![\w/.-])(configs/\w+\.py)", text))
                    if not os.path.exists(os.path.join(ROOT, here, p))]
    return sorted(missing)


@pytest.mark.parametrize("doc", DOCS)
def test_paths_in_the_docs_exist(doc):
    text = read(doc)
    assert re.search(r"(?:ttw_jax|experiments|tests|datasets)/\w", text), doc
    assert missing_paths(doc, text) == []


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, code spans and links reduced to
    their text, every character but letters, digits, `_`, `-` and spaces dropped, spaces as `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a Markdown text (repeats numbered `-1`, `-2`, ... as on GitHub)."""
    out, seen = set(), {}
    for line in fenced(text)[1].splitlines():
        m = re.match(r"#{1,6} (.+)", line)
        if m:
            a = github_anchor(m.group(1))
            out.add(a if a not in seen else f"{a}-{seen[a]}")
            seen[a] = seen.get(a, 0) + 1
    return out


def broken_links(doc: str, text: str) -> list[str]:
    """Relative Markdown links and images of `doc` whose file or `#anchor` does not exist."""
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", fenced(text)[1]):
        if re.match(r"[a-z]+:", target):          # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
        if not os.path.isfile(os.path.join(ROOT, file)):
            bad.append(f"{target}: no file {file}")
        elif anchor and file.endswith(".md") and anchor not in anchors(read(file)):
            bad.append(f"{target}: no heading with anchor #{anchor} in {file}")
    return bad


@pytest.mark.parametrize("doc", DOCS)
def test_links_in_the_docs_resolve(doc):
    assert broken_links(doc, read(doc)) == []


def test_the_link_check_catches_mistakes():
    assert github_anchor("Mean +- std over 3 seeds (T=3, 3,000 steps)") == (
        "mean---std-over-3-seeds-t3-3000-steps")
    assert github_anchor("The paper's procedure (`configs/paper.py`)") == (
        "the-papers-procedure-configspaperpy")
    assert anchors("# A\n## B b\n```\n# not a heading\n```\n## B b\n") == {"a", "b-b", "b-b-1"}
    text = ("[ok](experiments/rxr/README.md#train-on-the-official-release) [gone](nope.md) "
            "[bad](BUILD.md#no-such-heading) [web](https://example.com/x#y)")
    assert broken_links("README.md", text) == [
        "nope.md: no file nope.md", "BUILD.md#no-such-heading: no heading with anchor "
        "#no-such-heading in BUILD.md"]
    assert missing_paths("experiments/rxr/README.md", "`configs/r2r.py` `configs/nope.py`") == [
        "experiments/rxr/configs/nope.py"]


def launcher_command(experiment: str) -> str:
    return f"python -m experiments.{experiment}." + ("main" if experiment in SYSTEMS else "run_all")


def test_every_experiment_folder_has_a_readme_naming_its_launcher():
    assert set(SYSTEMS) >= {"ttw_emergent", "ttw_language", "ttw_landmarks", "touchdown_nav",
                            "touchdown_sdr", "touchdown_full", "rxr", "arramon"}
    assert "benchmarks" in EXPERIMENTS
    for e in EXPERIMENTS:
        path = os.path.join(ROOT, "experiments", e, "README.md")
        assert os.path.isfile(path), f"experiments/{e} has no README.md"
        cmds = [c for c in commands(read(f"experiments/{e}/README.md"))]
        assert any(c.startswith(launcher_command(e)) for c in cmds), (
            f"experiments/{e}/README.md never shows `{launcher_command(e)}`")


def section(text: str, heading: str) -> str:
    """The text under a `## heading` up to the next heading of that level."""
    m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return m.group(1) if m else ""


@pytest.mark.parametrize("experiment", SYSTEMS)
def test_the_top_readme_reaches_each_official_release_command_in_one_link(experiment):
    """The top README links to each system's "Train on the official release" section, and that
    section shows the launcher command with the release's data path (`manual_dir` or
    `maps_dir`)."""
    doc = f"experiments/{experiment}/README.md"
    link = f"({doc}#{github_anchor(OFFICIAL)})"
    assert link in read("README.md"), f"README.md does not link {link}"
    cmds = commands(section(read(doc), OFFICIAL))
    assert any(c.startswith(launcher_command(experiment)) and re.search(
        r"--config\.data\.(manual_dir|maps_dir)=", c) for c in cmds), (doc, cmds)


def test_the_top_readme_is_short():
    n = len(read("README.md").splitlines())
    assert n <= README_MAX_LINES, (f"README.md has {n} lines: move detail into the experiments' "
                                   f"READMEs or BUILD.md")
