"""The emergent-communication train step: jit over the 8-device mesh equals a literal `jax.pmap`
step and a single-device step."""
import jax
import jax.numpy as jnp
import optax
import pytest
from flax.training import train_state

from tests.helpers import assert_jit_step_equals_pmap_step
from ttw_jax.talk_the_walk import maps, walks
from ttw_jax.talk_the_walk.emergent.losses import localization_loss
from ttw_jax.talk_the_walk.emergent.model import Localizer

pytestmark = pytest.mark.usefixtures("fast_compile_unless_slow")  # tiny models


def setup(batch_size=32):
    table = jnp.asarray(maps.windows(maps.synthetic_maps(0, ["hellskitchen"]), "train").landmarks)
    model = Localizer(T=2, features=16, num_landmark_ids=maps.NUM_LANDMARK_IDS)
    batches = [walks.sample_batch(jax.random.key(i), table, batch_size, 2) for i in range(3)]
    b = batches[0]
    params = model.init({"params": jax.random.key(0)}, b["obs"], b["actions"], b["landmarks"])["params"]
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-2))
    return state, batches, localization_loss(model.apply, discrete=False)


@pytest.mark.slow   # a full system train step, compiled three ways for 8 devices
@pytest.mark.fast_compile
def test_jit_mesh_step_equals_pmap_step_and_single_device():
    assert_jit_step_equals_pmap_step(*setup())
