"""The shared training loop: early stopping in both directions, best parameters and their
evaluation, and resuming from checkpoints written before the loop was shared."""
import json
import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest
from flax.training import train_state

from ttw_jax.core.records import first_nonfinite
from ttw_jax.core.stream import NonFiniteInput
from ttw_jax.core.train.checkpoint import Checkpointer
from ttw_jax.core.train.logging import MetricWriter
from ttw_jax.core.train.loop import fit
from ttw_jax.core.train.run import evaluate_best


def config(**kw):
    c = ml_collections.ConfigDict(dict(num_steps=30, eval_every=5, log_every=5, patience=2,
                                       max_checkpoints=2))
    c.update(kw)
    return c


def start():
    return train_state.TrainState.create(apply_fn=None, params={"w": jnp.zeros(())},
                                         tx=optax.sgd(0.1))


@jax.jit
def step_fn(state, step):
    loss, g = jax.value_and_grad(lambda p: (p["w"] - 3.0) ** 2)(state.params)
    return state.apply_gradients(grads=g), {"loss": loss}


def run(tmp_path, evaluate, mode="min", **kw):
    writer = MetricWriter(str(tmp_path))
    out = fit(start(), config=config(**kw), workdir=str(tmp_path), writer=writer,
              place=lambda t: t, step_fn=step_fn, evaluate=evaluate, metric="err", mode=mode)
    writer.close()
    return out


def test_minimises_and_keeps_the_best_parameters(tmp_path):
    state, best, meta = run(tmp_path, lambda p: {"err": float(abs(p["w"] - 3.0))})
    assert meta["step"] == 30 and meta["best_step"] == 30 and not meta["stopped"]
    assert float(best["w"]) == pytest.approx(3.0, abs=1e-2)


def test_stops_after_patience_without_improvement(tmp_path):
    # Maximising |w - 3| (it shrinks every step): the first evaluation stays best.
    state, best, meta = run(tmp_path, lambda p: {"err": float(abs(p["w"] - 3.0))}, mode="max")
    assert meta["best_step"] == 5 and meta["stopped"] and meta["step"] == 15
    assert float(best["w"]) != float(state.params["w"])
    with pytest.raises(ValueError, match="mode must be"):
        fit(start(), config=config(), workdir=str(tmp_path), writer=None, place=None,
            step_fn=None, evaluate=None, metric="err", mode="best")


def test_resumes_with_the_checkpoint_bookkeeping(tmp_path):
    ckpt = Checkpointer(os.path.join(tmp_path, "checkpoints"))
    state = start()
    for s in range(1, 6):
        state, _ = step_fn(state, s)
    ckpt.save(5, {"state": state, "best_params": state.params},
              {"step": 5, "best": 0.1, "best_step": 5, "bad_evals": 0, "stopped": False})
    ckpt.close()
    _, _, meta = run(tmp_path, lambda p: {"err": float(abs(p["w"] - 3.0))}, num_steps=10)
    assert meta["step"] == 10 and meta["best"] == 0.1
    assert meta["best_step"] == 5   # |w - 3| at step 10 is not below the recorded 0.1


def test_best_eval_is_the_evaluation_at_the_best_step_also_after_a_resume(tmp_path):
    evals = []

    def evaluate(p):
        evals.append(float(p["w"]))
        return {"err": abs(float(p["w"]) - 3.0), "w": float(p["w"])}

    # Maximising |w - 3|: step 5 stays best while later evaluations run.
    _, best, meta = run(tmp_path, evaluate, mode="max", num_steps=10)
    assert meta["best_step"] == 5 and meta["best_eval"] == {"err": abs(evals[0] - 3.0),
                                                            "w": evals[0]}
    assert meta["best_eval"]["w"] == float(best["w"]) != evals[-1]
    _, _, resumed = run(tmp_path, evaluate, mode="max", num_steps=15)   # from step 10's checkpoint
    assert resumed["best_step"] == 5 and resumed["best_eval"] == meta["best_eval"]

    calls = []
    again = lambda: calls.append(1) or {"err": -1.0}
    assert evaluate_best(meta, "dev", "dev", again) == meta["best_eval"] and not calls
    assert evaluate_best(meta, "test", "dev", again) == {"err": -1.0} and calls == [1]
    assert evaluate_best({"best_eval": None}, "dev", "dev", again) == {"err": -1.0}


def test_a_non_finite_loss_stops_the_run_and_names_its_step(tmp_path):
    @jax.jit
    def diverging(state, step):
        state, metrics = step_fn(state, step)
        return state, {"loss": jnp.where(step >= 12, jnp.nan, metrics["loss"])}

    writer = MetricWriter(str(tmp_path))
    with pytest.raises(FloatingPointError, match="at step 12 .*nothing after step 10"):
        fit(start(), config=config(), workdir=str(tmp_path), writer=writer, place=lambda t: t,
            step_fn=diverging, evaluate=lambda p: {"err": float(abs(p["w"] - 3.0))},
            metric="err", mode="min")
    writer.close()
    # The last good checkpoint is there and a resumed run starts from it.
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["10", "5"]
    _, _, meta = run(tmp_path, lambda p: {"err": float(abs(p["w"] - 3.0))}, num_steps=15)
    assert meta["step"] == 15


def test_a_torn_last_metrics_line_is_dropped_on_resume(tmp_path):
    run(tmp_path, lambda p: {"err": float(abs(p["w"] - 3.0))}, num_steps=10)
    path = tmp_path / "metrics.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines) + "\n" + lines[-1][:17])   # killed mid-write
    _, _, meta = run(tmp_path, lambda p: {"err": float(abs(p["w"] - 3.0))}, num_steps=15)
    history = MetricWriter(str(tmp_path)).history()
    assert [h["step"] for h in history] == [5, 10, 15]
    # A malformed line that is not the last one is an error naming the line.
    path.write_text("{\"step\": 5}\n{oops\n{\"step\": 10}\n")
    with pytest.raises(ValueError, match="metrics.jsonl, line 2"):
        MetricWriter(str(tmp_path)).history()


def tensorboard_steps(logdir) -> set[int]:
    """Steps of the scalar events on disk (TFRecord framing: length, crc, Event proto, crc)."""
    import struct
    from tensorboardX.proto import event_pb2
    steps = set()
    for f in os.listdir(logdir):
        data = open(os.path.join(logdir, f), "rb").read()
        pos = 0
        while pos + 12 <= len(data):
            (n,) = struct.unpack("<Q", data[pos:pos + 8])
            event = event_pb2.Event.FromString(data[pos + 12:pos + 12 + n])
            if event.HasField("summary"):
                steps.add(event.step)
            pos += 12 + n + 4
    return steps


def test_tensorboard_holds_every_point_up_to_the_last_checkpoint_after_a_crash(tmp_path):
    def crash(step):
        if step == 13:
            raise KeyboardInterrupt   # killed: the writer is never closed

    writer = MetricWriter(str(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        fit(start(), config=config(log_every=1), workdir=str(tmp_path), writer=writer,
            place=lambda t: t, step_fn=step_fn, evaluate=lambda p: {"err": 0.0}, metric="err",
            mode="min", hooks=[crash])
    assert set(range(1, 11)) <= tensorboard_steps(tmp_path / "tensorboard")


def test_sigterm_checkpoints_at_the_next_sync_and_resumes_exactly(tmp_path):
    import signal as sig
    from ttw_jax.core.train.loop import Preempted

    def preempt(step):
        if step == 7:
            os.kill(os.getpid(), sig.SIGTERM)   # a TPU VM's preemption notice

    ev = lambda p: {"err": float(abs(p["w"] - 3.0))}
    writer = MetricWriter(str(tmp_path / "a"))
    with pytest.raises(Preempted) as exc:
        fit(start(), config=config(log_every=2), workdir=str(tmp_path / "a"), writer=writer,
            place=lambda t: t, step_fn=step_fn, evaluate=ev, metric="err", mode="min",
            hooks=[preempt])
    writer.close()
    assert exc.value.code == 0
    assert "8" in os.listdir(tmp_path / "a" / "checkpoints")   # the sync after step 7
    state, best, meta = run(tmp_path / "a", ev, log_every=2)
    ref_state, ref_best, ref_meta = run(tmp_path / "b", ev, log_every=2)
    assert float(state.params["w"]) == float(ref_state.params["w"])
    assert meta["best_step"] == ref_meta["best_step"] and meta["step"] == 30
    drop = lambda h: [{k: v for k, v in r.items() if "per_second" not in k} for r in h]
    assert drop(MetricWriter(str(tmp_path / "a")).history()) == \
        drop(MetricWriter(str(tmp_path / "b")).history())
    assert sig.getsignal(sig.SIGTERM) is sig.SIG_DFL   # the handler is gone after fit


@pytest.mark.parametrize("damage", ["truncate", "meta", "bitflip"])
def test_a_corrupt_latest_checkpoint_falls_back_to_an_older_one(tmp_path, damage):
    ev = lambda p: {"err": float(abs(p["w"] - 3.0))}
    run(tmp_path / "a", ev, num_steps=10)
    ten = tmp_path / "a" / "checkpoints" / "10"
    if damage == "truncate":   # every array file of the state cut to half
        files = [p for p in (ten / "train").rglob("*") if p.is_file() and p.stat().st_size > 8]
        assert files
        for p in files:
            p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    elif damage == "bitflip":  # 16 flipped bytes that orbax decodes without a word: the checksum
        data = max((p for p in (ten / "train").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
        b = bytearray(data.read_bytes())
        for i in np.random.default_rng(0).choice(np.arange(len(b) // 4, len(b) - 8), 16, replace=False):
            b[i] ^= 0x10
        data.write_bytes(bytes(b))
    else:
        for p in (ten / "meta").rglob("*"):
            if p.is_file():
                p.write_text("{not json")
    read = Checkpointer(str(tmp_path / "a" / "checkpoints"), read_only=True)
    assert read.restore_latest({"state": start(), "best_params": start().params})[1]["step"] == 5
    read.close()
    state, _, meta = run(tmp_path / "a", ev, num_steps=15)
    ref_state, _, ref_meta = run(tmp_path / "b", ev, num_steps=15)
    assert float(state.params["w"]) == float(ref_state.params["w"]) and meta == ref_meta
    names = sorted(os.listdir(tmp_path / "a" / "checkpoints"))   # the refused step kept aside
    assert names[0] == "10" and names[1].startswith("10.corrupt-") and names[2:] == ["15"]


PREEMPTIBLE = r"""
import sys, time
import jax, jax.numpy as jnp
from tests.core.test_loop import config, start, step_fn
from ttw_jax.core.train.logging import MetricWriter
from ttw_jax.core.train.loop import fit

workdir, slow = sys.argv[1], sys.argv[2] == "slow"

def step(state, s):
    if slow and s == 6:
        print("ready", flush=True)
        time.sleep(3)         # SIGTERM arrives here; the step then finishes
    return step_fn(state, s)

writer = MetricWriter(workdir)
state, best, meta = fit(start(), config=config(log_every=2), workdir=workdir, writer=writer,
                        place=lambda t: t, step_fn=step,
                        evaluate=lambda p: {"err": float(abs(p["w"] - 3.0))}, metric="err",
                        mode="min")
writer.close()
print("done", meta["step"], float(state.params["w"]), flush=True)
"""


def test_sigterm_to_a_real_process_checkpoints_and_a_rerun_finishes_the_same(tmp_path):
    import signal as sig
    import subprocess
    import sys

    from tests.conftest import ROOT
    run_script = lambda wd, mode: subprocess.Popen(
        [sys.executable, "-c", PREEMPTIBLE, str(wd), mode], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    p = run_script(tmp_path / "a", "slow")
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(sig.SIGTERM)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0 and "done" not in out, err[-2000:]
    assert "SIGTERM: checkpointed step 6" in err
    assert "6" in os.listdir(tmp_path / "a" / "checkpoints")
    resumed = run_script(tmp_path / "a", "fast").communicate(timeout=120)[0].split()
    fresh = run_script(tmp_path / "b", "fast").communicate(timeout=120)[0].split()
    assert resumed[:2] == ["done", "30"] and resumed == fresh


def test_metric_names_are_tensorboard_tags(tmp_path):
    from ttw_jax.core.train.logging import MetricWriter, check_names
    from ttw_jax.touchdown import full_task
    from ttw_jax.touchdown.sdr import metrics as sdr_metrics
    check_names({n: 0.0 for n in (*sdr_metrics.NAMES, *full_task.NAMES, "dev/acc_80", "a.b-c")})
    writer = MetricWriter(tmp_path)
    with pytest.raises(ValueError, match=r"metric names \['dev/acc@40'\] are not TensorBoard tags"):
        writer.write(1, {"dev/acc@40": 0.5, "loss": 1.0})
    writer.close()
    assert not (tmp_path / "metrics.jsonl").exists()      # nothing half-written


def test_a_non_finite_loss_names_the_examples_of_its_batch(tmp_path):
    """A NaN in one training example: the error names the examples of the batch that met it
    (the sampler's own draw, recomputed on the host) and lists them all in a file."""
    from ttw_jax.core.train import data_parallel as dp
    from ttw_jax.core.train.run import StepFn
    mesh = dp.make_mesh()
    n, bad_row = 40, 29
    x = np.arange(n, dtype=np.float32)
    x[bad_row] = np.nan
    names = [f"train.json: route_id {100 + i}" for i in range(n)]
    sampler = dp.episode_sampler({"x": x, "row": np.arange(n)}, 8, mesh, names=names)
    key = jax.random.key(3)
    drawn = jax.device_get(sampler(key))
    assert (drawn["row"] == sampler.rows(key)).all()   # the host recomputes the device's draw
    assert sampler.examples(key) == [names[r] for r in drawn["row"]]

    def train_step(state, batch, rng):
        loss = (state.params["w"] - 3.0) ** 2 + 0.0 * jnp.mean(batch["x"])
        g = jax.grad(lambda p: (p["w"] - 3.0) ** 2)(state.params)
        return state.apply_gradients(grads=g), {"loss": loss}

    step_fn = StepFn(jax.jit(train_step), sampler, (), jax.random.key(0))
    first = next(s for s in range(1, 200) if bad_row in sampler.rows(
        jax.random.split(jax.random.fold_in(step_fn.key, s))[0]))
    writer = MetricWriter(str(tmp_path))
    with pytest.raises(FloatingPointError) as e:
        fit(start(), config=config(num_steps=200, eval_every=100), workdir=str(tmp_path),
            writer=writer, place=lambda t: t, step_fn=step_fn,
            evaluate=lambda p: {"err": 0.0}, metric="err", mode="min")
    writer.close()
    msg = str(e.value)
    assert f"at step {first} " in msg and "\n" not in msg
    expected = step_fn.examples(first)
    assert names[bad_row] in expected and ", ".join(expected[:8]) in msg
    listed = json.loads((tmp_path / f"nonfinite_step_{first}.json").read_text())
    assert listed["examples"] == expected and listed["step"] == first


def test_a_non_finite_input_read_by_a_step_names_its_file_and_element(tmp_path):
    """A streamed row that is not finite (`NonFiniteInput`, raised while step 7 reads its batch)
    stops the run as a non-finite loss does, naming the file, the element and the examples that
    read that file; the checkpoint of step 5 is kept."""
    x = np.ones((4, 3), np.float32)
    x[2, 1] = np.inf
    assert first_nonfinite(x, np.float16) == ((2, 1), np.float32)
    assert first_nonfinite(x[:2], np.float16) is None
    # finite as stored, infinite as float16
    assert first_nonfinite(np.full(2, 1e5, np.float32), np.float16) == ((0,), np.float16)

    def reading(state, step):
        if step == 7:
            raise NonFiniteInput("/rel/features/b.npy", (2, 1, 0), "non-finite value nan")
        return step_fn(state, step)
    reading.examples = lambda step: [f"train: route_id {i}, /rel/features/{f}.npy"
                                     for i, f in enumerate("abcb")]
    writer = MetricWriter(str(tmp_path))
    with pytest.raises(FloatingPointError) as e:
        fit(start(), config=config(), workdir=str(tmp_path), writer=writer, place=lambda t: t,
            step_fn=reading, evaluate=lambda p: {"err": 0.0}, metric="err", mode="min")
    writer.close()
    assert str(e.value).startswith(f"non-finite training input at step 7 of {tmp_path}: "
                                   "/rel/features/b.npy: non-finite value nan; its batch: ")
    assert "nothing after step 5 was checkpointed" in str(e.value)
    report = json.loads((tmp_path / "nonfinite_step_7.json").read_text())
    assert report == {"step": 7, "loss": None, "examples": reading.examples(7), "input": {
        "file": "/rel/features/b.npy", "index": [2, 1, 0], "row": 2,
        "problem": "non-finite value nan",
        "examples": ["train: route_id 1, /rel/features/b.npy",
                     "train: route_id 3, /rel/features/b.npy"]}}


def test_profile_steps_write_a_trace_and_the_data_wait_is_logged(tmp_path):
    """`profile_steps="2,3"` leaves a `jax.profiler` trace in <workdir>/profile; a step function
    with `data_wait()` has its wait logged per step as train/data_wait_ms."""
    from ttw_jax.core.train.workdir import check_common

    def waiting(state, step):
        return step_fn(state, step)
    waiting.data_wait = lambda: 0.004 * 5        # 4 ms a step over the 5 steps of a log line
    writer = MetricWriter(str(tmp_path))
    fit(start(), config=config(num_steps=10, profile_steps="2,3"), workdir=str(tmp_path),
        writer=writer, place=lambda t: t, step_fn=waiting,
        evaluate=lambda p: {"err": float(abs(p["w"] - 3.0))}, metric="err", mode="min")
    writer.close()
    traces = [f for _, _, files in os.walk(tmp_path / "profile") for f in files
              if f.endswith(".xplane.pb")]
    assert traces, list(os.walk(tmp_path / "profile"))
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all(abs(line["train/data_wait_ms"] - 4.0) < 1e-9 for line in lines)
    for bad in ("3", "0,2", "4,3", "a,b"):
        with pytest.raises(ValueError, match="profile_steps must be two step numbers 'FIRST,LAST'"):
            check_common(config(profile_steps=bad))


def test_the_profile_window_is_two_step_numbers_and_its_error_shows_the_form():
    from ttw_jax.core.train.workdir import profile_window
    assert profile_window("") is None
    assert profile_window("21,22") == (21, 22) and profile_window("5,5") == (5, 5)
    with pytest.raises(ValueError) as e:
        profile_window("first,last")          # the placeholder typed literally
    assert str(e.value) == ("profile_steps must be two step numbers 'FIRST,LAST' (1-based, "
                            "inclusive, FIRST <= LAST), e.g. '21,22'; or '' for none; got "
                            "'first,last'")


def test_the_first_step_line_is_logged_once_and_read_by_the_launch_benchmark(tmp_path, caplog):
    """The launch benchmark (experiments/benchmarks/launch_bench.py) times the compilation cache
    from this log line; it must stay the one it parses."""
    import logging

    from experiments.benchmarks.launch_bench import FIRST_STEP
    with caplog.at_level(logging.INFO, logger="absl"):
        run(tmp_path, lambda p: {"err": float(abs(p["w"] - 3.0))}, num_steps=6)
    times = [float(t) for t in FIRST_STEP.findall(caplog.text)]
    assert len(times) == 1 and times[0] >= 0, caplog.text
