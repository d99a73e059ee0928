"""Every command, import, path and link the docs show still works as written (checked without
running them): README.md, BUILD.md, every experiment's README.md and the experiments' docstrings.

- `python -m <module> ...`: the module exists; for an experiment launcher (`experiments.<x>.main`,
  or another module of the experiment that runs through `launch`) every `--config.a.b=...` names a
  field of the config it selects (`--config=...` or the launcher's default) and the other flags are
  the launcher's (or the module's own); for any other module every flag is
  one it defines (absl `flags.DEFINE_*` or argparse `add_argument`).
- The values of a launcher command's `--config.<key>=<value>` flags, in a command that gives
  `--workdir` (one to run; the README's table names each launcher bare): each is set in the
  selected config as absl parses it for that field (`tests.helpers.flag_value`: a bool from
  True / False, an int, a float, a string as written), then the launcher's config checks must
  accept the whole config: `check_common` (`ttw_jax/core/train/workdir.py`) and the
  experiment's `train.check_config` where it has one. Which values are checked:
  - a value with `|` offers alternatives (`--config.model.name=vo|lo`): each is checked;
  - a placeholder, a value holding `<`, `>`, `$` or `...` (`<file>`, `$SEED`, `...`), stands for
    one the reader supplies and is not parsed: a string field that is empty by default (a path,
    a folder) takes it as a stand-in, so the checks see it set; any other field keeps its default;
  - a path (`/path/to/features.npz`, `../shared/data/r2r`, `gs://bucket/run`) is a string like
    any other, set as written (the checks look at values, not at files).
- A sentence of any doc that says "every launcher" promises its `--config.<key>=<value>` code spans
  to every launcher: each one's default config has the key and takes the value (the checks
  refuse nothing that they do not refuse in the default config alone: rxr's needs a
  `data.connectivity_dir`).
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
import copy
import glob
import importlib
import importlib.util
import os
import re
import shlex

import pytest

from tests.conftest import ROOT
from tests.helpers import flag_value
from ttw_jax.core.train.launch import resolve_config_paths, selected_config
from ttw_jax.core.train.workdir import check_common

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


PLACEHOLDER = re.compile(r"[<>$]|\.\.\.")


def field(config, dotted: str):
    node = config
    for part in dotted.split("."):
        node = node[part]
    return node


def set_value(config, key: str, text: str) -> None:
    """Sets `--config.<key>=<text>` in `config` as the launcher would (see the module docstring
    for placeholders)."""
    like = field(config, key)
    if PLACEHOLDER.search(text):
        if not (isinstance(like, str) and like == ""):
            return
        value = text
    else:
        value = flag_value(like, text)
    section, _, name = key.rpartition(".")
    (field(config, section) if section else config)[name] = value


def config_checks(experiment: str) -> list:
    """The launcher's config checks: `check_common` and the trainer's `check_config`, if any."""
    train = f"experiments.{experiment}.train"
    own = getattr(importlib.import_module(train), "check_config", None) if find(train) else None
    return [check_common] + ([own] if own else [])


def value_problems(experiment: str, config, flags: list[str]) -> list[str]:
    """What the launcher of `experiment` would refuse in `config` (the selected config) with the
    `--config.<key>=<value>` `flags` set: a value its field cannot take, or a config its checks
    refuse; one config per alternative of a `|` value (the other flags at their first)."""
    parsed = [(k, v.split("|")) for k, v in (f[len("--config."):].split("=", 1) for f in flags)]
    out = []
    for i in range(max((len(alts) for _, alts in parsed), default=1)):
        c = copy.deepcopy(config)
        for key, alts in parsed:
            text = alts[min(i, len(alts) - 1)]
            try:
                set_value(c, key, text)
            except (TypeError, ValueError) as e:
                out.append(f"--config.{key}={text}: {e}")
        for check in config_checks(experiment):
            try:
                check(c)
            except Exception as e:     # noqa: BLE001 -- any refusal is the docs' problem
                out.append(f"refused by {check.__name__}: {e}")
    return sorted(set(out))


def problems(command: str) -> list[str]:
    module, args = parse(command)
    if "--" in args:          # the end of the flags: what follows is passed on (e.g. to pytest)
        args = args[:args.index("--")]
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
    elif module.startswith("experiments.") and (module.endswith(".main") or "launch(" in source):
        experiment = module.split(".")[1]
        config = config_of(module, args)
        own = defined_flags(module) if not module.endswith(".main") else set()
    else:
        known = defined_flags(module) | {"helpfull", "help"}
        return [f"unknown flag --{n}" for n in names if n not in known]
    bad = [n for n in names if n not in LAUNCHER_FLAGS | own and not (
        n.startswith("config.") and has_field(config, n[len("config."):]))]
    if bad or config is None or not any(a.startswith("--workdir=") for a in args):
        return [f"unknown flag --{n}" for n in bad]
    return value_problems(experiment, config, [a for a in args if re.match(r"--config\.\S*=", a)])


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
                    "--workdir=/tmp/r --config.data.manual_dir=x "
                    "--config.data.connectivity_dir=y") == []


def test_the_value_check_catches_mistakes():
    emergent = "python -m experiments.ttw_emergent.main --workdir=/tmp/x "
    assert problems(emergent + "--config.profile_steps=first,last") == [
        "refused by check_common: config: profile_steps must be two step numbers 'FIRST,LAST' "
        "(1-based, inclusive, FIRST <= LAST), e.g. '21,22'; or '' for none; got 'first,last'"]
    assert problems(emergent + "--config.dtype=float16") == [
        "refused by check_common: config: dtype must be one of ('float32', 'bfloat16'), got "
        "'float16'"]
    bool_flag, int_flag = problems(emergent + "--config.num_steps=1e3 "
                                   "--config.data.orientation_aware=yes")
    assert bool_flag.startswith("--config.data.orientation_aware=yes: ('Non-boolean argument")
    assert int_flag == "--config.num_steps=1e3: invalid literal for int() with base 10: '1e3'"
    assert problems(emergent + "--config.model.comm=continuous|discret") == [
        "refused by check_config: model.comm must be one of ('continuous', 'discrete'), got "
        "'discret'"]
    # the trainer's own check, and placeholders: a default kept, an empty path set
    assert problems("python -m experiments.rxr.main") == []      # a launcher named, not run
    assert problems("python -m experiments.rxr.main --workdir=/tmp/r") == [
        "refused by check_config: set data.connectivity_dir to the directory of Matterport "
        "<scan>_connectivity.json files. " + importlib.import_module(
            "experiments.rxr.train").SOURCE_HINT]
    assert problems("python -m experiments.rxr.main --workdir=/tmp/r --config.seed=$SEED "
                    "--config.model.name=<model> --config.data.connectivity_dir=<dir>") == []
    assert problems("python -m experiments.ttw_landmarks.main --workdir=/tmp/l "
                    "--config.valid_fraction=1.5 --config.dtype=bfloat16") == [
        "refused by check_config: valid_fraction must be in (0, 1), got 1.5"]


def every_launcher_flags(text: str) -> list[str]:
    """The `--config.<key>=<value>` code spans of the sentences (outside code blocks) that say
    "every launcher"."""
    sentences = re.split(r"(?<=\.)\s+", " ".join(fenced(text)[1].split()))
    return [flag for s in sentences if "every launcher" in s.lower()
            for flag in re.findall(r"`(--config\.\w[\w.]*=[^`\s]+)`", s)]


def test_every_launcher_takes_what_the_docs_promise_every_launcher():
    promised = {flag for text in doc_texts().values() for flag in every_launcher_flags(text)}
    assert {"--config.dtype=bfloat16", "--config.profile_steps=21,22",
            "--config.num_devices=4"} <= promised, promised
    for experiment in SYSTEMS:
        plain = f"{launcher_command(experiment)} --workdir=/tmp/x"    # rxr's needs a path
        command = f"{plain} {' '.join(sorted(promised))}"
        assert set(problems(command)) <= set(problems(plain)), command


@pytest.mark.parametrize("experiment", SYSTEMS)
def test_every_launcher_has_a_dtype_a_profile_window_and_a_device_count(experiment):
    config = config_of(f"experiments.{experiment}.main", [])
    assert config.dtype == "float32" and config.profile_steps == "" and config.num_devices == 0


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
