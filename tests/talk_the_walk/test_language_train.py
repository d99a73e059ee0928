"""Talk The Walk with natural language: generated messages, the NL full task (with message
randomness drawn afresh at every step), and what the staged trainer's results hold (its run, crash
and resume: the shared contract in `tests/experiments`)."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.experiments.contract import TrainerContract
from ttw_jax.talk_the_walk import walks as localization
from ttw_jax.talk_the_walk.full_task import run_full_task
from ttw_jax.talk_the_walk.language import dialogues as td, evaluation as language
from ttw_jax.talk_the_walk.language.guide import NLGuide
from ttw_jax.talk_the_walk.language.tourist import NLTourist, greedy_decode, sample_decode

pytestmark = pytest.mark.usefixtures("fast_compile")  # tiny models: compile fast

V = 12


@pytest.fixture(scope="module")
def agents():
    tourist = NLTourist(vocab_size=V, embed=8, hidden=8)
    guide = NLGuide(vocab_size=V, T_max=2, embed=8, hidden=8, features=8)
    obs, actions = jnp.ones((2, 3, 2), jnp.int32), jnp.zeros((2, 2), jnp.int32)
    tp = jax.jit(tourist.init)(jax.random.key(0), obs, actions, jnp.array([2, 2]),
                      jnp.ones((2, 4), jnp.int32))["params"]
    gp = jax.jit(guide.init)(jax.random.key(1), jnp.ones((2, 5), jnp.int32), jnp.array([5, 3]),
                    jnp.ones((2, 4, 4, 2), jnp.int32))["params"]
    return tourist, tp, guide, gp


def test_pad_walk_gives_zero_move_walks_a_dummy_move():
    obs = jnp.arange(6).reshape(2, 1, 3)
    o, a, n = language.pad_walk(obs, jnp.zeros((2, 0), jnp.int32))
    assert o.shape == (2, 2, 3) and a.shape == (2, 1) and n.tolist() == [0, 0]
    np.testing.assert_array_equal(o[:, 0], obs[:, 0])
    o, a, n = language.pad_walk(jnp.ones((2, 3, 3)), jnp.ones((2, 2), jnp.int32))
    assert o.shape == (2, 3, 3) and a.shape == (2, 2) and n.tolist() == [2, 2]


def test_generated_message_is_tourist_token_then_the_greedy_words(agents):
    tourist, tp, _, _ = agents
    table = jnp.asarray(np.random.default_rng(0).integers(1, 11, (3, 4, 4, 2)), jnp.int32)
    walks = localization.sample_batch(jax.random.key(2), table, 4, 2)
    batch = language.generated_batch(tourist, tp, walks, jax.random.key(3), "greedy", 6)
    tokens, lengths = greedy_decode(tourist, tp, walks["obs"], walks["actions"],
                                    jnp.full((4,), 2), 6)
    assert batch["message"].shape == (4, 7) and batch["T"].tolist() == [2] * 4
    for i in range(4):
        words = [t for t in tokens[i, :int(lengths[i])].tolist() if t != td.EOS]
        n = int(batch["message_len"][i])
        assert n == len(words) + 1
        assert batch["message"][i, :n].tolist() == [td.TOURIST] + words
        assert not batch["message"][i, n:].any()


def test_generated_batch_of_human_trajectories_reads_their_own_moves_and_T(agents):
    """Padded trajectories with per-row num_moves (as `encode_examples` gives them): the tourist
    reads each row's own moves, the guide's T is the batch's T."""
    tourist, tp, _, _ = agents
    r = np.random.default_rng(4)
    obs = jnp.asarray(r.integers(1, 11, (3, 4, 2)), jnp.int32)
    actions = jnp.asarray([[0, 4, 1], [2, 0, 0], [0, 0, 0]], jnp.int32)
    num_moves = jnp.array([3, 1, 0], jnp.int32)
    walks = {"obs": obs, "actions": actions, "num_moves": num_moves, "T": jnp.array([2, 1, 0]),
             "landmarks": jnp.ones((3, 4, 4, 2), jnp.int32), "target": jnp.zeros(3, jnp.int32)}
    batch = language.generated_batch(tourist, tp, walks, jax.random.key(0), "greedy", 6)
    assert batch["T"].tolist() == [2, 1, 0]
    tokens, lengths = greedy_decode(tourist, tp, obs, actions, num_moves, 6)
    for i in range(3):
        words = [t for t in tokens[i, :int(lengths[i])].tolist() if t != td.EOS]
        assert batch["message"][i, :int(batch["message_len"][i])].tolist() == [td.TOURIST] + words
    del walks["T"]
    assert language.generated_batch(tourist, tp, walks, jax.random.key(0), "greedy", 6)[
        "T"].tolist() == [3, 1, 0]


@pytest.mark.parametrize("T", [0, 2])
def test_full_task_runs_with_natural_language_messages(agents, T):
    tourist, tp, guide, gp = agents
    landmarks = jnp.asarray(np.random.default_rng(1).integers(1, 11, (6, 4, 4, 2)), jnp.int32)
    target = jnp.arange(6, dtype=jnp.int32)
    predict = language.nl_predict_fn(tourist, tp, guide, gp, "greedy", 5)
    res = jax.jit(lambda k: run_full_task(k, predict, landmarks, target, T, max_steps=12,
                                          message_keys=True))(jax.random.key(0))
    assert res.success.shape == (6,) and bool(jnp.all(res.steps <= 12))
    assert bool(jnp.all(res.evaluations <= 3))


def test_sampled_utterances_draw_each_row_from_its_own_key(agents):
    tourist, tp, _, _ = agents
    r = np.random.default_rng(0)
    obs, actions = jnp.asarray(r.integers(1, 11, (4, 3, 2))), jnp.asarray(r.integers(0, 4, (4, 2)))
    num_moves = jnp.full((4,), 2)
    keys = jax.random.split(jax.random.key(3), 4)
    tokens, lengths = sample_decode(tourist, tp, obs, actions, num_moves, keys, 8)
    for b in (0, 3):   # a row alone, with its own key, draws the same words
        alone = sample_decode(tourist, tp, obs[b:b + 1], actions[b:b + 1], num_moves[b:b + 1],
                              keys[b:b + 1], 8)
        np.testing.assert_array_equal(alone[0][0], tokens[b])
    other = sample_decode(tourist, tp, obs, actions, num_moves,
                          jax.random.split(jax.random.key(4), 4), 8)[0]
    assert np.any(np.asarray(other) != np.asarray(tokens))


def test_nl_predict_fn_samples_with_the_keys_it_is_given(agents):
    tourist, tp, guide, gp = agents
    r = np.random.default_rng(1)
    obs, actions = jnp.asarray(r.integers(1, 11, (8, 3, 2))), jnp.asarray(r.integers(0, 4, (8, 2)))
    landmarks = jnp.asarray(r.integers(1, 11, (8, 4, 4, 2)))
    predict = jax.jit(language.nl_predict_fn(tourist, tp, guide, gp, "sample", 8))
    k1, k2 = (jax.random.split(jax.random.key(s), 8) for s in (5, 6))
    np.testing.assert_array_equal(predict(obs, actions, landmarks, k1),
                                  predict(obs, actions, landmarks, k1))
    assert np.abs(np.asarray(predict(obs, actions, landmarks, k1))
                  - np.asarray(predict(obs, actions, landmarks, k2))).max() > 1e-6


def test_full_task_gives_every_step_fresh_message_keys():
    """The guide names the corner its message key draws (greedily): with keys fresh at every step
    nearly every episode names its target at some step within 60 (P(never) = (15/16)^60 ~ 0.02);
    with one key reused across an episode's steps only about 1 in 16 would ever ask."""
    e = 64
    landmarks = jnp.asarray(np.random.default_rng(2).integers(1, 11, (e, 4, 4, 2)), jnp.int32)
    target = jnp.arange(e, dtype=jnp.int32) % 16

    def predict(obs, actions, lm, keys):
        drawn = jax.vmap(lambda k: jax.random.randint(k, (), 0, 16))(keys)
        return 50.0 * jax.nn.one_hot(drawn, 16)

    run = lambda slots: jax.jit(lambda k: run_full_task(
        k, predict, landmarks, target, T=0, max_steps=60, max_evals=10 ** 6, greedy=True,
        slots=slots, message_keys=True))(jax.random.key(7))
    res = run(None)
    assert float(jnp.mean(res.evaluations >= 1)) > 0.85
    assert float(jnp.mean(res.evaluations)) > 1.5   # asks again at later steps, too
    fewer = run(8)   # each episode's keys come from its own key alone, whatever the slots
    np.testing.assert_array_equal(fewer.evaluations, res.evaluations)
    np.testing.assert_array_equal(fewer.steps, res.steps)


class TestTrainer(TrainerContract):
    name = "ttw_language"

    def test_every_stage_reports_its_accuracy(self, trained, learned):
        """Measured over 11 runs (seeds 0-4; 0-2 under --xla_cpu_max_isa=AVX2 and AVX;
        tests/learning_spread.py; 8 devices): the tourist's valid CE 4.806-4.826 against
        log(vocabulary) 4.920; on one device, 6 runs (seeds 0-2, default ISA and AVX):
        4.812-4.826."""
        _, res = trained(self.name)
        # it learned something: below the cross-entropy of a uniform guess over the vocabulary
        learned(tourist_valid_ce=(res["tourist"]["valid"]["ce"], "<", np.log(res["vocab_size"])))
        assert set(res["generated"]["T1"]["test"]) == set(language.DECODES)
        pg = res["policy_gradient"]["test"]
        assert {k.split("_")[-1] for k in pg} == set(language.DECODES)
        human = res["human"]["c1_masc"]
        for v in [*(human[s] for s in ("train", "valid", "test")), *pg.values()]:
            assert 0.0 <= v <= 1.0
        assert set(res["full_task"]) == {"T1", "T1_policy_gradient", "human_trajectories_T1"}
        for name in res["full_task"]:
            assert 0.0 <= res["full_task"][name]["test"]["success_rate"] <= 1.0
        # Table 9: E[T] of the T head beside the accuracy, within [0, T_max]
        assert set(human["expected_T"]) == {"train", "valid", "test"}
        assert all(0.0 <= v <= res["config"]["guide"]["T_max"] for v in human["expected_T"].values())
        # Table 12: every beam size of eval.beam_sizes on every split, for each generated guide
        for r in (res["generated"]["T1"], res["human_trajectories"]):
            assert set(r["beam_sizes"]) == {"train", "valid", "test"}
            for s in r["beam_sizes"]:
                assert set(r["beam_sizes"][s]) == {"1", "4"}
                assert all(0.0 <= v <= 1.0 for v in r["beam_sizes"][s].values())
        # Table 15: the human-trajectory guide, evaluated like the random-walk ones
        assert set(res["human_trajectories"]["test"]) == set(language.DECODES)

    def test_samples_file_lists_observations_and_each_tourists_utterances(self, trained):
        workdir, res = trained(self.name)
        with open(os.path.join(workdir, "samples.md"), encoding="utf-8") as f:
            text = f.read()
        assert "## T = 1" in text
        rows = [line for line in text.splitlines() if line.startswith("| ")]
        for name in ("observations", "moves", "human", "supervised greedy", "supervised sample",
                     "supervised beam", "policy gradient greedy", "policy gradient sample"):
            assert any(r.startswith(f"| {name} |") for r in rows), name
        obs = [r for r in rows if r.startswith("| observations |")]
        assert obs and all("(" in r for r in obs)
