"""The fuzz corpus (`tests/fuzz.py`): every damaged copy of the four small releases is named by
one `experiments.validate` pass with its file and its line, entry or field; the clean releases
have no problem. `python -m tests.core.test_fuzz_corpus [folder]` prints the counts."""
import pathlib
import sys

import pytest

from tests.arramon.fuzz_cases import RELEASE as ARRAMON
from tests.fuzz import outcome, report
from tests.rxr.fuzz_cases import RELEASE as RXR
from tests.talk_the_walk.fuzz_cases import RELEASE as TALK_THE_WALK
from tests.touchdown.fuzz_cases import RELEASE as TOUCHDOWN

RELEASES = {r.name: r for r in (TOUCHDOWN, RXR, ARRAMON, TALK_THE_WALK)}
CASES = {f"{r.name}: {c.name}": (r, c) for r in RELEASES.values() for c in r.cases()}


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    """Each release's clean folder, written once per worker."""
    root = tmp_path_factory.mktemp("fuzz_bases")
    for release in RELEASES.values():
        release.build(root / release.name)
    return root


def test_the_corpus_is_large_and_covers_the_four_releases():
    assert len(CASES) >= 250
    for name in RELEASES:
        assert sum(r.name == name for r, _ in CASES.values()) >= 40, name


@pytest.mark.parametrize("release", RELEASES)
def test_a_clean_release_has_no_problem(bases, release):
    lines, count = report(RELEASES[release], bases / release)
    assert count == 0, lines


@pytest.mark.parametrize("case", CASES)
def test_a_damaged_release_is_named(bases, tmp_path, case):
    release, c = CASES[case]
    result, lines = outcome(release, c, bases / release.name, tmp_path / "release")
    assert result == "named", (result, lines)


def main(root: str) -> None:
    """Prints each release's counts and every case not named."""
    counts = {}
    for release in RELEASES.values():
        base = pathlib.Path(root) / release.name / "base"
        release.build(base)
        for case in release.cases():
            result, lines = outcome(release, case, base, pathlib.Path(root) / release.name / "w")
            kind = result.split(":")[0]
            counts.setdefault(release.name, {}).setdefault(kind, 0)
            counts[release.name][kind] += 1
            if kind != "named":
                print(f"  {release.name}: {case.name}: {result}; {lines[:2]}")
    for name, c in counts.items():
        print(f"{name}: {c.get('named', 0)}/{sum(c.values())} named, {c.get('silent', 0)} "
              f"silent, {c.get('unnamed', 0)} unnamed, {c.get('crashed', 0)} crashed")
    total = sum(sum(c.values()) for c in counts.values())
    print(f"all: {sum(c.get('named', 0) for c in counts.values())}/{total} named")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/fuzz_corpus")
