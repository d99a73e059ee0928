import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from ttw_jax.talk_the_walk import maps, walks
from ttw_jax.talk_the_walk.emergent.losses import localization_loss
from ttw_jax.talk_the_walk.emergent.model import Localizer, partition_gate_init

pytestmark = pytest.mark.usefixtures("fast_compile_unless_slow")  # tiny models

T = 2


def tiny_batch(n=16, seed=0):
    table = maps.windows(maps.synthetic_maps(seed, ["fidi"]), "train").landmarks
    return walks.sample_batch(jax.random.key(seed), jnp.asarray(table), n, T)


def init(model, batch):
    return jax.jit(model.init)({"params": jax.random.key(0), "comm": jax.random.key(1)},
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
@pytest.mark.parametrize("discrete", [False, True])
def test_overfits_a_tiny_batch(discrete):
    batch = tiny_batch(n=8, seed=1)
    model = Localizer(T=T, features=32, num_landmark_ids=maps.NUM_LANDMARK_IDS, discrete=discrete)
    params = init(model, batch)
    loss_fn = localization_loss(model.apply, discrete)
    tx = optax.adam(1e-2)
    opt = tx.init(params)

    @jax.jit
    def step(params, opt, key):
        (_, m), g = jax.value_and_grad(loss_fn, has_aux=True)(params, batch, key)
        upd, opt = tx.update(g, opt)
        return optax.apply_updates(params, upd), opt, m

    for i in range(400):
        params, opt, metrics = step(params, opt, jax.random.key(i))
    out = model.apply({"params": params}, batch["obs"], batch["actions"], batch["landmarks"],
                      greedy=True)
    assert float(jnp.mean(jnp.argmax(out["logits"], -1) == batch["target"])) == 1.0
    assert float(metrics["ce"]) < (0.5 if discrete else 0.1)


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
