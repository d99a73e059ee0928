"""The VALAN agent and learner (issue 55): parameter counts at VALAN's sizes by hand, step shapes
and masking, the encoder's padding, V-trace and the value loss against hand-computed examples,
gradients of the actor-critic loss, the 128-d angle encoding, the exponential learning-rate
schedule, and a few trainer steps of the paper's learner on the synthetic data."""
import functools
import json
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from tests.experiments.trainers import TRAINERS
from tests.rxr.test_rcm import corridor
from ttw_jax.core.env import batched
from ttw_jax.core.train.run import learning_rate_schedule, optim_config
from ttw_jax.rxr import env as mp
from ttw_jax.rxr.graph import geodesic_table
from ttw_jax.rxr.losses import discounted_returns, mixed_loss, vtrace
from ttw_jax.rxr.rcm import RCMAgent
from ttw_jax.rxr.valan import ValanAgent

pytestmark = pytest.mark.usefixtures("fast_compile_unless_slow")  # tiny models
RXR = TRAINERS["rxr"]


def lstm(i, h):
    """flax OptimizedLSTMCell: four input kernels [i, h] (no bias), four hidden kernels [h, h]
    with a bias each."""
    return 4 * h * (i + h) + 4 * h


def dense(i, o):
    return i * o + o


def count(params):
    return sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(params))


def shapes_init(model, b=2, length=4, feat=10, k=5, text_dim=None):
    text = jnp.zeros((b, length, text_dim)) if text_dim else None
    return jax.eval_shape(model.init, jax.random.key(0), jnp.ones((b, length), jnp.int32),
                          jnp.full((b,), length), jnp.zeros((b, 36, feat)),
                          jnp.zeros((b, k, feat + 2)), jnp.ones((b, k), bool), text)


def test_parameter_count_at_valans_sizes_by_hand():
    """The paper's agent: mBERT features (768-d), 2,048-d view features with 128-d angles, no
    structural features; VALAN's sizes (the defaults)."""
    f = 2048 + 128
    model = ValanAgent(vocab_size=1000, use_structure=False, angle_dim=128)
    by_hand = (dense(768, 256)                                  # text-feature projection
               + 2 * lstm(256, 256) + 2 * lstm(512, 256)        # 2 bidirectional layers
               + dense(2 * 2 * 2 * 256, 2 * 2 * 512)            # final states -> decoder's
               + dense(512, 512)                                # instruction keys
               + dense(512, 256) + dense(f, 256) + 1            # view pooling (+ scale)
               + lstm(256 + 256, 512) + lstm(512, 512)          # decoder: [v_t; prev action]
               + dense(256 + 512, 512)                          # tanh(W [v_t; h])
               + dense(512, 512) + 1                            # text attention query, scale
               + dense(512, 256) + dense(f, 256) + 1            # visual attention
               + dense(512 + 512 + 256, 256) + dense(f, 256)    # action query, directions
               + 256 + 256                                      # STOP, start encodings
               + dense(512, 64) + dense(64, 1))                 # value head
    assert by_hand == 14_432_132
    assert count(shapes_init(model, feat=f, text_dim=768)) == by_hand
    # word embeddings, structural features, no previous action, other sizes
    small = ValanAgent(vocab_size=50, embed_dim=8, encoder=6, encoder_layers=1, decoder=10,
                       decoder_layers=3, text_attention=7, visual_attention=5, action=4,
                       value_hidden=3, embed_action=False)
    f = 10 + 4
    by_hand = (50 * 8 + 2 * lstm(8, 6) + dense(1 * 2 * 2 * 6, 3 * 2 * 10) + dense(12, 7)
               + dense(10, 5) + dense(f, 5) + 1
               + lstm(5, 10) + 2 * lstm(10, 10)
               + dense(10, 7) + 1 + dense(7, 5) + dense(f, 5) + 1
               + dense(10 + 7 + 5, 4) + dense(f + 2, 4) + 4 + 4 + dense(7, 3) + dense(3, 1))
    assert count(shapes_init(small, feat=f)) == by_hand
    # RCMAgent's optional value head (configs/paper.py's): Dense(H, 64) -> ReLU -> Dense(64, 1)
    plain, valued = (RCMAgent(50, embed_dim=8, hidden=12, value_hidden=v) for v in (0, 64))
    assert count(shapes_init(valued)) - count(shapes_init(plain)) == dense(12, 64) + dense(64, 1)


def small_agent(**kw):
    sizes = dict(embed_dim=8, encoder=8, decoder=16, text_attention=12, visual_attention=8,
                 action=8, value_hidden=4)
    return ValanAgent(vocab_size=20, **{**sizes, **kw})


def test_step_shapes_masks_and_padding():
    model = small_agent()
    b, k, f = 3, 5, 10
    rng = np.random.default_rng(0)
    tokens = jnp.asarray(rng.integers(1, 20, (b, 6)), jnp.int32)
    lengths = jnp.asarray([6, 3, 1])
    views = jnp.asarray(rng.normal(size=(b, 36, f)), jnp.float32)
    cands = jnp.asarray(rng.normal(size=(b, k, f + 2)), jnp.float32)
    cand_mask = jnp.asarray([[1, 1, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1]], bool)
    params = jax.jit(model.init)(jax.random.key(0), tokens, lengths, views, cands, cand_mask)
    encode = jax.jit(lambda p, tok, n: model.apply(p, tok, n, method="encode"))
    (keys, state), mask = encode(params, tokens, lengths)
    assert keys.shape == (b, 6, 12) and state.shape == (b, 2 * 2 * 16)
    carry = model.apply(params, b, (keys, state), method="initial_carry")
    assert [x.shape for x in jax.tree_util.tree_leaves(carry)] == [(b, 16)] * 4 + [(b, 8)]
    new, out = jax.jit(functools.partial(model.apply, method="step"))(
        params, carry, (keys, state), mask, views, cands, cand_mask)
    assert {n: v.shape for n, v in out.items()} == {
        "logits": (b, k + 1), "vis_logits": (b, 36), "txt_logits": (b, 6),
        "action_features": (b, k + 1, 8), "value": (b,)}
    assert len(new) == 2 and new[0][0].shape == (b, 16)
    valid = np.concatenate([np.ones((b, 1), bool), np.asarray(cand_mask)], 1)
    probs = np.asarray(jax.nn.softmax(out["logits"]))
    assert (probs[~valid] < 1e-6).all()
    assert (np.asarray(out["txt_logits"])[~np.asarray(mask)] <= -1e8).all()
    # padding changes nothing: the same instructions padded to 9 with other token ids
    longer = jnp.concatenate([tokens, jnp.full((b, 3), 7, jnp.int32)], 1).at[1, 3:].set(5)
    (keys2, state2), _ = encode(params, longer, lengths)
    np.testing.assert_allclose(np.where(mask[..., None], keys2[:, :6], 0),
                               np.where(mask[..., None], keys, 0), atol=1e-6)
    np.testing.assert_allclose(state2, state, atol=1e-6)
    # the vision-only ablation never reads the instruction
    blind = small_agent(use_language=False)
    blind_encode = jax.jit(lambda tok, n: blind.apply(params, tok, n, method="encode"))
    a, c = blind_encode(tokens, lengths), blind_encode(tokens[::-1], lengths[::-1])
    jax.tree.map(np.testing.assert_array_equal, a, c)


def test_vtrace_by_hand():
    """T = 3, gamma 0.95, rewards (1, 0, 2), values (0.5, 1, 1.5), bootstrap 2."""
    r = jnp.asarray([1.0, 0.0, 2.0])
    v = jnp.asarray([0.5, 1.0, 1.5])
    d = jnp.full(3, 0.95)
    boot = jnp.asarray(2.0)
    vs, adv = vtrace(jnp.zeros(3), d, r, v, boot)
    # on-policy: vs_2 = 2 + .95 * 2 = 3.9; vs_1 = .95 * 3.9 = 3.705; vs_0 = 1 + .95 * 3.705
    np.testing.assert_allclose(vs, [4.51975, 3.705, 3.9], rtol=1e-6)
    # adv_t = r_t + .95 vs_{t+1} - V_t = vs_t - V_t
    np.testing.assert_allclose(adv, [4.01975, 2.705, 2.4], rtol=1e-6)
    # an episode end at t = 1 (discount 0): nothing flows back across it
    vs, adv = vtrace(jnp.zeros(3), jnp.asarray([0.95, 0.0, 0.95]), r, v, boot)
    np.testing.assert_allclose(vs, [1.0, 0.0, 3.9], rtol=1e-6)
    np.testing.assert_allclose(adv, [0.5, -1.0, 2.4], rtol=1e-6)
    # off-policy: rho = (2, 0.5, 1) clipped at 1 -> rho = c = (1, 0.5, 1)
    # deltas: 1 + .95 - .5 = 1.45; .5 (0 + .95 * 1.5 - 1) = .2125; 2 + .95 * 2 - 1.5 = 2.4
    # vs - V: 2.4; .2125 + .95 * .5 * 2.4 = 1.3525; 1.45 + .95 * 1.3525 = 2.734875
    vs, adv = vtrace(jnp.log(jnp.asarray([2.0, 0.5, 1.0])), d, r, v, boot)
    np.testing.assert_allclose(vs, [3.234875, 2.3525, 3.9], rtol=1e-6)
    # adv: 1 + .95 * 2.3525 - .5; .5 (.95 * 3.9 - 1); 2 + .95 * 2 - 1.5
    np.testing.assert_allclose(adv, [2.734875, 1.3525, 2.4], rtol=1e-6)
    # on-policy with zero values and no ends: the discounted returns
    rb = jnp.asarray([[1.0, 0.5], [0.0, 2.0], [2.0, -1.0]])
    vs, _ = vtrace(jnp.zeros_like(rb), jnp.full_like(rb, 0.9), rb, jnp.zeros_like(rb),
                   jnp.zeros(2))
    np.testing.assert_allclose(vs, discounted_returns(rb, 0.9), rtol=1e-6)


class Scripted(nn.Module):
    """A stand-in agent with RCMAgent's interface: action 1 (north) at step 0, then STOP; its
    value V_t = a + b t (two parameters)."""

    def setup(self):
        self.a = self.param("a", lambda k: jnp.asarray(0.25))
        self.b = self.param("b", lambda k: jnp.asarray(0.5))

    def encode(self, tokens, lengths, text_features=None):
        return jnp.zeros(tokens.shape + (2,)), jnp.ones(tokens.shape, bool)

    def initial_carry(self, batch_size, ctx=None):
        return jnp.zeros((batch_size,)), jnp.zeros((batch_size, 2))

    def step(self, carry, ctx, ctx_mask, views, cands, cand_mask, t=0):
        (n,), b = carry[:1], cand_mask.shape[0]
        k = cand_mask.shape[1] + 1
        want = jnp.where(t == 0, 1, 0)
        logits = jnp.where(jnp.arange(k) == want, 20.0, -20.0) * jnp.ones((b, 1))
        value = (self.a + self.b * t) * jnp.ones(b)
        return (n + 1,), dict(logits=logits, vis_logits=jnp.zeros((b, 36)),
                              txt_logits=jnp.zeros(ctx_mask.shape),
                              action_features=jnp.zeros((b, k, 2)), value=value)

    def __call__(self):
        return None


def test_value_loss_by_hand_on_a_corridor():
    """Row 1 (sampled) walks 1 -> 2 and stops, reference [1, 2, 3] (line distances): r_0 is the
    nDTW gain exp(-1/9) - exp(-1/3), r_1 the end term 1 - NE / 3 = 2/3. Discount 0.95, the
    episode ends at t = 1: vs_1 = 2/3, vs_0 = r_0 + .95 * 2/3; V = (0.25, 0.75); the value loss
    is the mean over the row's two steps of 0.5 (vs - V)^2, the gradient of baseline_cost *
    that / B reaches a and b, and row 0 (cloned) adds nothing to it."""
    host = corridor(5)
    graph = jax.device_put(host)
    geo = jax.device_put(geodesic_table(host, np.zeros(5, np.int32)))
    batch = {"start": jnp.asarray([1, 1]), "heading": jnp.asarray([0.0, 0.0]),
             "path": jnp.asarray([[1, 2, 3], [1, 2, 3]]), "path_len": jnp.asarray([3, 3]),
             "gold": jnp.asarray([[1, 1, 0], [1, 1, 0]]), "tokens": jnp.ones((2, 3), jnp.int32),
             "token_len": jnp.asarray([3, 3])}
    model = Scripted()
    params = {"params": {"a": jnp.asarray(0.25), "b": jnp.asarray(0.5)}}
    config = ml_collections.ConfigDict(dict(
        horizon=4, bc_every=2, gamma=0.95, stop_reward=1.0, entropy_weight=0.0,
        visual_grounding=0.0, textual_grounding=0.0, grounding_steps="cloned",
        success_radius=3.0, pg="actor_critic", baseline_cost=0.5, entropy_norm="mean"))
    loss_fn = mixed_loss(model, config)
    feats = jnp.zeros((5, 36, 0))
    (loss, m), grads = jax.value_and_grad(loss_fn, has_aux=True)(
        params, batch, jax.random.key(0), graph, feats, geo)
    r0, r1 = math.exp(-1 / 9) - math.exp(-1 / 3), 2 / 3
    vs = np.asarray([r0 + 0.95 * r1, r1])
    values = np.asarray([0.25, 0.75])
    assert float(m["pg_return"]) == pytest.approx(r0 + r1, rel=1e-5)
    assert float(m["value_loss"]) == pytest.approx(np.mean(0.5 * (vs - values) ** 2), rel=1e-5)
    # d/da, d/db of 0.5 * mean_t 0.5 (vs_t - a - b t)^2 / 2
    err = values - vs
    assert float(grads["params"]["a"]) == pytest.approx(0.5 * np.mean(err) / 2, rel=1e-5)
    assert float(grads["params"]["b"]) == pytest.approx(0.5 * np.mean(err * [0, 1]) / 2,
                                                        rel=1e-5)
    assert float(m["entropy"]) < 1e-6            # a deterministic policy


@pytest.mark.parametrize("arch", ["valan", "rcm"])
def test_actor_critic_gradients_reach_every_parameter_and_the_value_head(arch):
    host = corridor(6)
    graph = jax.device_put(host)
    geo = jax.device_put(geodesic_table(host, np.zeros(6, np.int32)))
    feats = jnp.asarray(np.random.default_rng(0).normal(size=(6, 36, 6)), jnp.float32)
    model = (small_agent(angle_dim=128, encoder_layers=1, decoder_layers=1)  # compiles faster
             if arch == "valan" else RCMAgent(20, 8, 8, value_hidden=4, angle_dim=128))
    k = host.max_degree
    params = jax.jit(model.init)(jax.random.key(1), jnp.ones((2, 4), jnp.int32),
                                 jnp.full((2,), 4), jnp.zeros((2, 36, 6 + 128)),
                                 jnp.zeros((2, k, 6 + 130)), jnp.ones((2, k), bool))
    batch = {"start": jnp.asarray([1, 4, 2, 0]), "heading": jnp.zeros(4),
             "path": jnp.asarray([[1, 2, 3], [4, 3, -1], [2, 1, 0], [0, 1, -1]]),
             "path_len": jnp.asarray([3, 2, 3, 2]),
             "gold": jnp.asarray([[1, 1, 0], [2, 0, 0], [2, 2, 0], [1, 0, 0]]),
             "tokens": jnp.asarray(np.random.default_rng(1).integers(1, 20, (4, 5)), jnp.int32),
             "token_len": jnp.asarray([5, 3, 4, 2])}
    base = dict(horizon=3, bc_every=2, gamma=0.95, stop_reward=1.0, entropy_weight=1e-4,
                visual_grounding=0.0, textual_grounding=0.0, grounding_steps="cloned",
                success_radius=3.0, baseline_cost=0.5, entropy_norm="mean")
    grads, metrics = {}, {}
    for pg in ("actor_critic", "reinforce"):
        loss_fn = mixed_loss(model, ml_collections.ConfigDict(dict(base, pg=pg)))
        (loss, metrics[pg]), grads[pg] = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(
            params, batch, jax.random.key(0), graph, feats, geo)
        assert np.isfinite(float(loss)) and float(metrics[pg]["entropy"]) > 0
    assert float(metrics["actor_critic"]["value_loss"]) > 0
    assert "value_loss" not in metrics["reinforce"]
    for name, leaf in jax.tree_util.tree_leaves_with_path(grads["actor_critic"]):
        assert float(jnp.abs(leaf).max()) > 0, jax.tree_util.keystr(name)
    for head in ("value_mid", "value_out"):  # only the actor-critic loss trains the value head
        assert all(float(jnp.abs(x).max()) == 0
                   for x in jax.tree_util.tree_leaves(grads["reinforce"]["params"][head]))
    with pytest.raises(ValueError, match="loss.pg must be one of"):
        mixed_loss(model, ml_collections.ConfigDict(dict(base, pg="ppo")))


def test_the_128_d_angle_encoding_tiles_each_angle_32_times():
    enc = np.asarray(mp.angle_encoding(math.pi / 6, -math.pi / 6, 128))
    assert enc.shape == (128,)
    np.testing.assert_allclose(enc.reshape(4, 32),
                               np.repeat([[0.5], [math.cos(math.pi / 6)], [-0.5],
                                          [math.cos(math.pi / 6)]], 32, 1), atol=1e-6)
    np.testing.assert_array_equal(mp.angle_encoding(0.3, 0.1, 4),
                                  np.asarray(mp.angle_encoding(0.3, 0.1, 128))[::32])
    with pytest.raises(ValueError, match="angle encoding dim must be one of"):
        mp.angle_encoding(0.0, 0.0, 8)
    g = jax.device_put(corridor(4))
    state = batched(mp.reset)(g, jnp.asarray([1]), jnp.asarray([0.0]))
    feats = jnp.ones((4, 36, 3))
    for dim in (4, 128):
        obs = jax.vmap(lambda s: mp.observe(g, s, feats, dim))(state)
        assert obs["views"].shape == (1, 36, 3 + dim)
        assert obs["cands"].shape == (1, g.max_degree, 3 + dim + 2)


def test_the_exponential_schedule():
    """Continuous (tf.keras ExponentialDecay's default): 1e-4 * 0.8 ** (step / 5000)."""
    lr = learning_rate_schedule(optim_config(1e-4, schedule="exponential", decay_rate=0.8,
                                             decay_steps=5000), 100_000)
    for step, want in ((0, 1e-4), (2500, 1e-4 * math.sqrt(0.8)), (5000, 0.8e-4),
                       (10_000, 0.64e-4)):
        assert float(lr(step)) == pytest.approx(want, rel=1e-6), step
    for bad in (dict(), dict(decay_rate=0.8), dict(decay_rate=1.5, decay_steps=10),
                dict(decay_rate=0.8, decay_steps=0)):
        with pytest.raises(ValueError, match="optim.schedule=exponential needs"):
            learning_rate_schedule(optim_config(1e-4, schedule="exponential", **bad), 10)
    assert "decay_rate" not in optim_config(1e-4)          # other configs keep their keys


def test_the_paper_config_is_valans_where_the_paper_is_silent():
    """Section 5's agent (RCM-like, CNN encoder) with Fried et al.'s 128-d angles; VALAN's width,
    value head, learner and schedule."""
    from experiments.rxr.configs import default, paper
    c = paper.get_config()
    assert (c.model.arch, c.model.angle_dim, c.model.structure_features) == ("rcm", 128, False)
    assert (c.model.hidden, c.model.value_hidden) == (512, 64)
    v = default.get_config().model.valan               # model.arch=valan: VALAN's R2R sizes
    assert (v.encoder, v.encoder_layers, v.decoder, v.decoder_layers, v.text_attention,
            v.visual_attention, v.action, v.value_hidden) == (256, 2, 512, 2, 512, 256, 256, 64)
    assert (c.loss.pg, c.loss.baseline_cost, c.loss.entropy_weight, c.loss.entropy_norm,
            c.loss.gamma, c.loss.bc_every) == ("actor_critic", 0.5, 1e-4, "mean", 0.95, 2)
    assert (c.optim.learning_rate, c.optim.schedule, c.optim.decay_rate, c.optim.decay_steps,
            c.optim.grad_clip, c.batch_size, c.num_steps) == (
        1e-4, "exponential", 0.8, 5000, 0.0, 32, 100_000)


@pytest.mark.parametrize("overrides, message", [
    (dict(model__arch="transformer"), "unknown model.arch"),
    (dict(model__angle_dim=8), "model.angle_dim must be one of"),
    (dict(loss__pg="ppo"), "loss.pg must be one of"),
    (dict(loss__pg="actor_critic"), "loss.pg=actor_critic trains a value head"),
    (dict(model__value_hidden=-1), "model.value_hidden must be >= 0"),
    (dict(model__arch="valan", model__step_embedding=4), "model.step_embedding is the RCM"),
    (dict(loss__entropy_norm="max"), "loss.entropy_norm must be one of"),
    (dict(optim__schedule="exponential", optim__decay_steps=0),
     "optim.schedule=exponential needs"),
])
def test_bad_agent_settings_are_named(overrides, message, tmp_path):
    """Refused before any data is read or written (no dataset built, nothing in the workdir)."""
    tfds, workdir = tmp_path / "tfds", tmp_path / "run"
    with pytest.raises(ValueError, match=message):
        RXR.train.train_and_evaluate(RXR.config(str(tfds), **overrides), str(workdir))
    assert not tfds.exists() and (not workdir.exists() or not any(workdir.iterdir()))


@pytest.mark.slow
@pytest.mark.fast_compile
@pytest.mark.parametrize("arch", ["rcm", "valan"])
def test_a_few_steps_of_the_actor_critic_learner_on_the_synthetic_data(arch, tfds_dir, tmp_path):
    """configs/paper.py's agent and learner (rcm: its RCM agent with a value head; valan: VALAN's
    R2R agent, sizes scaled down) for 4 steps: value loss, entropy and the decaying learning rate
    logged; greedy evaluation runs."""
    c = RXR.config(tfds_dir, model__arch=arch, model__angle_dim=128, model__value_hidden=8,
                   model__structure_features=False, loss__pg="actor_critic",
                   loss__entropy_weight=1e-4, loss__entropy_norm="mean", loss__gamma=0.95,
                   num_steps=4, eval_every=4, log_every=2, batch_size=8,
                   eval__baselines="random_walk", optim__schedule="exponential",
                   optim__decay_rate=0.5, optim__decay_steps=2)
    for key, size in (("encoder", 16), ("decoder", 32), ("text_attention", 32),
                      ("visual_attention", 16), ("action", 16), ("value_hidden", 8)):
        c.model.valan[key] = size
    res = RXR.train.train_and_evaluate(c, str(tmp_path))
    assert res["best_step"] == 4 and 0 <= res["val_unseen"]["full"]["ndtw"] <= 1
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train = [x for x in lines if "train/value_loss" in x]
    assert len(train) == 2
    assert all(np.isfinite(x["train/value_loss"]) and x["train/entropy"] > 0 for x in train)
    # logged at steps 2 and 4: each window's mean rate, 2e-3 * 0.5 ** (step / 2) at steps 0-3
    lrs = [x["train/learning_rate"] for x in train]
    assert lrs == pytest.approx([2e-3 * (1 + 0.5 ** 0.5) / 2, 2e-3 * (0.5 + 0.5 ** 1.5) / 2],
                                rel=1e-5)
