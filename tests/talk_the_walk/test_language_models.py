"""Talk The Walk natural-language tourist and guide: shapes, masking, decoders, losses (tiny sizes)."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training import train_state

from tests.helpers import ALL_RIGHT, assert_bfloat16_loss_close, seeded_key
from ttw_jax.core.train.data_parallel import (batch_sharded, make_mesh, make_train_step, replicate,
                                              shard_global)
from ttw_jax.core.train.precision import with_dtype
from ttw_jax.talk_the_walk.language.guide import NLGuide
from ttw_jax.talk_the_walk.language.losses import (guide_loss, tourist_loss, tourist_pg_loss,
                                                   utterance_message)
from ttw_jax.talk_the_walk.language.tourist import (BOS, EOS, PAD, TOURIST, NLTourist, beam_search,
                                                    greedy_decode, sample_decode, sequence_log_prob)

pytestmark = pytest.mark.usefixtures("fast_compile")  # tiny models: compile fast

V, E, H, B, S, K, L, T_MAX = 20, 16, 16, 8, 3, 2, 8, 3
MAX_LEN = 10


def tourist_batch(seed=0):
    r = np.random.default_rng(seed)
    num_moves = np.array([0, 1, 2, 3, 3, 2, 1, 0], np.int32)
    obs = r.integers(1, 11, (B, S + 1, K)).astype(np.int32)
    actions = r.integers(0, 4, (B, S)).astype(np.int32)
    for i, n in enumerate(num_moves):  # the padding convention: zeros beyond the walk
        obs[i, n + 1:] = 0
        actions[i, n:] = 0
    utt_len = np.array([2, 3, 4, 5, 6, 7, 8, 3], np.int32)  # incl. EOS
    utterance = np.zeros((B, L), np.int32)
    for i, n in enumerate(utt_len):
        utterance[i, :n - 1] = r.integers(6, V, n - 1)
        utterance[i, n - 1] = EOS
    return {"obs": obs, "actions": actions, "num_moves": num_moves, "utterance": utterance,
            "utterance_len": utt_len}


def guide_batch(seed=0):
    """Every cell of a window shows a distinct pair of landmark ids, so the target is identifiable."""
    r = np.random.default_rng(seed)
    pairs = np.array([(a, b) for a in range(1, 11) for b in range(a + 1, 11)], np.int32)
    landmarks = np.stack([pairs[r.permutation(len(pairs))[:16]].reshape(4, 4, 2) for _ in range(B)])
    message_len = np.array([1, 2, 3, 4, 5, 6, 7, 8], np.int32)
    message = np.zeros((B, L), np.int32)
    for i, n in enumerate(message_len):
        message[i, :n] = r.integers(4, V, n)
    return {"message": message, "message_len": message_len, "landmarks": landmarks,
            "target": r.permutation(16)[:B].astype(np.int32), "T": np.full((B,), T_MAX, np.int32)}


def init_key(seed, learning_seed=0):
    """RBG keys: initialisers compile much faster than with threefry (the CI time budget); a
    learning test's seed is folded in."""
    key = jax.random.key(seed, impl="unsafe_rbg")
    return key if learning_seed == 0 else jax.random.fold_in(key, learning_seed)


def walk(batch):
    return batch["obs"], batch["actions"], batch["num_moves"]


def fit(loss_fn, params, batch, steps, lr, tx=None, seed=0):
    """`steps` jitted optimizer steps -> (params, last metrics, first step's gradients); `seed`
    (a learning seed) shifts the steps' keys."""
    tx = tx or optax.adam(lr)
    opt = tx.init(params)

    @jax.jit
    def step(params, opt, key):
        (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch, key)
        updates, opt = tx.update(grads, opt, params)
        return optax.apply_updates(params, updates), opt, metrics, grads

    first = None
    for i in range(steps):
        params, opt, metrics, grads = step(params, opt, jax.random.fold_in(seeded_key(0, seed), i))
        first = grads if first is None else first
    return params, metrics, first


def tourist_params(model, batch, learning_seed=0):
    return jax.jit(model.init)(init_key(0, learning_seed), *walk(batch),
                               batch["utterance"])["params"]


def guide_params(model, batch, learning_seed=0):
    return jax.jit(model.init)(init_key(1, learning_seed), batch["message"],
                               batch["message_len"], batch["landmarks"])["params"]


@pytest.fixture(scope="module")
def tourist():
    model = NLTourist(V, embed=E, hidden=H)
    batch = tourist_batch()
    return model, tourist_params(model, batch), batch


@pytest.fixture(scope="module")
def trained_tourist(tourist, request):
    """The tourist trained on its batch from the parameters of the learning seed."""
    model, params, batch = tourist
    seed = request.config.getoption("learning_seed")
    if seed:
        params = tourist_params(model, batch, seed)
    return fit(tourist_loss(model.apply), params, batch, 150, 3e-2, seed=seed)


@pytest.fixture(scope="module")
def guide():
    model = NLGuide(V, T_max=T_MAX, embed=E, hidden=H, features=E)
    batch = guide_batch()
    return model, guide_params(model, batch), batch


@pytest.fixture(scope="module")
def guide_apply(guide):
    model = guide[0]
    return jax.jit(lambda p, msg, msg_len, lms, T: model.apply({"params": p}, msg, msg_len, lms, T=T))


def assert_all_grads_finite_nonzero(grads):
    for path, g in jax.tree_util.tree_leaves_with_path(grads):
        assert np.all(np.isfinite(g)), path
        assert np.abs(g).sum() > 0, f"zero gradient for {jax.tree_util.keystr(path)}"


def random_params(params, seed=0):
    """An untrained tourist with N(0, 1) weights and an EOS bias: rows end at different steps."""
    r = np.random.default_rng(seed)
    params = jax.tree_util.tree_map(lambda x: jnp.asarray(r.normal(size=x.shape), x.dtype), params)
    params["out"]["bias"] = params["out"]["bias"].at[EOS].add(1.0)
    return params


def check_decoded(tokens, lengths, max_len):
    tokens, lengths = np.asarray(tokens), np.asarray(lengths)
    assert tokens.shape == (B, max_len) and tokens.dtype == np.int32 and lengths.dtype == np.int32
    for row, n in zip(tokens, lengths):
        assert 1 <= n <= max_len
        assert np.all(row[n:] == PAD)
        assert np.all((row[:n - 1] != PAD) & (row[:n - 1] != BOS) & (row[:n - 1] != EOS))
        assert row[n - 1] == EOS or n == max_len


# ---------------------------------------------------------------- tourist


def test_tourist_shapes_masking_and_gradients(tourist):
    model, params, batch = tourist
    apply = jax.jit(lambda p, obs, actions: (
        model.apply({"params": p}, obs, actions, batch["num_moves"], batch["utterance"]),
        model.apply({"params": p}, obs, actions, batch["num_moves"], method=NLTourist.context)))
    logits, ctx = apply(params, batch["obs"], batch["actions"])
    assert logits.shape == (B, L, V) and ctx.shape == (B, 2 * H)
    no_moves = batch["num_moves"] == 0
    np.testing.assert_array_equal(ctx[no_moves, H:], 0.0)  # zero action context without moves
    assert np.all(np.abs(ctx[~no_moves, H:]).max(axis=1) > 0)
    # Observations beyond num_moves + 1 and actions beyond num_moves are ignored.
    r = np.random.default_rng(5)
    obs, actions = batch["obs"].copy(), batch["actions"].copy()
    for i, n in enumerate(batch["num_moves"]):
        obs[i, n + 1:] = r.integers(1, 11, obs[i, n + 1:].shape)
        actions[i, n:] = r.integers(0, 4, actions[i, n:].shape)
    np.testing.assert_allclose(apply(params, obs, actions)[0], logits, atol=1e-6)

    loss_fn = jax.jit(tourist_loss(model.apply))
    loss, metrics = loss_fn(params, batch, None)
    assert set(metrics) == {"loss", "ce", "token_accuracy", "perplexity"}
    np.testing.assert_allclose(metrics["perplexity"], np.exp(loss), rtol=1e-5)
    # Tokens beyond utterance_len do not count.
    noisy = dict(batch, utterance=np.where(np.arange(L)[None] < batch["utterance_len"][:, None],
                                           batch["utterance"], 7))
    np.testing.assert_allclose(loss_fn(params, noisy, None)[0], loss, rtol=1e-6)


def test_decoders_untrained(tourist):
    model, params, batch = tourist
    params = random_params(params)  # rows end at different steps
    w = walk(batch)
    greedy = greedy_decode(model, params, *w, MAX_LEN)
    beam1 = beam_search(model, params, *w, MAX_LEN, 1)
    check_decoded(*greedy, MAX_LEN)
    check_decoded(*beam1, MAX_LEN)
    lengths = np.asarray(greedy[1])
    assert lengths.min() < MAX_LEN and len(set(lengths.tolist())) > 1, lengths
    np.testing.assert_array_equal(beam1[0], greedy[0])
    np.testing.assert_array_equal(beam1[1], greedy[1])
    cold = sample_decode(model, params, *w, jax.random.key(3), MAX_LEN, temperature=1e-6)
    np.testing.assert_array_equal(cold[0], greedy[0])
    np.testing.assert_array_equal(cold[1], greedy[1])
    warm = sample_decode(model, params, *w, jax.random.key(3), MAX_LEN)
    check_decoded(*warm, MAX_LEN)
    assert not np.array_equal(warm[0], greedy[0])


@pytest.mark.slow
def test_decoders_trained(tourist, trained_tourist, learned):
    """Measured over 11 runs (seeds 0-4; 0-2 under --xla_cpu_max_isa=AVX2 and AVX;
    tests/learning_spread.py): token accuracy 1.0 (bound 0.97), every greedy length right (bound
    0.75), 8 of 8 rows finished (bound 6)."""
    model, _, batch = tourist
    params, metrics, first_grads = trained_tourist
    assert_all_grads_finite_nonzero(first_grads)
    w = walk(batch)
    greedy = greedy_decode(model, params, *w, MAX_LEN)
    beam1 = beam_search(model, params, *w, MAX_LEN, 1)
    np.testing.assert_array_equal(beam1[0], greedy[0])
    np.testing.assert_array_equal(beam1[1], greedy[1])
    finished = (np.asarray(greedy[0])[np.arange(B), np.asarray(greedy[1]) - 1] == EOS)
    learned(token_accuracy=(metrics["token_accuracy"], ">", 0.97),   # 8 examples memorised
            greedy_length_right=(np.mean(np.asarray(greedy[1]) == batch["utterance_len"]), ">=",
                                 0.75),                              # rows end at 2..8
            greedy_finished=(finished.sum(), ">=", 6))
    beam4 = beam_search(model, params, *w, MAX_LEN, 4)
    check_decoded(*beam4, MAX_LEN)
    lp_greedy = sequence_log_prob(model, params, *w, *greedy)
    lp_beam = sequence_log_prob(model, params, *w, *beam4)
    # Not a theorem for beam search, but holds for this model (and the untrained one below).
    assert np.all(np.asarray(lp_beam)[finished] >= np.asarray(lp_greedy)[finished] - 1e-4)


def test_beam_search_on_untrained_model(tourist):
    """Against a plain Python beam search; and (for this model, not a theorem) not worse than greedy."""
    model, params, batch = tourist
    params = random_params(params)
    w = walk(batch)
    greedy = greedy_decode(model, params, *w, MAX_LEN)
    beam4 = beam_search(model, params, *w, MAX_LEN, 4)
    lp_greedy = np.asarray(sequence_log_prob(model, params, *w, *greedy))
    lp_beam = np.asarray(sequence_log_prob(model, params, *w, *beam4))
    ended = lambda t, n: np.asarray(t)[np.arange(B), np.asarray(n) - 1] == EOS
    both = ended(*greedy) & ended(*beam4)
    assert both.sum() >= 4
    assert np.all(lp_beam[both] >= lp_greedy[both] - 1e-4)
    assert np.any(lp_beam > lp_greedy + 1e-3)  # the search does find better sequences

    ctx = model.apply({"params": params}, *w, method=NLTourist.context)
    step = jax.jit(lambda carry, tok, c: model.apply({"params": params}, carry, tok, c,
                                                     method=NLTourist.decode_step))
    for i in range(B):
        zero = jnp.zeros((1, H))
        beams = [(0.0, [], (zero, zero))]  # (score, tokens, carry); finished when tokens end in EOS
        for _ in range(MAX_LEN):
            cands = []
            for score, toks, carry in beams:
                if toks and toks[-1] == EOS:
                    cands.append((score, toks, carry))
                    continue
                new_carry, logits = step(carry, jnp.array([toks[-1] if toks else BOS]), ctx[i:i + 1])
                logp = np.asarray(jax.nn.log_softmax(logits[0]))
                cands += [(score + logp[v], toks + [int(v)], new_carry) for v in np.argsort(-logp)[:4]]
            beams = sorted(cands, key=lambda c: -c[0])[:4]
        assert np.asarray(beam4[0][i, :beam4[1][i]]).tolist() == beams[0][1]
        np.testing.assert_allclose(lp_beam[i], beams[0][0], rtol=1e-4)


def test_utterance_message():
    tokens = jnp.array([[7, 8, EOS, 0], [9, 9, 9, 9]], jnp.int32)
    lengths = jnp.array([3, 4], jnp.int32)
    msg, n = utterance_message(tokens, lengths)
    np.testing.assert_array_equal(msg, [[TOURIST, 7, 8, 0, 0], [TOURIST, 9, 9, 9, 9]])
    np.testing.assert_array_equal(n, [3, 5])
    prefix = jnp.array([[5, 11, 0], [5, 12, 13]], jnp.int32)
    msg, n = utterance_message(tokens, lengths, prefix, jnp.array([2, 3]))
    np.testing.assert_array_equal(msg, [[5, 11, TOURIST, 7, 8, 0, 0, 0],
                                        [5, 12, 13, TOURIST, 9, 9, 9, 9]])
    np.testing.assert_array_equal(n, [5, 8])


def test_tourist_policy_gradient_step(tourist, guide):
    model, params, tbatch = tourist
    gmodel, gparams, gbatch = guide
    batch = dict(tbatch, landmarks=gbatch["landmarks"], target=gbatch["target"],
                 T=np.array([0, 1, 2, 3] * 2, np.int32))
    loss_fn = tourist_pg_loss(model, gmodel, max_len=6, entropy=0.01)
    mesh = make_mesh()
    step = make_train_step(loss_fn, mesh, num_consts=1)
    state = replicate(train_state.TrainState.create(apply_fn=model.apply, params=params,
                                                    tx=optax.sgd(1.0)), mesh)
    new, metrics = step(state, shard_global(batch, batch_sharded(mesh)), jax.random.key(1),
                        replicate(gparams, mesh))
    assert set(metrics) >= {"loss", "reward", "accuracy"}
    assert all(np.isfinite(float(v)) for v in metrics.values())
    assert float(metrics["reward"]) < 0  # -CE
    # SGD with lr 1: every parameter moved by its (finite, nonzero) gradient.
    assert_all_grads_finite_nonzero(jax.tree_util.tree_map(lambda a, b: np.asarray(a) - np.asarray(b),
                                                           new.params, params))


# ---------------------------------------------------------------- guide


def test_guide_masc_and_no_masc_shapes(guide, guide_apply):
    model, params, batch = guide
    args = (batch["message"], batch["message_len"], batch["landmarks"])
    no_masc = model.clone(masc=False)
    out_nm, p_nm = jax.eval_shape(no_masc.init_with_output, jax.random.key(0), *args, T=batch["T"])
    assert "mask_linear" in params and "mask_linear" not in p_nm["params"]
    assert "act_control0" in params and "act_control0" not in p_nm["params"]
    assert "conv" in p_nm["params"]
    for out in (guide_apply(params, *args, batch["T"]), out_nm):
        assert out["logits"].shape == (B, 16) and out["T_logits"].shape == (B, T_MAX + 1)
        assert out["logits_all"].shape == (B, T_MAX + 1, 16)


def test_guide_message_and_T_masking(guide, guide_apply):
    model, params, batch = guide
    apply = lambda p, msg, T: guide_apply(p, msg, batch["message_len"], batch["landmarks"], T)
    T = jnp.array([0, 3, 0, 3, 1, 2, 0, 3], jnp.int32)
    out = apply(params, batch["message"], T)
    np.testing.assert_allclose(out["logits"], out["logits_all"][np.arange(B), T], rtol=1e-6)
    # Tokens beyond message_len change nothing.
    noisy = np.where(np.arange(L)[None] < batch["message_len"][:, None], batch["message"], 9)
    noisy_out = apply(params, noisy, T)
    for key in ("logits", "T_logits"):
        np.testing.assert_allclose(noisy_out[key], out[key], atol=1e-5)
    # Rows with T=0 ignore the action extractions, the MASC steps and the later gates.
    changed = dict(params)
    for name in ("mask_linear", "act_control_next"):
        changed[name] = jax.tree_util.tree_map(lambda x: x + 1.0, params[name])
    changed["act_control0"] = params["act_control0"] + 1.0
    changed["conv"] = {"kernel": params["conv"]["kernel"] * 2.0}
    changed["map_gates"] = params["map_gates"].at[1:].add(1.0)
    changed["obs_gates"] = params["obs_gates"].at[1:].add(1.0)
    new = apply(changed, batch["message"], T)["logits"]
    zero = np.asarray(T) == 0
    np.testing.assert_allclose(new[zero], out["logits"][zero], rtol=1e-6)
    assert np.all(np.abs(new[~zero] - out["logits"][~zero]).max(axis=1) > 1e-6)


@pytest.mark.slow
def test_guide_overfits_and_T_head_learns_the_best_T(guide, guide_apply, learned, learning_seed):
    """Measured over 11 runs (seeds 0-4; 0-2 under --xla_cpu_max_isa=AVX2 and AVX;
    tests/learning_spread.py): accuracy 1.0; the best T's probability gains 0.36-0.52 (bound 0.1);
    the expected CE falls to 0.017-0.064 of its start (bound 0.7)."""
    model, params, batch = guide
    if learning_seed:
        params = guide_params(model, batch, learning_seed)
    params, metrics, grads = fit(guide_loss(model.apply, "fixed"), params, batch, 150, 2e-2,
                                 seed=learning_seed)
    learned(accuracy=(metrics["accuracy"], ">=", ALL_RIGHT))
    # A fixed T trains everything but the T head.
    np.testing.assert_array_equal(grads.pop("T_head")["kernel"], 0.0)
    assert_all_grads_finite_nonzero(grads)
    # REINFORCE on the T head alone: probability moves to the T with the lowest CE (here the
    # trained T_max and possibly ties), and the expected CE under p(T) falls.
    args = (batch["message"], batch["message_len"], batch["landmarks"], batch["T"])
    out = guide_apply(params, *args)
    ce = np.asarray(optax.softmax_cross_entropy_with_integer_labels(out["logits_all"],
                                                                    batch["target"][:, None]))
    best = ce.mean(0) <= ce.mean(0).min() + 0.05
    assert best[T_MAX] and not best.all(), ce.mean(0)
    predict = guide_loss(model.apply, "predict")
    head_loss = lambda head, b, key: predict(dict(params, T_head=head), b, key)
    head, metrics, grads = fit(head_loss, params["T_head"], batch, 40, None, tx=optax.sgd(0.5),
                               seed=learning_seed)
    assert set(metrics) >= {"loss", "ce", "accuracy", "mean_T", "T_loss"}
    assert_all_grads_finite_nonzero(grads)
    out2 = guide_apply(dict(params, T_head=head), *args)
    p_before, p_after = jax.nn.softmax(out["T_logits"]), jax.nn.softmax(out2["T_logits"])
    learned(p_best_T_gain=(p_after[:, best].sum(1).mean() - p_before[:, best].sum(1).mean(), ">",
                           0.1),
            expected_ce_after_over_before=((p_after * ce).sum(1).mean()
                                           / (p_before * ce).sum(1).mean(), "<", 0.7))


@pytest.mark.slow
def test_guide_overfits_in_bfloat16(guide, learned, learning_seed):
    """Measured over 11 runs (seeds 0-4; 0-2 under --xla_cpu_max_isa=AVX2 and AVX;
    tests/learning_spread.py): accuracy 1.0 in all."""
    model, params, batch = guide
    if learning_seed:
        params = guide_params(model, batch, learning_seed)
    mixed = with_dtype(model, "bfloat16")
    assert_bfloat16_loss_close(guide_loss(model.apply, "fixed"), guide_loss(mixed.apply, "fixed"),
                               params, batch, jax.random.key(0))
    _, metrics, _ = fit(guide_loss(mixed.apply, "fixed"), params, batch, 150, 2e-2,
                        seed=learning_seed)
    learned(accuracy=(metrics["accuracy"], ">=", ALL_RIGHT))


def test_T_reinforce_sign(learned, learning_seed):
    """A T with lower cross-entropy must become more likely (fake guide: T = 2 is right)."""
    target = jnp.arange(B) % 16
    good = jax.nn.one_hot(target, 16) * 8.0

    def apply_fn(variables, message, message_len, landmarks, T=None):
        logits_all = jnp.stack([good if t == 2 else jnp.zeros((B, 16)) for t in range(T_MAX + 1)], 1)
        T_logits = jnp.broadcast_to(variables["params"]["w"], (B, T_MAX + 1))
        return {"logits": logits_all[:, -1], "logits_all": logits_all, "T_logits": T_logits}

    batch = {"message": None, "message_len": None, "landmarks": None, "target": target}
    params = {"w": jnp.zeros(T_MAX + 1)}
    trained, _, _ = fit(guide_loss(apply_fn, "predict"), params, batch, 30, None, tx=optax.sgd(0.5),
                        seed=learning_seed)
    p = jax.nn.softmax(trained["w"])
    learned(p_T2=(p[2], ">", 0.6), argmax_T=(p.argmax(), "==", 2))
