"""The shared launcher: removed config keys fail with the reason (before any work; renamed ones
are accepted for one version, tests/core/test_renamed_keys.py), `--config` finds an
experiment's config files by name from any directory, and a config or data error is one line
without a traceback (`--verbose`: with it), a bug keeps its traceback."""
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT
from ttw_jax.core.train.launch import renamed_flag_errors, resolve_config_paths


def test_renamed_keys_and_their_sections_are_named():
    renamed = {"model.kind": "model.name", "learning_rate": "optim.learning_rate"}
    argv = ["main", "--workdir=/tmp/x", "--config.model.kind=ga", "--config.learning_rate=1",
            "--config.model.hidden=3", "--config=default.py"]
    assert renamed_flag_errors(argv, renamed) == [
        "--config.model.kind: model.kind is now model.name",
        "--config.learning_rate: learning_rate is now optim.learning_rate"]
    # A section that was renamed as a whole names it for every key below it.
    assert renamed_flag_errors(["main", "--config.loss.gamma=1"], {"loss": "objective"}) == [
        "--config.loss.gamma: loss is now objective"]


def test_config_files_are_found_by_name(tmp_path):
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "r2r.py").write_text("")
    here = tmp_path / "here.py"
    here.write_text("")
    argv = ["main", "--config=r2r", "--config=r2r.py", "--config=experiments/x/configs/r2r.py",
            f"--config={here}", "--config=missing", "--workdir=r2r"]
    assert resolve_config_paths(argv, str(configs)) == [
        "main", f"--config={configs / 'r2r.py'}", f"--config={configs / 'r2r.py'}",
        f"--config={configs / 'r2r.py'}", f"--config={here}", "--config=missing", "--workdir=r2r"]


def test_launcher_refuses_a_removed_key_from_outside_the_repository(tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-m", "experiments.touchdown_sdr.main",
                          f"--workdir={tmp_path / 'run'}", "--config.data.image_width=800"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "--config.data.image_width: data.image_width is now removed: " in out.stderr
    assert not (tmp_path / "run").exists()


def test_distributed_arguments_come_from_flags_then_the_environment():
    import pytest
    from ttw_jax.core.train.launch import distributed_args
    # Nothing given: jax's own cluster detection (Cloud TPU, SLURM).
    assert distributed_args(None, None, None, env={}) == {}
    env = {"JAX_COORDINATOR_ADDRESS": "10.0.0.2:1234", "JAX_NUM_PROCESSES": "4",
           "JAX_PROCESS_ID": "3"}
    assert distributed_args(None, None, None, env=env) == {
        "coordinator_address": "10.0.0.2:1234", "num_processes": 4, "process_id": 3}
    # A flag wins over its variable.
    assert distributed_args("localhost:9", None, 0, env=env) == {
        "coordinator_address": "localhost:9", "num_processes": 4, "process_id": 0}
    with pytest.raises(ValueError, match="missing: --num_processes / JAX_NUM_PROCESSES, "
                                         "--process_id / JAX_PROCESS_ID"):
        distributed_args("localhost:9", None, None, env={})
    with pytest.raises(ValueError, match=r"process_id must be in \[0, num_processes\)"):
        distributed_args("localhost:9", 2, 2, env={})
    with pytest.raises(ValueError, match="integers"):
        distributed_args(None, None, None, env={**env, "JAX_NUM_PROCESSES": "four"})


def test_unknown_config_keys_are_named_with_the_closest_ones():
    import ml_collections
    from ttw_jax.core.train.launch import unknown_config_keys
    c = ml_collections.ConfigDict({"seed": 0, "model": {"features": 8, "name": "masc"}})
    argv = ["main", "--workdir=/x", "--config.seed=1", "--config.model.feature=3",
            "--config.nope=1", "--config.model.name=no_masc"]
    assert unknown_config_keys(argv, c) == [
        "--config.model.feature: no such config key; did you mean model.features, model.name?",
        "--config.nope: no such config key"]


def test_launcher_refuses_an_unknown_key_in_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "experiments.ttw_emergent.main",
                          f"--workdir={tmp_path}", "--config.model.feature=3"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "--config.model.feature: no such config key; did you mean model.features" in out.stderr
    # Keys of the selected config file count, not only the default one's.
    out = subprocess.run([sys.executable, "-m", "experiments.ttw_emergent.main",
                          f"--workdir={tmp_path}", "--config=paper", "--config.num_epochs=x"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "no such config key" not in out.stderr


def test_prepare_only_reads_the_data_and_trains_nothing(tmp_path):
    """`--prepare_only`: the config is checked and the data read (here the real maps' windows),
    then the run stops before its first step: no checkpoint, no metric line, no results."""
    from tests.conftest import shared_path
    out = subprocess.run([sys.executable, "-m", "experiments.ttw_emergent.main", "--prepare_only",
                          f"--workdir={tmp_path}", f"--config.data.maps_dir={shared_path('ttw', 'maps')}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "data prepared" in out.stderr and "First step" not in out.stderr
    assert not (tmp_path / "results.json").exists() and not (tmp_path / "checkpoints").exists()
    assert not (tmp_path / "metrics.jsonl").exists() or not (tmp_path / "metrics.jsonl").read_text()
    # the same refusal as a real run for a config it cannot run
    out = subprocess.run([sys.executable, "-m", "experiments.ttw_emergent.main", "--prepare_only",
                          f"--workdir={tmp_path / 'b'}", "--config.data.maps_dir=/no/such/maps"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and "/no/such/maps" in out.stderr


def test_compilation_cache_dir_flag_env_default_and_off(tmp_path):
    from ttw_jax.core.train.launch import compilation_cache_dir
    home = os.path.join(os.path.expanduser("~"), ".cache", "ttw_jax", "xla")
    assert compilation_cache_dir(None, {}) == home
    assert compilation_cache_dir(None, {"TTW_JAX_COMPILATION_CACHE": str(tmp_path)}) == str(tmp_path)
    assert compilation_cache_dir(str(tmp_path / "c"), {"TTW_JAX_COMPILATION_CACHE": "x"}) == \
        str(tmp_path / "c")
    assert compilation_cache_dir("none", {}) is None
    assert compilation_cache_dir(None, {"TTW_JAX_COMPILATION_CACHE": "None"}) is None
    # JAX's own variable wins: JAX reads it itself.
    assert compilation_cache_dir(str(tmp_path), {"JAX_COMPILATION_CACHE_DIR": "/x"}) is None


def test_allocator_env_adds_huge_pages_once():
    from ttw_jax.core.train.launch import allocator_env
    env = allocator_env({"PATH": "/bin"})
    assert env == {"PATH": "/bin", "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
    assert allocator_env({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})["GLIBC_TUNABLES"] == \
        "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
    assert allocator_env(env) is None   # the re-executed launcher runs as is
    assert allocator_env({"TTW_JAX_HUGEPAGES": "0"}) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc tunables: Linux only")
def test_reexec_with_allocator_restarts_the_process_once_with_the_tunable():
    code = ("import os, sys; print('start', os.environ.get('GLIBC_TUNABLES', ''), flush=True); "
            "from ttw_jax.core.train.launch import reexec_with_allocator; "
            "reexec_with_allocator(); print('ran', sys.argv[1:])")
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "TTW_JAX_HUGEPAGES")}
    out = subprocess.run([sys.executable, "-c", code, "x"], env=env, capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout.splitlines()
    assert out == ["start ", "start glibc.malloc.hugetlb=1", "ran ['x']"]
    out = subprocess.run([sys.executable, "-c", code], env=dict(env, TTW_JAX_HUGEPAGES="0"),
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout.splitlines()
    assert out == ["start ", "ran []"]


STOPPED_OUTSIDE_TRAINING = r"""
import sys, time
from experiments.ttw_landmarks.configs import default
from ttw_jax.core.train.launch import launch

def train_and_evaluate(config, workdir):
    print("preparing", flush=True)
    time.sleep(60)          # data preparation or the final evaluation; SIGTERM arrives here
    print("finished", flush=True)

launch(train_and_evaluate, default)
"""


def test_sigterm_outside_training_stops_the_launcher_with_status_0(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", STOPPED_OUTSIDE_TRAINING,
                             f"--workdir={tmp_path}"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "preparing"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "finished" not in out
    assert "SIGTERM outside training" in err


def message_lines(stderr: str) -> list[str]:
    """stderr without absl's log lines (`I1206 16:39:42.80 ... file.py:12] ...`)."""
    return [line for line in stderr.splitlines()
            if line.strip() and not re.match(r"[IWEF]\d{4} \d\d:\d\d:\d\d", line)]


def test_config_and_data_errors_are_one_line_and_bugs_keep_their_traceback():
    from absl import app
    from ttw_jax.core.records import RecordFormatError
    from ttw_jax.core.train.launch import distributed_args, error_line, one_line

    def raised(fn):
        try:
            fn()
        except Exception as e:   # noqa: BLE001
            return e
    # a check of the project's own code: one line
    e = raised(lambda: distributed_args("x:1", None, None, env={}))
    assert error_line(e).startswith("--multihost: give all of --coordinator_address")
    assert error_line(raised(lambda: open("/no/such/file.json"))) == \
        "[Errno 2] No such file or directory: '/no/such/file.json'"
    assert error_line(RecordFormatError("a.json:3: missing field 'x'\n(the release's)")) == \
        "a.json:3: missing field 'x'; (the release's)"
    assert error_line(app.UsageError("renamed:\n--config.a: a is now b")) == \
        "renamed: --config.a: a is now b"
    # raised by numpy, by an unpacking, or of another kind: a bug, with its traceback
    assert error_line(raised(lambda: np.zeros(-1))) is None
    assert error_line(raised(lambda: [a for a, b in [(1, 2, 3)]])) is None
    assert error_line(raised(lambda: {}["x"])) is None
    assert one_line("flag --config.T=" + "9" * 5000 + ": too long") == \
        "flag --config.T=999999999999... (5,000 digits): too long"


def test_numeric_overrides_that_overflow_are_named_by_their_key():
    import ml_collections
    from ttw_jax.core.train.launch import numeric_override_errors, verbose_requested
    c = ml_collections.ConfigDict({"T": 3, "flag": False, "optim": {"learning_rate": 1e-3},
                                   "name": "x"})
    argv = ["main", "--config.T=" + "9" * 1_000_000, "--config.T=-9223372036854775809",
            "--config.T=9223372036854775807", "--config.T=0009", "--config.T=abc",
            "--config.optim.learning_rate=1e400", "--config.optim.learning_rate=-inf",
            "--config.optim.learning_rate=1e308", "--config.flag=1", "--config.name=1e400"]
    assert numeric_override_errors(argv, c) == [
        "--config.T: 999999999999999999999999... (1,000,000 characters) is outside the 64-bit "
        "integer range [-2^63, 2^63)",
        "--config.T: -9223372036854775809 is outside the 64-bit integer range [-2^63, 2^63)",
        "--config.optim.learning_rate: 1e400 overflows a 64-bit float (the largest is "
        "1.798e+308)"]
    assert verbose_requested(["m", "--verbose"]) and not verbose_requested(["m"])
    assert not verbose_requested(["m", "--verbose", "--noverbose"])


def launched(tmp_path, *args):
    env = {**os.environ, "TTW_JAX_HUGEPAGES": "0"}
    return subprocess.run([sys.executable, "-m", "experiments.touchdown_sdr.main",
                           f"--workdir={tmp_path / 'run'}", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_bad_override_is_one_line_naming_its_key(tmp_path):
    out = launched(tmp_path, "--config.optim.learning_rate=1e400")
    assert out.returncode == 2 and message_lines(out.stderr) == [
        "--config.optim.learning_rate: 1e400 overflows a 64-bit float (the largest is "
        "1.798e+308)"]
    out = launched(tmp_path, "--config.num_steps=12x")      # ml_collections' own parse error
    assert out.returncode == 2 and message_lines(out.stderr) == [
        "flag --config.num_steps=12x: invalid literal for int() with base 10: '12x'"]


def test_a_malformed_record_file_is_one_line_naming_file_and_line(tmp_path):
    (tmp_path / "release").mkdir()
    (tmp_path / "release" / "train.json").write_text('{"route_id": 1}\n')
    args = ("--config.mode=baselines", f"--config.data.manual_dir={tmp_path / 'release'}")
    out = launched(tmp_path, *args)
    line = f"{tmp_path / 'release' / 'train.json'}:1: missing field 'navigation_text'"
    assert out.returncode == 1 and message_lines(out.stderr) == [line]
    out = launched(tmp_path, *args, "--verbose")             # the traceback, then the line
    assert out.returncode == 1 and "Traceback (most recent call last)" in out.stderr
    assert message_lines(out.stderr)[-1] == line


def test_a_missing_config_file_is_one_line_naming_the_configs(tmp_path):
    from ttw_jax.core.train.launch import missing_config_files
    (tmp_path / "paper.py").write_text("")
    (tmp_path / "default.py").write_text("")
    assert missing_config_files(["m", f"--config={tmp_path / 'paper.py'}:x"], str(tmp_path)) \
        is None
    assert missing_config_files(["m", "--config=/no/such.py"], str(tmp_path)) == (
        f"--config=/no/such.py: no such config file, nor one of that name in {tmp_path} "
        "(default, paper)")
