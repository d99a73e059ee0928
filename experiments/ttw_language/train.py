"""Talk The Walk with natural language (de Vries et al. 2018, sections 4.1-4.2, App. B-E).

`train_and_evaluate(config, workdir)` runs the paper's pipeline as resumable stages, each in its
own `<workdir>/<stage>` with orbax checkpoints and early stopping (a killed run resumes from the
last checkpoint of the stage it was in, with identical results):

1. `tourist`: the LSTM tourist learns the dialogues' tourist utterances from the moves and corners
   since its previous utterance (teacher forcing; selected on valid token cross-entropy).
2. `guide_human_c{1,3,5}_{masc,nomasc}`: guides localize the tourist from the last 1/3/5 human
   utterances, predicting T (REINFORCE); MASC against the no-MASC baseline.
3. `guide_generated_T{0..3}`: guides trained on utterances the tourist generates (greedy by
   default) for T-move random walks; evaluated with greedy, sampled and beam-search utterances.
4. `pg_T{T}`: the tourist fine-tuned by policy gradient against the frozen T-step guide; the
   guide's accuracy on sampled utterances before and after.
5. The full task (Algorithm 1) with natural-language messages for every generated-utterance guide.
6. `guide_human_trajectories` (`generated.human_trajectories`, App. C Table 15): a guide trained
   on the tourist's utterances for the dialogues' own trajectories (T = min(moves, T_max)),
   evaluated on them and played in the full task for every T of `generated.Ts`.
Every generated-utterance guide is also read with each beam size of `eval.beam_sizes` (Table 12),
the human-utterance guides report E[T] of their T head (Table 9), and `<workdir>/samples.md`
holds tourist utterances for test examples per T (Table 16).

`data.label` picks the corner a random walk's guide names and the full task checks (where the
walk ends, or where it started as in the released code); `data.orientation_aware` runs every stage
with an orientation-aware tourist (TURNLEFT / TURNRIGHT / FORWARD moves in the examples, random
walks and full task, landmarks seen only facing away from the intersection).
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
from flax.training import train_state

from ttw_datasets.talk_the_walk.talk_the_walk_dataset_builder import Builder as TalkTheWalk
from ttw_jax.core import paths, tfds as ttw_tfds
from ttw_jax.core.chunks import map_in_chunks
from ttw_jax.core.train import data_parallel as dp, provenance, seeds as seeds_lib
from ttw_jax.core.train.epochs import steps_per_epoch
from ttw_jax.core.train.run import Run, evaluate_best, make_optimizer, optim_config
from ttw_jax.talk_the_walk import maps, walks as localization
from ttw_jax.talk_the_walk.language import (dialogues as td, evaluation as language,
                                            losses as nl_losses)
from ttw_jax.talk_the_walk.language.guide import ACTION_CHAINS, MASK_HEADS, T_INPUTS
from ttw_jax.talk_the_walk.language.models import (build_guide, build_tourist, generator,
                                                   init_guide)
from ttw_jax.talk_the_walk.language.report import format_results, format_samples
from ttw_jax.talk_the_walk.language.training_data import (
    HUMAN_KEYS, VOCABS, human_trajectories, ints, load_data, take, walk_epoch_size, walk_kwargs,
    walk_sets)

RESUMABLE_CHANGES = ("patience", "eval.batch_size", "eval.beam_sizes", "eval.num_samples",
                     "full_task.", "data.tfds_dir", "data.manual_dir")


def run_provenance(config: ml_collections.ConfigDict) -> dict:
    """The provenance of a run: the release folder of the dialogues (`data.tfds_config=real`:
    `data.manual_dir`, else the prepared dataset's folder), else the synthetic generator (its
    TFDS config's map seed). The models read the maps' landmark annotations, the paper's perfect
    perception: no perception input; the release ships every split's targets
    (`maps.HIDDEN_SPLITS`)."""
    d = config.data
    data = (provenance.release_data(d.manual_dir or ttw_tfds.prepared_dir(
                TalkTheWalk, d.tfds_config, d.tfds_dir or None)) if d.tfds_config == "real" else
            provenance.synthetic_data(TalkTheWalk.builder_configs[d.tfds_config].map_seed))
    return provenance.provenance(config, data=data, hidden_splits=maps.HIDDEN_SPLITS)


def stage_config(config: ml_collections.ConfigDict, stage: ml_collections.ConfigDict,
                 epoch_size: int | None = None):
    """The `fit` settings of one stage: its num_steps / eval_every over the shared ones (the
    shared `profile_steps` traces those steps of every stage, into `<stage>/profile`). With
    `stage.num_epochs` > 0 the released procedure instead: `num_epochs` epochs of `epoch_size`
    examples (`steps_per_epoch` = ceil(epoch_size / batch_size) steps each), a validation after
    every epoch, the best kept and no early stop."""
    out = ml_collections.ConfigDict({
        "num_steps": stage.num_steps, "eval_every": stage.eval_every,
        "patience": config.patience, "log_every": config.log_every,
        "max_checkpoints": config.max_checkpoints,
        "profile_steps": config.get("profile_steps", ""), "steps_per_epoch": 0})
    if stage.num_epochs > 0:
        per_epoch = steps_per_epoch(epoch_size, stage.batch_size)
        out.update(num_steps=stage.num_epochs * per_epoch, eval_every=per_epoch,
                   patience=stage.num_epochs + 1, steps_per_epoch=per_epoch)
    return out


def fixed_sampler(run: Run, stage, arrays, keys: list) -> dict:
    """`run_stage`'s sampling keywords for a fixed training set (host arrays; on the seed axis
    a list of each seed's own, or one set for all): episodes drawn with replacement at every
    step, or, with `stage.num_epochs` > 0, every example once per epoch in a fresh order
    (`walks.epoch_sampler`, the released DataLoader's shuffle, from each seed's key of `keys`)."""
    own = isinstance(arrays, list)
    if stage.num_epochs > 0:
        placed = [run.replicate(a) for a in arrays] if own else [run.replicate(arrays)] * len(keys)
        samples = []
        for a, k in zip(placed, keys):
            sample, _ = localization.epoch_sampler(a, stage.batch_size, k, run.mesh)
            samples.append(lambda _, step, sample=sample: sample(step))
        return {"sample": samples, "pass_step": True,
                "epoch_size": len((arrays[0] if own else arrays)["target"])}
    if own:
        return {"sample": [dp.episode_sampler(a, stage.batch_size, run.mesh) for a in arrays]}
    return {"sample": dp.episode_sampler(arrays, stage.batch_size, run.mesh)}


def seed_runs(run: Run) -> list[Run]:
    """The runs of `run`'s seeds (`Run.seed_runs` on the seed axis), or [run]."""
    return list(run.seed_runs) if run.seeds else [run]


def as_run_takes(run: Run, xs: list):
    """A list over `seed_runs(run)` as `Run`'s per-seed arguments take it: the list on the seed
    axis, its one element for one run."""
    return xs if run.seeds else xs[0]


def run_stage(run: Run, stage, name: str, params: list, loss_fn: Callable, sample,
              evaluate: list, metric: str, mode: str, keys: list, consts: Sequence = (),
              hooks=(), pass_step: bool = False, epoch_size: int | None = None):
    """Trains each seed's `params` (lists over `seed_runs(run)`, as are `evaluate` and the
    step keys `keys`; on the seed axis as one program) with Adam at `stage.learning_rate` on
    `loss_fn` (batches from sample(key), or sample(key, step) with `pass_step`; `sample` is one
    sampler or each seed's; a const given as a list is each seed's own) in `<workdir>/<name>`
    (each seed's `s<seed>/<name>`) for the stage's budget (`stage_config`: `epoch_size` examples
    an epoch when it counts epochs). Returns each seed's best params and meta, with meta's
    `steps_per_epoch` (0 for a budget in steps)."""
    one = functools.partial(as_run_takes, run)
    for r in (run, *run.seed_runs):
        (r.workdir / name).mkdir(parents=True, exist_ok=True)
    fit_config = stage_config(run.config, stage, epoch_size)
    tx = make_optimizer(optim_config(stage.learning_rate), fit_config.num_steps)
    state = run.stack(one([train_state.TrainState.create(apply_fn=None, params=p, tx=tx)
                           for p in params]))
    train_step, consts = run.train_step(
        loss_fn, *(one(c) if isinstance(c, list) else c for c in consts))
    if not run.seeds:
        consts = tuple(run.replicate(c) for c in consts)
    step_fn = run.step_fn(train_step, one(sample) if isinstance(sample, list) else sample,
                          *consts, key=one(keys), pass_step=pass_step)
    _, best, meta = run.fit(state, step_fn, one(evaluate), eval_prefix="valid", hooks=hooks,
                            workdir=run.workdir / name, config=fit_config, metric=metric,
                            mode=mode)
    per_epoch = {"steps_per_epoch": fit_config.steps_per_epoch}
    if not run.seeds:
        return [jax.device_get(best)], [{**meta, **per_epoch}]
    return ([jax.device_get(seeds_lib.take(best, i)) for i in range(len(run.seeds))],
            [{**m, **per_epoch} for m in meta])


def stage_summary(meta: dict) -> dict:
    """A stage's budget in its results: the best and the last step, and with a budget in epochs
    the steps per epoch and the best epoch (1-based)."""
    out = {"best_step": meta["best_step"], "last_step": meta["step"]}
    if meta["steps_per_epoch"]:
        out.update(steps_per_epoch=meta["steps_per_epoch"],
                   best_epoch=-(-meta["best_step"] // meta["steps_per_epoch"]))
    return out


def train_tourist(run: Run, data, keys: list, hooks):
    """The tourist of each seed (`keys`: each seed's stage key): (model, [params], [results])."""
    config = run.config
    vocab_size = len(data["vocab"])
    model = build_tourist(config, vocab_size)
    train = take(data["human"][1]["train"], HUMAN_KEYS)
    ex = jax.tree_util.tree_map(lambda x: jnp.asarray(x[:2]), train)
    inputs = jnp.zeros_like(ex["utterance"])
    params = [model.init(jax.random.fold_in(k, 0), ex["obs"], ex["actions"], ex["num_moves"],
                         inputs)["params"] for k in keys]
    loss_fn = nl_losses.tourist_loss(model.apply)
    stats = jax.jit(functools.partial(nl_losses.tourist_token_stats, model.apply))
    valid = data["human"][1]["valid"]

    def evaluate(params):
        """Token cross-entropy and accuracy over every valid token of the valid split."""
        out = map_in_chunks(lambda b, _: stats(params, b), valid, HUMAN_KEYS,
                            config.eval.batch_size, jax.random.key(0))
        tokens = max(float(out["tokens"].sum()), 1.0)
        return {"ce": float(out["ce"].sum()) / tokens,
                "token_accuracy": float(out["correct"].sum()) / tokens}

    best, metas = run_stage(
        run, config.tourist, "tourist", params, loss_fn, evaluate=[evaluate] * len(keys),
        metric="ce", mode="min", keys=[jax.random.fold_in(k, 1) for k in keys], hooks=hooks,
        **fixed_sampler(run, config.tourist, train, [jax.random.fold_in(k, 2) for k in keys]))
    return model, best, [{**stage_summary(m),
                          "valid": evaluate_best(m, "valid", "valid", lambda p=p: evaluate(p))}
                         for p, m in zip(best, metas)]


def train_human_guide(run: Run, data, keys: list, ctx: int, masc: bool, hooks) -> list:
    """Each seed's human-utterance guide (`keys`: each seed's stage key); [results]."""
    config = run.config
    guide = build_guide(config, len(data["vocab"]), masc)
    sets = data["human"][ctx]
    fields = ("message", "message_len", "landmarks", "target")
    params = [init_guide(guide, k, sets["train"]["message"].shape[1],
                         sets["train"]["landmarks"].shape[-1]) for k in keys]
    loss_fn = nl_losses.guide_loss(guide.apply, "predict")
    evaluate = language.make_guide_evaluator(guide, config.eval.batch_size, predict_T=True)
    name = f"guide_human_c{ctx}_{'masc' if masc else 'nomasc'}"
    best, metas = run_stage(
        run, config.guide, name, params, loss_fn,
        evaluate=[lambda p: evaluate(p, sets["valid"])] * len(keys), metric="accuracy",
        mode="max", keys=[jax.random.fold_in(k, 1) for k in keys], hooks=hooks,
        **fixed_sampler(run, config.guide, take(sets["train"], fields),
                        [jax.random.fold_in(k, 2) for k in keys]))
    out = []
    for p, meta in zip(best, metas):
        per_split = {s: evaluate_best(meta, s, "valid", lambda s=s, p=p: evaluate(p, sets[s]))
                     for s in maps.SPLITS}
        out.append({**stage_summary(meta), **{s: r["accuracy"] for s, r in per_split.items()},
                    "expected_T": {s: r["expected_T"] for s, r in per_split.items()}})
    return out


def train_generated_guide(run: Run, data, tourist, tparams: list, keys: list, T: int, hooks):
    """Each seed's T-step guide on its own tourist's utterances (`tparams`, `keys`: each seed's);
    (guide, [params], [walk sets], [results])."""
    config, mesh = run.config, run.mesh
    vocab_size = len(data["vocab"])
    guide = build_guide(config, vocab_size, True, generated=True)
    k = data["tables"]["train"].shape[-1]
    params = [init_guide(guide, jax.random.fold_in(key, 0), config.data.generated_len + 1, k)
              for key in keys]
    train_table = dp.replicate(jnp.asarray(data["tables"]["train"]), mesh)
    decode = config.generated.decode

    @jax.jit
    def make_batch(k_step, table, tp):
        k_walk, k_dec = jax.random.split(k_step)
        walks = localization.sample_batch(k_walk, table, config.generated.batch_size, T,
                                          **walk_kwargs(config))
        return language.generated_batch(tourist, tp, walks, k_dec, decode,
                                        config.data.generated_len, config.eval.beam_size)

    def sampler(tp):
        device_tp = dp.replicate(tp, mesh)
        return lambda k_step: jax.lax.with_sharding_constraint(
            make_batch(k_step, train_table, device_tp), dp.batch_sharded(mesh))

    walks = [walk_sets(config, data, T, jax.random.fold_in(key, 2)) for key in keys]
    evaluate = language.make_guide_evaluator(guide, config.eval.batch_size, predict_T=False)
    generate = generator(config, tourist)
    valid = [generate(tp, w["valid"], decode, jax.random.fold_in(key, 3))
             for tp, w, key in zip(tparams, walks, keys)]
    loss_fn = nl_losses.guide_loss(guide.apply, "fixed")
    best, metas = run_stage(
        run, config.generated, f"guide_generated_T{T}", params, loss_fn,
        [sampler(tp) for tp in tparams],
        [lambda p, v=v: {"accuracy": evaluate(p, v)["accuracy"]} for v in valid],
        "accuracy", "max", [jax.random.fold_in(key, 1) for key in keys], hooks=hooks,
        epoch_size=walk_epoch_size(config, data["tables"]["train"], T))
    results = [{**stage_summary(m),
                **language.evaluate_generated(evaluate, generate, p, tp, w,
                                              jax.random.fold_in(key, 4),
                                              ints(config.eval.beam_sizes))}
               for p, m, tp, w, key in zip(best, metas, tparams, walks, keys)]
    return guide, best, walks, results


def train_human_trajectory_guide(run: Run, data, tourist, tparams: list, keys: list, hooks):
    """Table 15's human-trajectory guide: trained (fixed T) on the tourist's `generated.decode`
    utterances for the dialogues' own trajectories, cached once as in the released
    predict_location_generated.py; evaluated on them like the random-walk guides. Each seed's,
    on its own tourist's utterances: (guide, [params], [results])."""
    config = run.config
    guide = build_guide(config, len(data["vocab"]), True, generated=True)
    k = data["tables"]["train"].shape[-1]
    params = [init_guide(guide, jax.random.fold_in(key, 0), config.data.generated_len + 1, k)
              for key in keys]
    walks = human_trajectories(config, data)
    generate = generator(config, tourist)
    decode = config.generated.decode
    cached = [{s: generate(tp, walks[s], decode, jax.random.fold_in(key, 3))
               for s in ("train", "valid")} for tp, key in zip(tparams, keys)]
    evaluate = language.make_guide_evaluator(guide, config.eval.batch_size, predict_T=False)
    loss_fn = nl_losses.guide_loss(guide.apply, "fixed")
    best, metas = run_stage(
        run, config.generated, "guide_human_trajectories", params, loss_fn,
        evaluate=[lambda p, c=c: {"accuracy": evaluate(p, c["valid"])["accuracy"]}
                  for c in cached],
        metric="accuracy", mode="max", keys=[jax.random.fold_in(key, 1) for key in keys],
        hooks=hooks, **fixed_sampler(run, config.generated, [c["train"] for c in cached],
                                     [jax.random.fold_in(key, 2) for key in keys]))
    results = [{**stage_summary(m), "decode": decode,
                **language.evaluate_generated(evaluate, generate, p, tp, walks,
                                              jax.random.fold_in(key, 4),
                                              ints(config.eval.beam_sizes))}
               for p, m, tp, key in zip(best, metas, tparams, keys)]
    return guide, best, results


def fine_tune_tourist(run: Run, data, tourist, tparams: list, guide, gparams: list,
                      walks: list, keys: list, T: int, hooks):
    """Policy gradient for each seed's tourist against its frozen T-step guide; returns their
    params and the guide's accuracy with each decoding, before and after (lists over seeds)."""
    config, mesh = run.config, run.mesh
    train_table = dp.replicate(jnp.asarray(data["tables"]["train"]), mesh)

    @jax.jit
    def make_walks(k_step, table):
        walks = localization.sample_batch(k_step, table, config.pg.batch_size, T,
                                          **walk_kwargs(config))
        obs, actions, num_moves = language.pad_walk(walks["obs"], walks["actions"])
        return {"obs": obs, "actions": actions, "num_moves": num_moves,
                "landmarks": walks["landmarks"], "target": walks["target"],
                "T": num_moves}

    sample = lambda k_step: jax.lax.with_sharding_constraint(make_walks(k_step, train_table),
                                                             dp.batch_sharded(mesh))
    evaluate = language.make_guide_evaluator(guide, config.eval.batch_size, predict_T=False)
    generate = generator(config, tourist)

    def accuracy_with(tp, i, split, decode, draw=5):
        """Seed i's guide on its walks of `split`, reading tourist params `tp`."""
        return evaluate(gparams[i], generate(tp, walks[i][split], decode,
                                             jax.random.fold_in(keys[i], draw)))["accuracy"]

    loss_fn = nl_losses.tourist_pg_loss(tourist, guide, config.data.generated_len,
                                        reward=config.pg.reward)
    best, metas = run_stage(
        run, config.pg, f"pg_T{T}", tparams, loss_fn, sample,
        [lambda p, i=i: {"accuracy": accuracy_with(p, i, "valid", "sample", draw=6)}
         for i in range(len(keys))],
        "accuracy", "max", [jax.random.fold_in(key, 1) for key in keys], consts=(gparams,),
        hooks=hooks, epoch_size=walk_epoch_size(config, data["tables"]["train"], T))
    results = []
    for i, (params, meta) in enumerate(zip(best, metas)):
        result = {**stage_summary(meta), "T": T}
        for s in maps.SPLITS:
            result[s] = {f"{who}_{d}": accuracy_with(tp, i, s, d)
                         for who, tp in (("supervised", tparams[i]), ("policy_gradient", params))
                         for d in language.DECODES}
        results.append(result)
    return best, results


def evaluate_full_task(config, data, tourist, tparams, guide, gparams, T: int, key) -> dict:
    """Algorithm 1 with natural-language messages on every full-task split."""
    f = config.full_task
    tables = {s: data["tables"][s] for s in f.splits.split(",") if s}
    return language.evaluate_full_task(
        tourist, tparams, guide, gparams, tables, T, key, decode=f.decode,
        max_len=config.data.generated_len, beam_size=config.eval.beam_size, repeats=f.repeats,
        max_steps=f.max_steps, max_evals=f.max_evals, greedy=f.greedy, **walk_kwargs(config))


def check_config(config: ml_collections.ConfigDict) -> None:
    """Fails before any work on an unknown guide or example-extraction option, or on sizes the
    guides cannot take."""
    g = config.guide
    for value, allowed, name in ((g.action_chain, ACTION_CHAINS, "guide.action_chain"),
                                 (g.mask_head, MASK_HEADS, "guide.mask_head"),
                                 (g.T_input, T_INPUTS, "guide.T_input"),
                                 (config.data.blocked_forward, td.BLOCKED_FORWARD,
                                  "data.blocked_forward"),
                                 (config.data.label, localization.LABELS, "data.label"),
                                 (config.data.vocab, VOCABS, "data.vocab")):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    if not g.obs_projection and g.features != 2 * g.hidden:
        raise ValueError(f"guide.obs_projection=False needs guide.features = 2 * guide.hidden "
                         f"(the BiLSTM's states score the map), got {g.features} and {g.hidden}")
    d = config.data
    if d.tfds_config != "synthetic" and not d.manual_dir:
        files = (", ".join(td.DIALOGUE_FILES.values()) + " and <nbh>/map.json"
                 if d.tfds_config == "real" else "<nbh>/map.json or <nbh>_map.json")
        raise ValueError(f"data.tfds_config={d.tfds_config!r} reads {files} from "
                         f"data.manual_dir, which is empty. {td.SOURCE_HINT}")
    too_long = [T for T in ints(config.generated.Ts) if T > config.generated.T_max]
    if too_long:
        raise ValueError(f"generated.T_max = {config.generated.T_max} is below the walk length(s) "
                         f"{too_long} of generated.Ts")


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       hooks: Sequence[Callable[[int], None]] = ()) -> dict:
    """Runs every stage (see the module docstring); returns (and writes) the results dict. With
    `num_seeds` > 1 each stage trains the seeds as one program (`ttw_jax.core.train.seeds`):
    every seed's tourist, guides and keys are its separate run's, its results in `s<seed>/`."""
    check_config(config)
    run = Run.start(config, workdir, RESUMABLE_CHANGES,
                    batch_sizes=(config.tourist.batch_size, config.guide.batch_size,
                                 config.generated.batch_size, config.pg.batch_size),
                    parallel_seeds=True)
    data = load_data(config, workdir)
    runs = seed_runs(run)
    keys = lambda purpose: [r.key(purpose) for r in runs]
    results = [{"config": r.config.to_dict(), "vocab_size": len(data["vocab"]),
                "vocab_source": data["vocab_source"], "dialogues": data["num_dialogues"],
                "examples": {s: int(len(data["human"][1][s]["target"])) for s in maps.SPLITS}}
               for r in runs]

    def put(*where, values):
        """results[i][where...] = values[i] for each seed i."""
        for res, value in zip(results, values):
            functools.reduce(lambda d, k: d[k], where[:-1], res)[where[-1]] = value

    def full_task(name, tps, guide, gps, T, stage_keys):
        put("full_task", name, values=[evaluate_full_task(
            config, data, tourist, tp, guide, gp, T, jax.random.fold_in(k, 9))
            for tp, gp, k in zip(tps, gps, stage_keys)])

    tourist, tparams, out = train_tourist(run, data, keys(0), hooks)
    put("tourist", values=out)
    for res in results:
        res.update(human={}, generated={}, full_task={})
    for ctx in ints(config.contexts):
        for masc in ((True, False) if config.compare_masc else (True,)):
            put("human", f"c{ctx}_{'masc' if masc else 'nomasc'}",
                values=train_human_guide(run, data, keys(100 + 2 * ctx + masc), ctx, masc, hooks))
    pg_params = [None] * len(runs)
    for T in ints(config.generated.Ts):
        guide, gparams, walks, out = train_generated_guide(run, data, tourist, tparams,
                                                           keys(200 + T), T, hooks)
        put("generated", f"T{T}", values=out)
        if T == config.pg.T and config.pg.num_steps > 0:
            pg_params, out = fine_tune_tourist(run, data, tourist, tparams, guide, gparams, walks,
                                               keys(300), T, hooks)
            put("policy_gradient", values=out)
            full_task(f"T{T}_policy_gradient", pg_params, guide, gparams, T, keys(200 + T))
        full_task(f"T{T}", tparams, guide, gparams, T, keys(200 + T))
    if config.generated.human_trajectories:
        guide, gparams, out = train_human_trajectory_guide(run, data, tourist, tparams,
                                                           keys(400), hooks)
        put("human_trajectories", values=out)
        for T in ints(config.generated.Ts):
            full_task(f"human_trajectories_T{T}", tparams, guide, gparams, T, keys(200 + T))

    def report(r: Run, _, res: dict, tp, pg) -> dict:
        samples = format_samples(r.config, data, tourist, tp, pg, r.key(500))
        if jax.process_index() == 0:
            paths.write_text(r.workdir / "samples.md", samples)
        return r.finish(res, format_results(res), run_provenance(r.config))

    one = functools.partial(as_run_takes, run)
    return run.each_seed(report, None, one(results), one(tparams), one(pg_params),
                         name="ttw_language")

