r"""The accelerator check: one prepared run for a lent GPU (or TPU) machine, about 8 minutes.

  bash experiments/benchmarks/device_check.sh [OUT]            (the same as the next line)
  python -m experiments.benchmarks.device_check --out=/tmp/device_check [--data_dir=DIR]
  python -m experiments.benchmarks.device_check --smoke --out=/tmp/dc   (a CPU, small sizes)

Parts, in order, each a subprocess with its own time limit, so that a slow or failing part
leaves the others' results:

0. preflight (seconds, before anything is timed): stops with exit status 2 when JAX sees no
   accelerator (printing the install lines for GPU and TPU JAX), or when the data the rows read
   is missing (naming the files and how to bring them to a lent machine);
1. prepare: every launcher's datasets built (`--prepare_only`: the config checked and the data
   of the first stage read, nothing trained), several at once on the host's CPU;
2. the device-sized rows of `run_all` (simulators at 262,144 episodes, RCM at 16,384, MASC at
   batch 4,096 and LingUNet at 64, both dtypes), one part per row group;
3. the same steps at the CPU table's sizes, for comparison with it;
4. each launcher's default config for 30 steps in bfloat16 (`--dtypes=float32,bfloat16` for
   both), with a profile of two steps (the language pipeline with every stage bounded the same
   way);
5. `OUT/device_check.json`: each part's status (ok, timed out after its limit, or failed with
   its exit status and last error line), the rows, and per launcher and dtype the training
   steps per second and the data wait per step (`experiments.benchmarks.device_summary`).

`--smoke` runs the same parts on a CPU at test sizes (device rows at `--device_sizes=small`,
launchers for a few steps, the language pipeline left out) in a fresh TFDS folder: a test runs
it, so the script cannot rot between the rare lent machines.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from absl import app, flags

from experiments.benchmarks.measure import REPO, SHARED

LAUNCHERS = ("ttw_emergent", "touchdown_nav", "touchdown_sdr", "rxr", "arramon")
DTYPES = ("float32", "bfloat16")
INSTALL = """JAX sees no accelerator (jax.default_backend() is 'cpu'); install the accelerator build:
  NVIDIA GPU (CUDA 13):  pip install -U "jax[cuda13]"
  NVIDIA GPU (CUDA 12):  pip install -U "jax[cuda12]"
  Google TPU:            pip install -U "jax[tpu]"
then check with: python -c "import jax; print(jax.devices())"
(--smoke runs this check on a CPU at test sizes)"""
# What the rows and launchers read from the shared data folder (`--data_dir`).
DATA = {"touchdown/graph/nodes.txt": "the Touchdown simulator row",
        "touchdown/graph/links.txt": "the Touchdown simulator row",
        "matterport/connectivity": "the RCM rows and the RxR launcher"}


@dataclasses.dataclass
class Part:
    name: str
    argv: list            # the python -m module and its arguments
    limit_s: float
    group: str            # preflight | prepare | device | cpu | launcher


def missing_data(data_dir: str) -> list[str]:
    """The entries of `DATA` that `data_dir` lacks, each with what needs it."""
    return [f"{os.path.join(data_dir, rel)} ({why})" for rel, why in DATA.items()
            if not os.path.exists(os.path.join(data_dir, rel))]


# --smoke: test sizes (those of tests/experiments/trainers.py), the same code path.
SMOKE = {
    "ttw_emergent": ["--config.model.features=16", "--config.batch_size=16",
                     "--config.full_task.repeats=1", "--config.full_task.max_steps=20"],
    "touchdown_nav": ["--config.model.text_hidden=32", "--config.model.hidden=32",
                      "--config.model.conv_features=8", "--config.batch_size=16",
                      "--config.data.eval_splits=test", "--config.eval.baselines=random"],
    "touchdown_sdr": ["--config.model.channels=8", "--config.model.mlp_hidden=8",
                      "--config.model.hidden=8", "--config.model.embed_dim=16",
                      "--config.batch_size=16", "--config.data.eval_splits=test",
                      "--config.num_heatmaps=2"],
    "rxr": ["--config.model.embed_dim=16", "--config.model.hidden=32", "--config.batch_size=16",
            "--config.train_horizon=6", "--config.eval.horizon=8",
            "--config.eval.baselines=random_walk", "--config.eval.baseline_seeds=1"],
    "arramon": ["--config.model.embed_dim=16", "--config.model.action_dim=8",
                "--config.model.hidden=32", "--config.batch_size=16", "--config.eval.horizon=20",
                "--config.eval.perfect_navigation=False"],
}


def launcher_flags(name: str, data_dir: str) -> list[str]:
    """The flags a launcher's default config needs beyond its defaults."""
    if name == "rxr":
        return [f"--config.data.connectivity_dir={os.path.join(data_dir, 'matterport', 'connectivity')}"]
    return []


def language_flags(steps: int) -> list[str]:
    """The language pipeline bounded: one context, one generated-guide T, no MASC comparison,
    every stage `steps` long."""
    out = ["--config.contexts=1", "--config.compare_masc=False", "--config.generated.Ts=2",
           "--config.generated.human_trajectories=False", "--config.pg.T=2",
           "--config.full_task.repeats=1", "--config.full_task.splits=valid",
           "--config.eval.num_walks=256", "--config.eval.beam_sizes=1"]
    for stage in ("tourist", "guide", "generated", "pg"):
        out += [f"--config.{stage}.num_steps={steps}", f"--config.{stage}.eval_every={steps}"]
    return out


def parts(out: str, data_dir: str, smoke: bool, dtypes: tuple = DTYPES) -> list[Part]:
    """Every part of the check, in order (see the module docstring); the launchers train in
    each of `dtypes`."""
    steps, profile = (4, "3,4") if smoke else (30, "21,22")
    train = [f"--config.num_steps={steps}", f"--config.eval_every={steps}",
             f"--config.log_every={2 if smoke else 10}", f"--config.profile_steps={profile}"]
    got: list[Part] = []
    for name in LAUNCHERS + (() if smoke else ("ttw_language",)):
        extra = language_flags(steps) if name == "ttw_language" else train
        got.append(Part(f"prepare_{name}", [
            f"experiments.{name}.main", "--prepare_only",
            f"--workdir={os.path.join(out, 'prepare', name)}",
            *launcher_flags(name, data_dir), *extra], 90 if smoke else 240, "prepare"))
    sizes = "small" if smoke else "on"
    for bench, limit in (("device_envs", 90), ("device_rcm", 60), ("device_masc", 90),
                         ("device_lingunet", 90)):
        got.append(Part(bench, ["experiments.benchmarks.run_all", "--quick" if smoke else "",
                                f"--only={bench}", f"--device_sizes={sizes}",
                                f"--data_dir={data_dir}",
                                f"--json={os.path.join(out, 'rows', bench + '.json')}"],
                        limit * (2 if smoke else 1), "device"))
    if not smoke:
        for bench in ("device_masc", "device_lingunet"):
            got.append(Part(f"{bench}_cpu_sizes", [
                "experiments.benchmarks.run_all", f"--only={bench}", "--device_sizes=cpu",
                f"--data_dir={data_dir}",
                f"--json={os.path.join(out, 'rows', bench + '_cpu_sizes.json')}"], 60, "cpu"))
    for name in LAUNCHERS + (() if smoke else ("ttw_language",)):
        for dtype in dtypes:
            extra = (language_flags(steps) + [f"--config.log_every=10",
                                             f"--config.profile_steps={profile}"]
                     if name == "ttw_language" else train)
            got.append(Part(f"{name}_{dtype}", [
                f"experiments.{name}.main",
                f"--workdir={os.path.join(out, 'launchers', f'{name}_{dtype}')}",
                *launcher_flags(name, data_dir), *extra, *(SMOKE.get(name, []) if smoke else []),
                f"--config.dtype={dtype}"],
                (120 if smoke else 60) * (2 if name == "ttw_language" else 1), "launcher"))
    for p in got:
        p.argv = [a for a in p.argv if a]
    return got


def run_part(part: Part, out: str, env: dict) -> dict:
    """Runs `part` under its limit; its output goes to OUT/logs/<name>.log. Returns its status:
    {name, group, status: ok | timeout | failed, seconds, limit_s, and for a failure the exit
    status and the last error line}."""
    log = os.path.join(out, "logs", part.name + ".log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    t = time.perf_counter()
    with open(log, "w", encoding="utf-8") as f:
        f.write("python -m " + " ".join(part.argv) + "\n")
        f.flush()
        try:
            code = subprocess.run([sys.executable, "-m", *part.argv], cwd=REPO, env=env,
                                  stdout=f, stderr=subprocess.STDOUT,
                                  timeout=part.limit_s, check=False).returncode
        except subprocess.TimeoutExpired:
            code = None
    status = {"name": part.name, "group": part.group, "limit_s": part.limit_s,
              "seconds": round(time.perf_counter() - t, 1)}
    if code is None:
        status.update(status="timeout", why=f"stopped at its {part.limit_s:.0f} s limit")
    elif code == 0:
        status["status"] = "ok"
    else:
        lines = [x.strip() for x in open(log, encoding="utf-8", errors="replace") if x.strip()]
        errors = [x for x in lines if "Error" in x or "error" in x] or lines[-1:]
        status.update(status="failed", exit=code, why=errors[-1][:300] if errors else "")
    print(f"[{part.name}: {status['status']}, {status['seconds']:.0f} s]", flush=True)
    return status


def check(out: str, data_dir: str, smoke: bool, only: str = "", dtypes: tuple = DTYPES,
          jobs: int = 0) -> int:
    """Runs the check (the parts or groups named in `only`, comma-separated; all by default;
    the launchers in each of `dtypes`); the prepare parts run `jobs` at a time (default: half
    the CPU cores) on the host's CPU, data preparation being CPU work. Returns the exit status
    (0 ok, 1 a part failed or timed out, 2 the preflight stopped it)."""
    import jax
    backend = jax.default_backend()
    if backend == "cpu" and not smoke:
        print(INSTALL, file=sys.stderr)
        return 2
    if missing := missing_data(data_dir):
        print("device_check: missing data (point --data_dir at the shared data folder; on a "
              "lent machine copy these into a folder of the repository that .git/info/exclude "
              "ignores and carry it):\n  " + "\n  ".join(missing), file=sys.stderr)
        return 2
    os.makedirs(os.path.join(out, "rows"), exist_ok=True)
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false",
               TTW_JAX_COMPILATION_CACHE=os.path.join(out, "xla_cache"))
    if smoke:   # built here, so the test covers building; one CPU device, CPU-sized work
        env.update(TFDS_DATA_DIR=os.path.join(out, "tfds"), JAX_PLATFORMS="cpu",
                   XLA_FLAGS=" ".join(f for f in env.get("XLA_FLAGS", "").split()
                                      if "force_host_platform_device_count" not in f))
    chosen = [p for p in parts(out, data_dir, smoke, dtypes)
              if not only or {p.name, p.group} & set(only.split(","))]
    if not chosen:
        print(f"device_check: no part named {only!r}", file=sys.stderr)
        return 2
    prepare = [p for p in chosen if p.group == "prepare"]
    with ThreadPoolExecutor(max(1, jobs or (os.cpu_count() or 2) // 2)) as pool:
        statuses = list(pool.map(lambda p: run_part(p, out, dict(env, JAX_PLATFORMS="cpu")),
                                 prepare))
    statuses += [run_part(p, out, env) for p in chosen if p.group != "prepare"]
    from experiments.benchmarks.device_summary import summarize
    summary = summarize(out)
    summary.update(backend=backend, smoke=smoke, data_dir=data_dir, parts=statuses)
    with open(os.path.join(out, "device_check.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    print(json.dumps({p["name"]: p["status"] for p in statuses}, indent=1))
    return 0 if all(p["status"] == "ok" for p in statuses) else 1


def main(argv):
    del argv
    F = flags.FLAGS
    sys.exit(check(F.out, F.data_dir, F.smoke, F.parts, tuple(F.dtypes.split(",")), F.jobs))


if __name__ == "__main__":
    flags.DEFINE_string("out", os.environ.get("OUT") or "/tmp/device_check",
                        "Where the logs, rows, launcher folders and device_check.json go.")
    flags.DEFINE_string("data_dir", SHARED, "The shared data folder (touchdown/graph, "
                        "matterport/connectivity; ttw/maps and arramon/val_seen.json optional).")
    flags.DEFINE_bool("smoke", False, "On a CPU at test sizes: the same parts, small.")
    flags.DEFINE_string("dtypes", "bfloat16", "The launchers' dtypes (float32,bfloat16 for "
                        "both; the device rows always run both).")
    flags.DEFINE_integer("jobs", 0, "Prepare parts at a time (0: half the CPU cores).")
    flags.DEFINE_string("parts", "", "Only these parts or groups (comma-separated: e.g. "
                        "prepare,device or rxr_bfloat16); all by default.")
    app.run(main)
