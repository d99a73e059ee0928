"""Talk The Walk with natural language (de Vries et al. 2018, sections 4.1-4.2, App. D-E).

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
"""
from __future__ import annotations

import functools
import os
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
from flax.training import train_state

from ttw_jax.core.chunks import map_in_chunks
from ttw_jax.core.train import data_parallel as dp
from ttw_jax.core.train.run import Run, evaluate_best, make_optimizer, optim_config
from ttw_jax.core.vocab import Vocabulary
from ttw_jax.talk_the_walk import maps, walks as localization
from ttw_jax.talk_the_walk.language import (dataset as ttw_language_data, dialogues as td,
                                            evaluation as language, losses as nl_losses)
from ttw_jax.talk_the_walk.language.guide import NLGuide
from ttw_jax.talk_the_walk.language.tourist import NLTourist

RESUMABLE_CHANGES = ("patience", "eval.batch_size", "full_task.", "data.tfds_dir", "data.manual_dir")
HUMAN_KEYS = ("obs", "actions", "num_moves", "utterance", "utterance_len", "message",
              "message_len", "landmarks", "target")


def _ints(spec) -> list[int]:
    return [int(s) for s in str(spec).split(",") if s.strip()]


def load_data(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Vocabulary, window tables per split and padded human examples per context size."""
    d = config.data
    dialogues, nmaps = ttw_language_data.load_dialogues(d.tfds_config, d.tfds_dir or None,
                                                        d.manual_dir or None)
    vocab_path = os.path.join(workdir, "vocab.json")
    if os.path.exists(vocab_path):
        vocab = Vocabulary.load(vocab_path)
    else:
        vocab = td.build_vocab(td.dialogue_texts(dialogues["train"]), min_count=d.min_count)
        if jax.process_index() == 0:
            vocab.save(vocab_path)
    tables = {s: maps.windows(list(nmaps.values()), s).landmarks for s in maps.SPLITS}
    empty = [s for s in maps.SPLITS if not dialogues[s] or not len(tables[s])]
    if empty:
        raise ValueError(f"talk_the_walk/{d.tfds_config} has no dialogues or windows in split(s) "
                         f"{empty}; every experiment stage trains on train and selects on valid")
    human = {}
    for ctx in sorted(set(_ints(config.contexts)) | {1}):
        human[ctx] = {s: td.encode_examples(td.utterance_examples(dialogues[s], context=ctx),
                                            nmaps, vocab, d.max_moves, d.utterance_len,
                                            d.message_len)
                      for s in maps.SPLITS}
    return {"vocab": vocab, "tables": tables, "human": human,
            "num_dialogues": {s: len(v) for s, v in dialogues.items()}}


def stage_config(config: ml_collections.ConfigDict, stage: ml_collections.ConfigDict):
    """The `fit` settings of one stage: its num_steps / eval_every over the shared ones."""
    c = ml_collections.ConfigDict({"num_steps": stage.num_steps, "eval_every": stage.eval_every,
                                   "patience": config.patience, "log_every": config.log_every,
                                   "max_checkpoints": config.max_checkpoints})
    return c


def run_stage(run: Run, stage, name: str, params, loss_fn: Callable, sample: Callable,
              evaluate: Callable, metric: str, mode: str, key, consts: Sequence = (), hooks=()):
    """Trains `params` with Adam at `stage.learning_rate` on `loss_fn` (batches from sample(key))
    in `<workdir>/<name>`; returns (best params, meta)."""
    stage_dir = os.path.join(run.workdir, name)
    os.makedirs(stage_dir, exist_ok=True)
    state = train_state.TrainState.create(
        apply_fn=None, params=params,
        tx=make_optimizer(optim_config(stage.learning_rate), stage.num_steps))
    train_step = dp.make_train_step(loss_fn, run.mesh, num_consts=len(consts))
    step_fn = run.step_fn(train_step, sample, *(run.replicate(c) for c in consts), key=key)
    _, best, meta = run.fit(state, step_fn, evaluate, eval_prefix="valid", hooks=hooks,
                            workdir=stage_dir, config=stage_config(run.config, stage),
                            metric=metric, mode=mode)
    return jax.device_get(best), meta


def build_tourist(config, vocab_size: int) -> NLTourist:
    t = config.tourist
    return NLTourist(vocab_size=vocab_size, num_landmark_ids=maps.NUM_LANDMARK_IDS, embed=t.embed,
                   hidden=t.hidden)


def build_guide(config, vocab_size: int, masc: bool) -> NLGuide:
    g = config.guide
    return NLGuide(vocab_size=vocab_size, num_landmark_ids=maps.NUM_LANDMARK_IDS, T_max=g.T_max,
                   embed=g.embed, hidden=g.hidden, features=g.features, masc=masc)


def _take(arrays: dict, keys) -> dict:
    return {k: arrays[k] for k in keys if k in arrays}


def train_tourist(run: Run, data, key, hooks):
    config, mesh = run.config, run.mesh
    vocab_size = len(data["vocab"])
    model = build_tourist(config, vocab_size)
    train = _take(data["human"][1]["train"], HUMAN_KEYS)
    ex = jax.tree_util.tree_map(lambda x: jnp.asarray(x[:2]), train)
    inputs = jnp.zeros_like(ex["utterance"])
    params = model.init(jax.random.fold_in(key, 0), ex["obs"], ex["actions"], ex["num_moves"],
                        inputs)["params"]
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

    sample = dp.episode_sampler(train, config.tourist.batch_size, mesh)
    params, meta = run_stage(run, config.tourist, "tourist", params, loss_fn, sample, evaluate,
                             "ce", "min", jax.random.fold_in(key, 1), hooks=hooks)
    return model, params, {"best_step": meta["best_step"],
                           "valid": evaluate_best(meta, "valid", "valid", lambda: evaluate(params))}


def make_guide_evaluator(guide, batch_size: int, predict_T: bool):
    """evaluate(params, examples) -> accuracy over host examples (message, message_len,
    landmarks, target and, unless `predict_T`, T)."""
    @jax.jit
    def correct(params, batch):
        return {"correct": language.guide_correct(guide, params, batch,
                                                  None if predict_T else batch["T"])}

    def evaluate(params, examples) -> float:
        out = map_in_chunks(lambda b, _: correct(params, b), examples,
                            ("message", "message_len", "landmarks", "target", "T"), batch_size,
                            jax.random.key(0))
        return language.accuracy(out["correct"])

    return evaluate


def init_guide(guide, key, message_len: int, k: int):
    b = 2
    return guide.init(key, jnp.zeros((b, message_len), jnp.int32), jnp.ones((b,), jnp.int32),
                      jnp.zeros((b, maps.WINDOW, maps.WINDOW, k), jnp.int32))["params"]


def train_human_guide(run: Run, data, key, ctx: int, masc: bool, hooks):
    config, mesh = run.config, run.mesh
    guide = build_guide(config, len(data["vocab"]), masc)
    sets = data["human"][ctx]
    keys = ("message", "message_len", "landmarks", "target")
    params = init_guide(guide, key, sets["train"]["message"].shape[1],
                        sets["train"]["landmarks"].shape[-1])
    loss_fn = nl_losses.guide_loss(guide.apply, "predict")
    evaluate = make_guide_evaluator(guide, config.eval.batch_size, predict_T=True)
    sample = dp.episode_sampler(_take(sets["train"], keys), config.guide.batch_size, mesh)
    name = f"guide_human_c{ctx}_{'masc' if masc else 'nomasc'}"
    params, meta = run_stage(run, config.guide, name, params, loss_fn, sample,
                             lambda p: {"accuracy": evaluate(p, sets["valid"])}, "accuracy",
                             "max", jax.random.fold_in(key, 1), hooks=hooks)
    return {"best_step": meta["best_step"], **{s: evaluate_best(
        meta, s, "valid", lambda: {"accuracy": evaluate(params, sets[s])})["accuracy"]
        for s in maps.SPLITS}}


def walk_sets(config, data, T: int, key) -> dict:
    """Fixed random-walk evaluation sets per split: `config.eval.num_walks` T-move walks."""
    out = {}
    for i, s in enumerate(maps.SPLITS):
        walks = localization.sample_batch(jax.random.fold_in(key, i), jnp.asarray(data["tables"][s]),
                                          config.eval.num_walks, T)
        out[s] = jax.device_get(walks)
    return out


def make_generator(config, tourist):
    """generate(tourist_params, walks, decode, key) -> host guide inputs for host `walks`,
    decoded in chunks; one compiled program per decoding mode."""
    @functools.partial(jax.jit, static_argnames="decode")
    def gen(tp, batch, key, decode):
        return language.generated_batch(tourist, tp, batch, key, decode,
                                        config.data.generated_len, config.eval.beam_size)

    def generate(tp, walks: dict, decode: str, key) -> dict:
        return map_in_chunks(lambda b, k: gen(tp, b, k, decode), walks,
                             ("obs", "actions", "landmarks", "target"), config.eval.batch_size, key)

    return generate


def train_generated_guide(run: Run, data, tourist, tparams, key, T: int, hooks):
    config, mesh = run.config, run.mesh
    vocab_size = len(data["vocab"])
    guide = build_guide(config, vocab_size, True)
    k = data["tables"]["train"].shape[-1]
    params = init_guide(guide, jax.random.fold_in(key, 0), config.data.generated_len + 1, k)
    train_table = dp.replicate(jnp.asarray(data["tables"]["train"]), mesh)
    decode = config.generated.decode

    @jax.jit
    def make_batch(k_step, table, tp):
        k_walk, k_dec = jax.random.split(k_step)
        walks = localization.sample_batch(k_walk, table, config.generated.batch_size, T)
        return language.generated_batch(tourist, tp, walks, k_dec, decode,
                                        config.data.generated_len, config.eval.beam_size)

    device_tparams = dp.replicate(tparams, mesh)
    sample = lambda k_step: jax.lax.with_sharding_constraint(
        make_batch(k_step, train_table, device_tparams), dp.batch_sharded(mesh))
    walks = walk_sets(config, data, T, jax.random.fold_in(key, 2))
    evaluate = make_guide_evaluator(guide, config.eval.batch_size, predict_T=False)
    generate = make_generator(config, tourist)
    valid = generate(tparams, walks["valid"], decode, jax.random.fold_in(key, 3))
    loss_fn = nl_losses.guide_loss(guide.apply, "fixed")
    params, meta = run_stage(run, config.generated, f"guide_generated_T{T}", params, loss_fn,
                             sample, lambda p: {"accuracy": evaluate(p, valid)}, "accuracy",
                             "max", jax.random.fold_in(key, 1), hooks=hooks)
    result = {"best_step": meta["best_step"]}
    for s in maps.SPLITS:
        result[s] = {d: evaluate(params, generate(tparams, walks[s], d, jax.random.fold_in(key, 4)))
                     for d in language.DECODES}
    return guide, params, walks, result


def fine_tune_tourist(run: Run, data, tourist, tparams, guide, gparams, walks, key, T: int,
                      hooks):
    """Policy gradient for the tourist against the frozen T-step guide; returns its params and
    the guide's accuracy with each decoding, before and after."""
    config, mesh = run.config, run.mesh
    train_table = dp.replicate(jnp.asarray(data["tables"]["train"]), mesh)

    @jax.jit
    def make_walks(k_step, table):
        walks = localization.sample_batch(k_step, table, config.pg.batch_size, T)
        obs, actions, num_moves = language.pad_walk(walks["obs"], walks["actions"])
        return {"obs": obs, "actions": actions, "num_moves": num_moves,
                "landmarks": walks["landmarks"], "target": walks["target"],
                "T": num_moves}

    sample = lambda k_step: jax.lax.with_sharding_constraint(make_walks(k_step, train_table),
                                                             dp.batch_sharded(mesh))
    evaluate = make_guide_evaluator(guide, config.eval.batch_size, predict_T=False)
    generate = make_generator(config, tourist)

    def accuracy_with(tp, split, decode, draw=5):
        return evaluate(gparams, generate(tp, walks[split], decode, jax.random.fold_in(key, draw)))

    loss_fn = nl_losses.tourist_pg_loss(tourist, guide, config.data.generated_len,
                                        reward=config.pg.reward)
    params, meta = run_stage(run, config.pg, f"pg_T{T}", tparams, loss_fn, sample,
                             lambda p: {"accuracy": accuracy_with(p, "valid", "sample", draw=6)},
                             "accuracy", "max", jax.random.fold_in(key, 1), consts=(gparams,),
                             hooks=hooks)
    result = {"best_step": meta["best_step"], "T": T}
    for s in maps.SPLITS:
        result[s] = {f"{who}_{d}": accuracy_with(tp, s, d)
                     for who, tp in (("supervised", tparams), ("policy_gradient", params))
                     for d in language.DECODES}
    return params, result


def evaluate_full_task(config, data, tourist, tparams, guide, gparams, T: int, key) -> dict:
    """Algorithm 1 with natural-language messages on every full-task split."""
    f = config.full_task
    tables = {s: data["tables"][s] for s in f.splits.split(",") if s}
    return language.evaluate_full_task(
        tourist, tparams, guide, gparams, tables, T, key, decode=f.decode,
        max_len=config.data.generated_len, beam_size=config.eval.beam_size, repeats=f.repeats,
        max_steps=f.max_steps, max_evals=f.max_evals, greedy=f.greedy)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       hooks: Sequence[Callable[[int], None]] = ()) -> dict:
    """Runs every stage (see the module docstring); returns (and writes) the results dict."""
    run = Run.start(config, workdir, RESUMABLE_CHANGES,
                    batch_sizes=(config.tourist.batch_size, config.guide.batch_size,
                                 config.generated.batch_size, config.pg.batch_size))
    data = load_data(config, workdir)
    results = {"config": config.to_dict(), "vocab_size": len(data["vocab"]),
               "dialogues": data["num_dialogues"],
               "examples": {s: int(len(data["human"][1][s]["target"])) for s in maps.SPLITS}}

    tourist, tparams, results["tourist"] = train_tourist(run, data, run.key(0), hooks)
    results["human"] = {}
    for ctx in _ints(config.contexts):
        for masc in ((True, False) if config.compare_masc else (True,)):
            name = f"c{ctx}_{'masc' if masc else 'nomasc'}"
            results["human"][name] = train_human_guide(run, data, run.key(100 + 2 * ctx + masc),
                                                       ctx, masc, hooks)
    results["generated"], results["full_task"] = {}, {}
    for T in _ints(config.generated.Ts):
        key = run.key(200 + T)
        guide, gparams, walks, results["generated"][f"T{T}"] = train_generated_guide(
            run, data, tourist, tparams, key, T, hooks)
        if T == config.pg.T and config.pg.num_steps > 0:
            pg_params, results["policy_gradient"] = fine_tune_tourist(
                run, data, tourist, tparams, guide, gparams, walks, run.key(300), T, hooks)
            results["full_task"][f"T{T}_policy_gradient"] = evaluate_full_task(
                config, data, tourist, pg_params, guide, gparams, T, jax.random.fold_in(key, 9))
        results["full_task"][f"T{T}"] = evaluate_full_task(
            config, data, tourist, tparams, guide, gparams, T, jax.random.fold_in(key, 9))
    return run.finish(results, format_results(results))


def format_results(results: dict) -> str:
    lines = [f"vocabulary {results['vocab_size']} words; examples "
             + " / ".join(f"{results['examples'][s]}" for s in maps.SPLITS) + " (train/valid/test)",
             f"tourist: valid token CE {results['tourist']['valid']['ce']:.3f}, "
             f"token accuracy {results['tourist']['valid']['token_accuracy']:.3f}",
             "localization accuracy (train / valid / test):"]
    for name, r in results["human"].items():
        lines.append(f"  human utterances {name:<12} "
                     + " / ".join(f"{r[s]:.3f}" for s in maps.SPLITS))
    for name, r in results["generated"].items():
        for d in language.DECODES:
            lines.append(f"  generated {name} {d:<7}        "
                         + " / ".join(f"{r[s][d]:.3f}" for s in maps.SPLITS))
    if "policy_gradient" in results:
        r = results["policy_gradient"]
        for d in language.DECODES:
            lines.append(f"  T{r['T']} {d:<7} supervised -> policy gradient: "
                         + " / ".join(f"{r[s]['supervised_' + d]:.3f} -> "
                                      f"{r[s]['policy_gradient_' + d]:.3f}" for s in maps.SPLITS))
    for name, splits in results["full_task"].items():
        for s, r in splits.items():
            lines.append(f"full task {name} ({s}): success {r['success_rate']:.3f}, "
                         f"mean steps {r['mean_steps_ended']:.1f}")
    return "\n".join(lines)
