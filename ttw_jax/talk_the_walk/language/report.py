"""The natural-language trainer's reports: the results summary it prints and `samples.md`
(the paper's Table 16: tourist utterances for test examples)."""
from __future__ import annotations

import jax
import numpy as np

from ttw_jax.talk_the_walk import maps
from ttw_jax.talk_the_walk.language import dialogues as td, evaluation as language
from ttw_jax.talk_the_walk.language.models import generator
from ttw_jax.talk_the_walk.language.training_data import human_trajectories, ints


def _landmark_names(ids) -> str:
    return "(" + ", ".join(maps.LANDMARK_TYPES[i] for i in ids if i != maps.PAD_ID) + ")"


def format_samples(config, data, tourist, tparams, pg_params, key) -> str:
    """Table 16 as markdown: for up to `eval.num_samples` test examples with T moves (each T of
    `generated.Ts`), the observed landmarks, the moves, the human utterance and the tourist's
    greedy / sampled / beam-search utterances (and the policy-gradient tourist's when it was
    trained)."""
    vocab, generate = data["vocab"], generator(config, tourist)
    move_names = td.move_names(config.data.orientation_aware)
    walks = human_trajectories(config, data)["test"]
    examples = data["examples"]["test"]
    tourists = [("supervised", tparams)] + ([("policy gradient", pg_params)]
                                            if pg_params is not None else [])
    lines = ["# Tourist samples (Table 16)", "",
             f"Test examples of `{config.data.tfds_config}`; the tourist describes its corners "
             f"and moves since its previous utterance (the last {config.data.max_moves} moves "
             f"kept); beam size {config.eval.beam_size}.", ""]
    for T in ints(config.generated.Ts):
        idx = np.flatnonzero(walks["num_moves"] == T)[:config.eval.num_samples]
        lines += [f"## T = {T}", ""]
        if not len(idx):
            lines += [f"No test example with {T} moves.", ""]
            continue
        sub = {k: v[idx] for k, v in walks.items()}
        rows = {}
        for who, tp in tourists:
            for d in language.DECODES:
                out = generate(tp, sub, d, jax.random.fold_in(key, T))
                rows[f"{who} {d}"] = [td.decode(vocab, out["message"][i, 1:out["message_len"][i]])
                                      for i in range(len(idx))]
        for j, i in enumerate(idx):
            n = int(walks["num_moves"][i])
            lines += ["| | utterance |", "|---|---|",
                      "| observations | " + " ".join(_landmark_names(o)
                                                     for o in walks["obs"][i, :n + 1]) + " |",
                      "| moves | " + (", ".join(move_names[a] for a in walks["actions"][i, :n])
                                      or "-") + " |",
                      f"| human | {examples[i]['utterance']} |"]
            lines += [f"| {name} | {utts[j] or '(empty)'} |" for name, utts in rows.items()]
            lines.append("")
    return "\n".join(lines)


def format_results(results: dict) -> str:
    """The printed summary of a run's results: vocabulary, tourist, every guide's accuracy per
    split and decoding, beam sizes, policy gradient and the full task."""
    source = f" ({results['vocab_source']})" if results.get("vocab_source") else ""
    lines = [f"vocabulary {results['vocab_size']} words{source}; examples "
             + " / ".join(f"{results['examples'][s]}" for s in maps.SPLITS) + " (train/valid/test)",
             f"tourist: valid token CE {results['tourist']['valid']['ce']:.3f}, "
             f"token accuracy {results['tourist']['valid']['token_accuracy']:.3f}",
             "localization accuracy (train / valid / test):"]
    for name, r in results["human"].items():
        lines.append(f"  human utterances {name:<12} "
                     + " / ".join(f"{r[s]:.3f}" for s in maps.SPLITS)
                     + f"   E[T] {r['expected_T']['test']:.2f} (test)")
    generated = dict(results["generated"])
    if "human_trajectories" in results:
        generated["human trajectories"] = results["human_trajectories"]
    for name, r in generated.items():
        for d in language.DECODES:
            lines.append(f"  generated {name} {d:<7}        "
                         + " / ".join(f"{r[s][d]:.3f}" for s in maps.SPLITS))
    if "policy_gradient" in results:
        r = results["policy_gradient"]
        for d in language.DECODES:
            lines.append(f"  T{r['T']} {d:<7} supervised -> policy gradient: "
                         + " / ".join(f"{r[s]['supervised_' + d]:.3f} -> "
                                      f"{r[s]['policy_gradient_' + d]:.3f}" for s in maps.SPLITS))
    lines.append("beam size -> localization accuracy (train / valid / test):")
    for name, r in generated.items():
        for k in r["beam_sizes"]["test"]:
            lines.append(f"  generated {name} beam {k:<3} "
                         + " / ".join(f"{r['beam_sizes'][s][k]:.3f}" for s in maps.SPLITS))
    for name, splits in results["full_task"].items():
        for s, r in splits.items():
            lines.append(f"full task {name} ({s}): success {r['success_rate']:.3f}, "
                         f"mean steps {r['mean_steps_ended']:.1f}")
    return "\n".join(lines)
