"""Test set-up: 8 fake CPU devices, a per-session compilation cache, and the real data beside the
checkout (`../shared/data`)."""
import os

# On 2 cores the 8 devices' threads can reach a collective tens of seconds apart (a compile on the
# other pytest-xdist worker holds a core), and XLA:CPU aborts the process when a collective's
# rendezvous waits past its termination timeout: an SDR seed test's worker died that way with
# "Fatal Python error: Aborted". The timeouts are raised so that a late thread is waited for.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8"
                           " --xla_cpu_collective_call_warn_stuck_timeout_seconds=120"
                           " --xla_cpu_collective_call_terminate_timeout_seconds=900").strip()
# Most of XLA's optimisations off (LLVM at -O0, its expensive passes skipped) unless
# JAX_DISABLE_MOST_OPTIMIZATIONS says otherwise: the suite's time is mostly compiling small
# programs, and LLVM's passes take much of each compile (`experiments.benchmarks.compile_overhead`:
# XLA's part for a trivial function 66.4 -> 27.5 ms, a 3-layer gradient 131.7 -> 63.8 ms). A run
# whose steps repay the optimisations turns them on (`xla_optimizations(True)`, a trainer's
# `xla_optimized`): Touchdown's CNN agents above all, whose gradient convolutions XLA emits as
# its own loops (tests/touchdown/test_extraction.py's RGB run, one device: 93 s without, 45 s
# with).
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
# XLA:CPU's older fusion emitters (`--xla_cpu_use_fusion_emitters=false`) unless XLA_FLAGS names
# them: the newer ones build an MLIR context per program, which costs a small program about half
# its XLA compile (`experiments.benchmarks.compile_overhead`, optimisations off: a trivial
# function 27.5 -> 14.7 ms, a 3-layer gradient 63.8 -> 32.6 ms); on five model-test modules
# (79 tests, the large overfit programs with the optimisations on included) 286 s -> 212 s.
if "--xla_cpu_use_fusion_emitters" not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] += " --xla_cpu_use_fusion_emitters=false"
# A persistent compilation cache for the session, shared by the pytest-xdist workers (they inherit
# the variable): the trainer tests compile the same programs again when they crash and resume a
# run, and that recompilation dominated their time. The process that made it removes it.
_OWN_CACHE = None
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    import tempfile
    _OWN_CACHE = os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="ttw_jax_cache_")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

# Subprocess launchers start with glibc's huge-page tunable (see `launch.allocator_env`) rather
# than re-executing themselves to set it.
if "glibc.malloc.hugetlb" not in os.environ.get("GLIBC_TUNABLES", ""):
    os.environ["GLIBC_TUNABLES"] = ":".join(
        t for t in (os.environ.get("GLIBC_TUNABLES", ""), "glibc.malloc.hugetlb=1") if t)

import contextlib  # noqa: E402
import shutil  # noqa: E402

import pytest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data")


def pytest_addoption(parser):
    group = parser.getgroup("ttw-jax learning tests")
    group.addoption("--learning-seed", type=int, default=0,
                    help="the seed offset of the learning tests (those using the `learned` "
                         "fixture, marked `learning`): their initial parameters, their sampling "
                         "keys and the seeds of the trainer runs they read")
    group.addoption("--learning-log", default="",
                    help="a JSON-lines file: each learning test appends its final metrics, "
                         "their bounds, the seed and XLA_FLAGS (tests/learning_spread.py)")
    group.addoption("--compile-log", default="",
                    help="a JSON-lines file: each test appends its wall time, the seconds JAX "
                         "spent tracing, lowering, compiling (XLA) and reading the compilation "
                         "cache, and the number of programs XLA compiled "
                         "(experiments/benchmarks/suite_time.py tables it)")


@pytest.hookimpl(tryfirst=True)
def pytest_itemcollected(item):
    """A test that uses the `learned` fixture is a learning test: marked `learning`."""
    if "learned" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.learning)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`--dist loadscope --no-loadscope-reorder`, set in pyproject.toml) the
    two workers take whole classes and modules in the order of their first test: the trainer
    contracts first, then the other slow tests, so that the long runs start early and the short
    ones fill in at the end."""
    if not hasattr(config, "workerinput"):
        return

    def rank(item):
        cls = getattr(item, "cls", None)
        if cls is not None and any(c.__name__ == "TrainerContract" for c in cls.__mro__[1:]):
            return 0
        return 1 if item.get_closest_marker("slow") is not None else 2
    items.sort(key=rank)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With `--compile-log`: the test's setup, call and teardown under a jax.monitoring listener;
    one line {test, wall, trace, lower, compile, cache_read (seconds), programs} appended."""
    path = item.config.getoption("compile_log")
    if not path:
        yield
        return
    import json
    import time
    from jax import monitoring
    from experiments.benchmarks.suite_time import COMPILE_EVENTS
    totals = dict.fromkeys(COMPILE_EVENTS.values(), 0.0)
    counts = {"programs": 0}

    def listen(event, duration, **_):
        name = COMPILE_EVENTS.get(event)
        if name is not None:
            totals[name] += duration
            counts["programs"] += name == "compile"
    monitoring.register_event_duration_secs_listener(listen)
    start = time.perf_counter()
    try:
        yield
    finally:
        monitoring.unregister_event_duration_listener(listen)
        row = {"test": item.nodeid, "wall": round(time.perf_counter() - start, 3),
               **{k: round(v, 3) for k, v in totals.items()}, **counts}
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


def pytest_sessionfinish(session):
    if _OWN_CACHE and not hasattr(session.config, "workerinput"):
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)


def shared_path(*parts: str) -> str:
    """Path under ../shared/data; a test needing it fails in CI and is skipped elsewhere if absent."""
    path = os.path.join(SHARED_DATA, *parts)
    if not os.path.exists(path):
        if os.environ.get("CI"):
            pytest.fail(f"shared data missing in CI: {path}")
        pytest.skip(f"shared data not available: {path}")
    return path


@pytest.fixture
def learning_seed(request) -> int:
    """The seed offset of a learning test (`--learning-seed`, 0 in CI): it shifts the test's
    initial parameters and sampling keys, so that `tests/learning_spread.py` can measure how far
    its final metrics spread over seeds as well as over CPU instruction sets."""
    return request.config.getoption("learning_seed")


@pytest.fixture
def learned(request, learning_seed):
    """learned(name=(value, op, bound), ...): a learning test's final metrics, checked against
    their bounds (op one of < <= > >= ==) after all are appended to `--learning-log` (with the
    test, its seed and XLA_FLAGS). Using it marks the test `learning`."""
    from tests.helpers import Learned
    return Learned(request.node.nodeid, learning_seed, request.config.getoption("learning_log"))


@pytest.fixture
def real_maps_dir() -> str:
    return shared_path("ttw", "maps")


@contextlib.contextmanager
def xla_optimizations(enabled: bool):
    """XLA's optimisations on or off inside the block (`jax_disable_most_optimizations`), then
    as they were."""
    import jax
    old = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", not enabled)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", old)


@pytest.fixture(scope="module")
def fast_compile():
    """For modules of tiny models, where compilation dominates the time: skips most XLA
    optimisations for the module (`pytestmark = pytest.mark.usefixtures("fast_compile")`), also
    when the session turns them on (JAX_DISABLE_MOST_OPTIMIZATIONS=0)."""
    with xla_optimizations(False):
        yield


@pytest.fixture
def fast_compile_unless_slow(request):
    """The same per test, except for tests marked slow (overfitting, end-to-end), which compile
    as the session does (`pytestmark = pytest.mark.usefixtures("fast_compile_unless_slow")`;
    the session's default is off) -- unless marked `fast_compile` too."""
    if (request.node.get_closest_marker("slow") is not None
            and request.node.get_closest_marker("fast_compile") is None):
        yield
        return
    with xla_optimizations(False):
        yield


@pytest.fixture(scope="session")
def tfds_dir(tmp_path_factory) -> str:
    """One TFDS data directory for the session: each builder config is prepared there once."""
    return str(tmp_path_factory.mktemp("tfds"))


@pytest.fixture(scope="session")
def trained(tmp_path_factory, tfds_dir, pytestconfig):
    """trained(name) -> (workdir, results) of experiment `name`'s tiny config
    (`tests/experiments/trainers.py`; its seed shifted by `--learning-seed`), trained once per
    session and shared by its tests. It trains with XLA's optimisations as the trainer's
    `xla_optimized` says, whichever module asks first, so that the contract's resumed runs
    (compiled the same way) reproduce it exactly."""
    from tests.experiments.trainers import TRAINERS
    seed = pytestconfig.getoption("learning_seed")
    runs = {}

    def get(name: str):
        if name not in runs:
            trainer = TRAINERS[name]
            workdir = str(tmp_path_factory.mktemp(name))
            with xla_optimizations(trainer.xla_optimized):
                runs[name] = workdir, trainer.train.train_and_evaluate(
                    trainer.config(tfds_dir, seed), workdir)
        return runs[name]
    return get
