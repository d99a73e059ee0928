import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tests.helpers import ALL_RIGHT, assert_bfloat16_loss_close, seeded_key
from ttw_jax.core.train.precision import with_dtype
from ttw_jax.talk_the_walk import maps, walks
from ttw_jax.talk_the_walk.emergent.losses import localization_loss
from ttw_jax.talk_the_walk.emergent.model import Localizer, partition_gate_init

pytestmark = pytest.mark.usefixtures("fast_compile_unless_slow")  # tiny models

T = 2


def tiny_batch(n=16, seed=0):
    table = maps.windows(maps.synthetic_maps(seed, ["fidi"]), "train").landmarks
    return walks.sample_batch(jax.random.key(seed), jnp.asarray(table), n, T)


def init(model, batch, seed=0):
    return jax.jit(model.init)({"params": seeded_key(0, seed), "comm": seeded_key(1, seed)},
                               batch["obs"], batch["actions"], batch["landmarks"])["params"]


@pytest.mark.parametrize("masc", [True, False])
@pytest.mark.parametrize("discrete", [False, True])
def test_shapes_and_every_parameter_gets_a_gradient(masc, discrete):
    batch = tiny_batch()
    model = Localizer(T=T, features=8, num_landmark_ids=maps.NUM_LANDMARK_IDS, masc=masc,
                      discrete=discrete)
    params = init(model, batch)
    out = model.apply({"params": params}, batch["obs"], batch["actions"], batch["landmarks"],
                      rngs={"comm": jax.random.key(2)})
    assert out["logits"].shape == (16, 16)
    assert (out["message"].act is not None) == masc
    if discrete:
        assert out["bits"].obs.shape == (16, 8) and out["baseline"].shape == (16,)
        assert set(np.unique(out["bits"].obs).tolist()) <= {0.0, 1.0}
    loss = lambda p: localization_loss(model.apply, discrete)(p, batch, jax.random.key(3))[0]
    grads = jax.jit(jax.grad(loss))(params)
    for path, g in jax.tree_util.tree_leaves_with_path(grads):
        assert float(jnp.abs(g).sum()) > 0, f"no gradient for {jax.tree_util.keystr(path)}"


def test_masks_are_distributions_over_the_3x3_neighbourhood():
    batch = tiny_batch()
    model = Localizer(T=T, features=8, num_landmark_ids=maps.NUM_LANDMARK_IDS)
    params = init(model, batch)
    masks = model.apply({"params": params}, batch["actions"], method=Localizer.masks)
    assert masks.shape == (16, T, 3, 3)
    np.testing.assert_allclose(masks.sum((-1, -2)), 1.0, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("discrete,dtype", [(False, "float32"), (True, "float32"),
                                            (False, "bfloat16")])
def test_overfits_a_tiny_batch(discrete, dtype, learned, learning_seed):
    """Measured over 11 runs (seeds 0-4; 0-2 under --xla_cpu_max_isa=AVX2 and AVX;
    tests/learning_spread.py): greedy accuracy 1.0 in all; CE 0 (continuous) and 0.002-0.28
    (discrete, bound 0.5)."""
    batch = tiny_batch(n=8, seed=1)
    model = with_dtype(Localizer(T=T, features=32, num_landmark_ids=maps.NUM_LANDMARK_IDS,
                                 discrete=discrete), dtype)
    params = init(model, batch, learning_seed)
    loss_fn = localization_loss(model.apply, discrete)
    if dtype == "bfloat16":
        assert_bfloat16_loss_close(localization_loss(model.module.apply, discrete), loss_fn,
                                   params, batch, jax.random.key(0))
    tx = optax.adam(1e-2)
    opt = tx.init(params)

    @jax.jit
    def step(params, opt, key):
        (_, m), g = jax.value_and_grad(loss_fn, has_aux=True)(params, batch, key)
        upd, opt = tx.update(g, opt)
        return optax.apply_updates(params, upd), opt, m

    # Discrete messages are sampled while training: their greedy accuracy still swings between
    # 7/8 and 8/8 at step 400-500 for some seeds, and holds 8/8 from step 600 (8 seeds).
    for i in range(800 if discrete else 400):
        params, opt, metrics = step(params, opt, seeded_key(i, learning_seed))
    out = model.apply({"params": params}, batch["obs"], batch["actions"], batch["landmarks"],
                      greedy=True)
    learned(greedy_accuracy=(jnp.mean(jnp.argmax(out["logits"], -1) == batch["target"]), ">=",
                            ALL_RIGHT),
            ce=(metrics["ce"], "<", 0.5 if discrete else 0.1))


def test_partition_gates_give_each_dimension_to_one_step():
    g = partition_gate_init(jax.random.key(0), (4, 10))
    owners = np.asarray(g > 0)
    assert owners.sum(0).tolist() == [1] * 10        # one step per dimension
    assert sorted(owners.sum(1).tolist()) == [2, 2, 3, 3]  # balanced over the 4 steps
    assert set(np.unique(np.asarray(g)).tolist()) == {-4.0, 4.0}


def test_discrete_tourist_has_message_biases():
    batch = tiny_batch()
    disc = init(Localizer(T=T, features=8, num_landmark_ids=maps.NUM_LANDMARK_IDS, discrete=True), batch)
    cont = init(Localizer(T=T, features=8, num_landmark_ids=maps.NUM_LANDMARK_IDS), batch)
    assert {"obs_bias", "act_bias"} <= set(disc["tourist"]) and "obs_bias" not in cont["tourist"]


def test_released_initialisation():
    batch = tiny_batch()
    n = 64
    for discrete, map_std in ((False, 0.01), (True, 0.1)):
        model = Localizer(T=T, features=n, num_landmark_ids=maps.NUM_LANDMARK_IDS,
                          discrete=discrete, kernel_init="uniform", init_scheme="released")
        p = init(model, batch)
        np.testing.assert_allclose(np.std(p["tourist"]["act_emb"]["embedding"]), 1.0, rtol=0.15)
        np.testing.assert_allclose(np.std(p["guide"]["map_emb"]["Embed_0"]["embedding"]), map_std,
                                   rtol=0.15)
        kernel = np.asarray(p["guide"]["conv"]["kernel"])
        assert np.abs(kernel).max() <= 1 / (9 * n) and np.abs(kernel).max() > 0.9 / (9 * n)
        extract = p["guide"]["extract_0"]   # PyTorch's Linear: U(+-1/sqrt(fan_in)), bias too
        for w, low in ((extract["kernel"], 0.8), (extract["bias"], 0.4)):   # 576 and 9 draws
            assert low / np.sqrt(n) < np.abs(np.asarray(w)).max() <= 1 / np.sqrt(n)
        assert ("obs_bias" in p["tourist"]) is False   # the released tourist has no bias
    ours = init(Localizer(T=T, features=n, num_landmark_ids=maps.NUM_LANDMARK_IDS, discrete=True),
                batch)
    assert "obs_bias" in ours["tourist"]
    np.testing.assert_allclose(np.std(ours["tourist"]["act_emb"]["embedding"]), 0.1, rtol=0.15)


def test_sum_reduction_scales_the_objective_by_the_batch():
    batch = tiny_batch()
    model = Localizer(T=T, features=8, num_landmark_ids=maps.NUM_LANDMARK_IDS)
    params = init(model, batch)
    mean = localization_loss(model.apply, False)(params, batch, jax.random.key(0))[0]
    total = localization_loss(model.apply, False, reduction="sum")(params, batch, jax.random.key(0))[0]
    np.testing.assert_allclose(total, 16 * mean, rtol=1e-5)
    with pytest.raises(ValueError, match="reduction"):
        localization_loss(model.apply, False, reduction="max")


def test_orientation_aware_localizer_embeds_turns_and_forward():
    table = maps.windows(maps.synthetic_maps(0, ["fidi"]), "train").landmarks
    batch = walks.sample_batch(jax.random.key(0), jnp.asarray(table), 16, T, label="start",
                               orientation_aware=True)
    assert set(np.unique(batch["actions"]).tolist()) <= {4, 5, 6}
    model = Localizer(T=T, features=8, num_landmark_ids=maps.NUM_LANDMARK_IDS, num_actions=7)
    params = init(model, batch)
    assert params["tourist"]["act_emb"]["embedding"].shape == (7, 8)
    masks = model.apply({"params": params}, batch["actions"], method=Localizer.masks)
    assert masks.shape == (16, T, 3, 3)


def test_full_task_samples_fresh_bits_at_every_step():
    """Sampled bits come from each slot's own key: another step's key gives other bits (a key
    reused across steps, as before, would give the same logits); greedy bits ignore the key."""
    from ttw_jax.talk_the_walk.emergent.evaluation import evaluate_full_task, make_predict_fn
    batch = tiny_batch(4)
    model = Localizer(T=T, features=8, num_landmark_ids=maps.NUM_LANDMARK_IDS, discrete=True)
    params = init(model, batch)
    args = batch["obs"], batch["actions"], batch["landmarks"]
    keys = lambda step: jax.vmap(jax.random.fold_in, in_axes=(None, 0))(
        jax.random.key(step), jnp.arange(4))
    sampled = make_predict_fn(model, params, greedy_messages=False)
    a, b = sampled(*args, keys(0)), sampled(*args, keys(1))
    np.testing.assert_array_equal(sampled(*args, keys(0)), a)
    assert not np.allclose(a, b)
    # one slot's logits depend on its own key only
    np.testing.assert_allclose(sampled(*[x[:1] for x in args], keys(0)[:1]), a[:1], rtol=1e-5,
                               atol=1e-6)
    greedy = make_predict_fn(model, params, greedy_messages=True)
    np.testing.assert_array_equal(greedy(*args, keys(0)), greedy(*args, keys(1)))
    # the full task passes each slot's keys to it (one window, a few steps: compile-bound)
    table = maps.windows(maps.synthetic_maps(0, ["fidi"]), "test").landmarks[:1]
    res = evaluate_full_task(model, params, table, jax.random.key(3), T=T, repeats=1,
                             max_steps=6, max_evals=3, greedy=False, greedy_messages=False)
    assert 0.0 <= res["success_rate"] <= 1.0
