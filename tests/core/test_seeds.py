"""Seeds on one array axis (`ttw_jax.core.train.seeds`): the vmapped step, the loop with per-seed
selection and early stopping, the `s<seed>/` layout and table, and the sequential fallback."""
import json

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax.training import train_state
import optax

from ttw_jax.core.train import data_parallel as dp, seeds
from ttw_jax.core.train.run import INIT, Run

# Scripted dev scores per seed and evaluation: seed 0 peaks at its 2nd evaluation and stops
# after 2 more (patience 2, at step 16); seed 1 keeps improving to the end (step 24).
SCORES = {0: [0.1, 0.5, 0.4, 0.3, 0.9, 0.9], 1: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}


def config(seed=0, n=1):
    return ml_collections.ConfigDict(dict(
        seed=seed, num_seeds=n, batch_size=8, num_steps=24, eval_every=4, log_every=2,
        patience=2, max_checkpoints=2, eval=dict(metric="score", mode="max")))


def loss_fn(params, batch, rng, shift):
    pred = batch["x"] @ params["w"] + shift
    noise = 0.01 * jax.random.normal(rng, ())
    loss = jnp.mean((pred - batch["y"]) ** 2) + noise
    return loss, {"loss": loss}


def train(cfg, workdir, hooks=(), memory_limit=None):
    """A tiny trainer on the seed axis: a seed-dependent const, a shared sampler, scripted
    evaluations that depend on the seed (so selection and stopping differ per seed). With
    `memory_limit` (bytes) its seeds must fit there (`seeds.check_fits`)."""
    run = Run.start(cfg, workdir, parallel_seeds=True)
    data = {"x": np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)}
    data["y"] = data["x"] @ np.array([1.0, -2.0, 0.5], np.float32)
    tx = optax.adam(0.05)
    state = run.stack(run.per_seed(lambda r: train_state.TrainState.create(
        apply_fn=None, params={"w": jax.random.normal(r.key(INIT), (3,))}, tx=tx)))
    shift = run.per_seed(lambda r: jnp.float32(r.config.seed * 0.1))
    step, consts = run.train_step(loss_fn, shift)
    sample = dp.episode_sampler(data, 8, run.mesh)

    step_fn = run.step_fn(step, sample, *consts)
    if run.seeds and memory_limit is not None:
        seeds.check_fits(step, lambda: (state, *step_fn.batch(1), *consts), memory_limit)
    now = {"step": 0}     # the scores follow the step, so a resumed run scores alike

    def evaluator(r):
        def evaluate(params):
            return {"score": SCORES[r.config.seed][now["step"] // cfg.eval_every - 1],
                    "w0": float(params["w"][0])}
        return evaluate

    state, best, meta = run.fit(state, step_fn, run.per_seed(evaluator),
                                hooks=[lambda s: now.update(step=s), *hooks])

    def report(r, best, meta):
        return r.finish({"config": r.config.to_dict(), "best_step": meta["best_step"],
                         "last_step": meta["step"], "w": np.asarray(best["w"]).tolist(),
                         "dev": meta["best_eval"]}, "done", {})
    return run.each_seed(report, best, meta, name="toy")


@pytest.fixture(autouse=True)
def no_provenance(monkeypatch):
    monkeypatch.setattr("ttw_jax.core.train.provenance.finalize", lambda r, p: r)
    monkeypatch.setattr("ttw_jax.core.train.provenance.title", lambda p: "")


def test_two_seeds_in_one_program_are_their_separate_runs(tmp_path):
    separate = [train(config(seed=s), tmp_path / f"sep{s}") for s in (0, 1)]
    both = train(config(seed=0, n=2), tmp_path / "both")
    assert both["seeds"] == [0, 1]
    assert [(r["best_step"], r["last_step"]) for r in separate] == [(8, 16), (24, 24)]
    for s, sep in enumerate(separate):
        got = json.loads((tmp_path / "both" / f"s{s}" / "results.json").read_text())
        # each seed's batch over 4 of the 8 devices (2 seed groups), not 8: the gradient's sum
        # is taken in another order, so the parameters agree to float32 rounding
        want = json.loads(json.dumps(sep))
        assert got["w"] == pytest.approx(want["w"], rel=1e-6), s
        assert got["config"] == want["config"], s
        assert seeds.numbers(got) == pytest.approx(seeds.numbers(want), rel=1e-6), s
        assert got["config"]["seed"] == s and got["config"]["num_seeds"] == 1
        # its metrics end where its separate run's do (seed 0 stopped at step 16)
        rows = [json.loads(x) for x in (tmp_path / "both" / f"s{s}" / "metrics.jsonl").open()]
        sep_rows = [json.loads(x) for x in (tmp_path / f"sep{s}" / "metrics.jsonl").open()]
        assert [r["step"] for r in rows] == [r["step"] for r in sep_rows]
        assert [r["train/loss"] for r in rows] == pytest.approx(
            [r["train/loss"] for r in sep_rows], rel=1e-6)
    table = json.loads((tmp_path / "both" / "sweep.json").read_text())
    assert table["parallel"] and table["seeds"] == [0, 1]
    assert table["summary"]["last_step"] == [20.0, 4.0]
    assert "| (run) |" in (tmp_path / "both" / "sweep.md").read_text()


def test_a_killed_parallel_run_resumes_to_the_same_results(tmp_path):
    whole = train(config(n=2), tmp_path / "whole")

    def crash(step):
        if step == 13:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        train(config(n=2), tmp_path / "killed", hooks=[crash])
    resumed = train(config(n=2), tmp_path / "killed")
    assert resumed["runs"] == whole["runs"]


@pytest.mark.parametrize("n, groups", [(3, 1), (4, 4)])
def test_the_vmapped_step_is_each_seeds_step(n, groups):
    """N seeds on the 8 devices' ('seeds', 'data') mesh: gcd(N, 8) groups, each holding only
    its seeds' parameters and training them on its devices' shards of their batches."""
    mesh = dp.make_mesh()
    tx = optax.sgd(0.1)
    states = [train_state.TrainState.create(apply_fn=None, params={"w": jnp.full(3, s + 1.0)},
                                            tx=tx) for s in range(n)]
    batches = [{"x": jnp.ones((8, 3)) * (s + 1), "y": jnp.zeros(8)} for s in range(n)]
    keys = [jax.random.key(s) for s in range(n)]
    shift = jnp.float32(0.5)
    one = dp.make_train_step(loss_fn, mesh, donate=False, num_consts=1)
    many = dp.make_train_step(loss_fn, mesh, donate=False, num_consts=1, seed_axes=(None,),
                              num_seeds=n)
    assert dict(many.mesh.shape) == {"seeds": groups, "data": 8 // groups}
    stacked, metrics = many(seeds.stack(states), seeds.stack(batches), jnp.stack(keys), shift)
    assert metrics["loss"].shape == (n,)
    w = stacked.params["w"]
    assert w.sharding.spec == jax.sharding.PartitionSpec("seeds")
    assert {s.data.shape for s in w.addressable_shards} == {(n // groups, 3)}
    for i in range(n):
        s, m = one(states[i], batches[i], keys[i], shift)
        np.testing.assert_allclose(seeds.take(stacked, i).params["w"], s.params["w"], rtol=1e-6)
        np.testing.assert_allclose(metrics["loss"][i], m["loss"], rtol=1e-6)
    with pytest.raises(ValueError, match="one entry per const"):
        dp.make_train_step(loss_fn, mesh, num_consts=1, seed_axes=())


def test_a_trainer_off_the_seed_axis_runs_its_seeds_in_turn(tmp_path):
    calls = []

    @seeds.sequential_seeds("toy")
    def train_and_evaluate(config, workdir):
        calls.append((config.seed, config.num_seeds, str(workdir)))
        with pytest.raises(ValueError, match="not on the seed axis"):
            Run.start(ml_collections.ConfigDict(dict(config.to_dict(), num_seeds=2)),
                      tmp_path / "refused")
        return {"config": config.to_dict(), "score": float(config.seed)}

    out = train_and_evaluate(config(seed=3, n=2), tmp_path / "w")
    assert out["seeds"] == [3, 4] and out["summary"]["score"] == (3.5, 0.5)
    assert calls == [(3, 1, str(tmp_path / "w" / "s3")), (4, 1, str(tmp_path / "w" / "s4"))]
    table = json.loads((tmp_path / "w" / "sweep.json").read_text())
    assert not table["parallel"]
    assert train_and_evaluate(config(seed=3), tmp_path / "one")["score"] == 3.0


def test_seeds_that_do_not_fit_in_memory_train_in_turn(tmp_path, caplog):
    """`check_fits` measures the compiled seed-axis step (XLA's memory analysis) against the
    device's memory; over it, `SeedsApart` sends the seeds to `sequential_seeds`, which trains
    them one after another into the same layout and results."""
    one = seeds.program_memory(dp.make_train_step(loss_fn, dp.make_mesh(), num_consts=1),
                               *_toy_args())
    assert one is not None and one > 0
    wrapped = seeds.sequential_seeds("toy", when=lambda c: False)(
        lambda c, w: train(c, w, memory_limit=one))      # room for one seed, not two
    apart = wrapped(config(n=2), tmp_path / "apart")
    assert "trains its 2 seeds one after another (2 seeds in one program need" in caplog.text
    assert not json.loads((tmp_path / "apart" / "sweep.json").read_text())["parallel"]
    together = train(config(n=2), tmp_path / "together")       # no limit: one program
    # the vmapped step's batched matmuls may round differently from the plain ones (with XLA's
    # optimisations off, dev/w0's mean 1.0736361 against 1.0736360, its std over the seeds
    # 0.0336416 against 0.0336417): equal to 1e-5 relative
    assert apart["summary"].keys() == together["summary"].keys()
    for k, v in together["summary"].items():
        assert apart["summary"][k] == pytest.approx(v, rel=1e-5), k
    with pytest.raises(seeds.SeedsApart):
        train(config(n=2), tmp_path / "refused", memory_limit=one)
    train(config(n=2), tmp_path / "fits", memory_limit=100 * one)


def _toy_args():
    tx = optax.adam(0.05)
    state = train_state.TrainState.create(apply_fn=None, params={"w": jnp.zeros(3)}, tx=tx)
    batch = {"x": jnp.zeros((8, 3)), "y": jnp.zeros(8)}
    return state, batch, jax.random.key(0), jnp.float32(0)


def test_num_seeds_is_checked_and_old_workdirs_count_as_one_seed(tmp_path):
    with pytest.raises(ValueError, match="num_seeds must be an integer >= 1"):
        seeds.num_seeds(ml_collections.ConfigDict({"num_seeds": 0}))
    assert seeds.num_seeds(ml_collections.ConfigDict({"seed": 0})) == 1
    # a run recorded before configs had num_seeds resumes under num_seeds = 1
    old = config()
    del old["num_seeds"]
    Run.start(old, tmp_path, parallel_seeds=True)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
    Run.start(config(), tmp_path, parallel_seeds=True)
    with pytest.raises(ValueError, match="another config"):
        Run.start(config(n=2), tmp_path, parallel_seeds=True)


def test_a_value_the_seeds_must_share(tmp_path):
    """`Run.shared`: one run's value as it is; on the seed axis the common value, or
    `SeedsApart` naming what differs (the trainer's seeds then train in turn)."""
    one = Run.start(config(), tmp_path / "one", parallel_seeds=True)
    assert one.shared(one.per_seed(lambda r: 7), "sizes") == 7
    two = Run.start(config(n=2), tmp_path / "two", parallel_seeds=True)
    assert two.shared(two.per_seed(lambda r: 7), "sizes") == 7
    with pytest.raises(seeds.SeedsApart, match=r"vocabulary sizes differ over the seeds: \[10, 11\]"):
        two.shared(two.per_seed(lambda r: 10 + r.config.seed), "vocabulary sizes")
    with pytest.raises(ValueError, match="needs num_seeds >= 1"):
        dp.make_train_step(loss_fn, dp.make_mesh(), num_consts=1, seed_axes=(None,))


def test_the_memory_check_compiles_the_program_the_step_then_runs():
    """`check_fits` compiles the seed-axis step ahead of time to read its memory (on an
    accelerator); the step's first call on the same state runs that program: nothing is traced,
    lowered, compiled or read from the compilation cache again. (A state rebuilt with another
    optimizer object is another pytree, and another program.)"""
    from jax import monitoring
    step = dp.make_train_step(loss_fn, dp.make_mesh(), num_consts=1, seed_axes=(0,),
                              num_seeds=2)
    state = seeds.stack([_toy_args()[0]] * 2)
    args = lambda: (state, {"x": jnp.zeros((2, 8, 3)), "y": jnp.zeros((2, 8))},  # noqa: E731
                    jax.random.split(jax.random.key(0), 2), jnp.zeros(2))
    seeds.check_fits(step, args, limit=1 << 40)
    events, call = [], args()
    listen = lambda event, duration, **_: events.append(event)   # noqa: E731
    monitoring.register_event_duration_secs_listener(listen)
    try:
        step(*call)
    finally:
        monitoring.unregister_event_duration_listener(listen)
    assert not [e for e in events if e.startswith(("/jax/core/compile/",
                                                   "/jax/compilation_cache/"))], events
