"""Mixed imitation + reinforcement learning for the RCM agent (Ku et al. 2020, section 5).

One `lax.scan` rollout per minibatch: even rows are behavioural cloning (the gold action along
the *reference* path is executed and its log-likelihood maximised), odd rows sample from the
agent and are trained by policy gradient. Rewards (`rewards`): the per-step change in nDTW of the
path so far against the reference, plus at the end of the episode (STOP or horizon) a term linear
in the navigation error, `stop_reward * (1 - NE / success_radius)` (positive inside the success
radius, negative beyond it). Returns are discounted by `gamma`; the baseline is the mean return
of the policy-gradient rows active at that step. The optional attention-grounding loss
`log sum_i exp(z_i) - log sum_i m_i exp(z_i)` applies to the visual attention logits z with the
pose trace's view masks m (weight `visual_grounding`) and to the textual ones with its word masks
(weight `textual_grounding`), at the steps `grounding_steps` names: "cloned", the cloning rows'
steps along the reference path; or "on_gold_path", every step at which the agent is on the gold
path (the paper: "whenever the agent is on the gold path"), read as: its path so far is the
reference path's prefix, so that it stands on reference step t and m_t applies; the cloning
rows' steps, and the sampled rows' until they first leave the reference.
Every episode weighs the same, so equal shards of a batch average to the global loss. Each
episode's policy-gradient sum is averaged over its own active steps, like the cloning term; as the
number of steps depends on the sampled actions, this down-weights the steps of long episodes
relative to the plain REINFORCE estimator (a known bias of this normalisation, kept because the
reported runs use it). The textual masks index the encoder's positions: the words (from the
trace's word times) or, when the agent reads text features, their subwords (the trace's
`text_masks`); rows without a mask of a kind skip that term (`has_masks`, `has_word_mask`).

`pg="actor_critic"` (VALAN's learner, for an agent with a value head: `ttw_jax.rxr.valan`) trains
the sampled rows with V-trace targets (`vtrace`) instead: advantages r_t + gamma v_{t+1} - V(s_t)
in place of the return minus the batch mean, plus `baseline_cost` * 0.5 (v_t - V(s_t))^2 for the
value head, with the same per-episode normalisation; the episode ends at STOP or at the horizon
(where `rewards` gives its end term), so nothing is bootstrapped past it. `entropy_norm="mean"`
divides each step's entropy by the number of action slots, the absent directions included (whose
probability, hence term, is 0), as VALAN's mean over the logits does; "sum" is the entropy.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import optax

from ttw_jax.core.env import batched, rollout
from ttw_jax.core.sequence import dtw_prefixes
from ttw_jax.rxr import env as mp
from ttw_jax.rxr.rcm import RCMAgent, rcm_policy


def rewards(nodes, actions, done, ref, ref_len, dist_fn, stop_reward: float = 1.0,
            success_radius: float = 3.0):
    """Per-step rewards [T, B] of a rollout.

    nodes [T + 1, B] (the visited node before each action, then the final node), actions [T, B],
    done [T, B] (the episode had ended before the action); ref [B, R], ref_len [B].
    """
    t1 = nodes.shape[0]
    cost = dist_fn(nodes.T[:, :, None], jnp.maximum(ref, 0)[:, None, :])          # [B, T+1, R]
    prefix = jax.vmap(dtw_prefixes, in_axes=(0, None, 0))(cost, t1, ref_len)      # [B, T+1]
    ndtw = jnp.exp(-prefix / (success_radius * ref_len[:, None].astype(jnp.float32))).T
    active = ~done
    moved = nodes[1:] != nodes[:-1]
    r = jnp.where(active & moved, ndtw[1:] - ndtw[:-1], 0.0)
    last = jnp.arange(actions.shape[0])[:, None] == actions.shape[0] - 1
    end = active & ((actions == mp.STOP) | last)
    goal = jnp.take_along_axis(ref, jnp.maximum(ref_len - 1, 0)[:, None], 1)[:, 0]
    ne = dist_fn(nodes[-1], goal)
    return r + jnp.where(end, stop_reward * (1.0 - ne / success_radius), 0.0)


def discounted_returns(r, gamma: float):
    """G_t = sum_{s >= t} gamma^(s - t) r_s over the leading (time) axis."""
    def body(g, x):
        g = x + gamma * g
        return g, g
    _, g = jax.lax.scan(body, jnp.zeros_like(r[0]), r, reverse=True)
    return g


def vtrace(log_rhos, discounts, rewards, values, bootstrap_value, clip_rho: float = 1.0,
           clip_c: float = 1.0):
    """V-trace targets (Espeholt et al. 2018) over the leading (time) axis: (vs, pg_advantages),
    each [T, ...], without gradient.

    log_rhos: log(target / behaviour probability) of the actions taken; discounts: gamma, 0 where
    an episode ends; rewards, values [T, ...]; bootstrap_value [...]: V after the last step.
    With rho_t = min(clip_rho, e^log_rho_t), c_t = min(clip_c, e^log_rho_t) and
    delta_t = rho_t (r_t + d_t V_{t+1} - V_t): vs_t = V_t + sum_{s >= t} (prod_{t <= i < s} d_i
    c_i) delta_s, and pg_advantages_t = rho_t (r_t + d_t vs_{t+1} - V_t).
    On-policy (log_rhos = 0, as the trainer's synchronous rollouts are), rho = c = 1: vs_t is the
    bootstrapped discounted return r_t + d_t r_{t+1} + ... + (prod d) bootstrap_value, and the
    advantage is vs_t - V_t, the TD(1) (Monte-Carlo) advantage against the value baseline.
    """
    rhos = jnp.exp(log_rhos)
    clipped = jnp.minimum(clip_rho, rhos)
    cs = jnp.minimum(clip_c, rhos)
    next_values = jnp.concatenate([values[1:], bootstrap_value[None]], 0)
    deltas = clipped * (rewards + discounts * next_values - values)

    def body(acc, x):
        delta, d, c = x
        acc = delta + d * c * acc
        return acc, acc
    _, diff = jax.lax.scan(body, jnp.zeros_like(bootstrap_value), (deltas, discounts, cs),
                           reverse=True)
    vs = values + diff
    next_vs = jnp.concatenate([vs[1:], bootstrap_value[None]], 0)
    adv = clipped * (rewards + discounts * next_vs - values)
    return jax.lax.stop_gradient(vs), jax.lax.stop_gradient(adv)


def grounding_loss(logits, mask, valid):
    """Per-entry `logsumexp(z) - logsumexp(z | m)` [...] where `valid` and some m is set, else 0.
    logits, mask: [..., N]; valid: [...]."""
    ok = valid & jnp.any(mask, -1)
    inside = jax.nn.logsumexp(jnp.where(mask, logits, -jnp.inf), -1)
    return jnp.where(ok, jax.nn.logsumexp(logits, -1) - jnp.where(ok, inside, 0.0), 0.0)


def on_gold_path(nodes, path, path_len, done):
    """[T, B] bool: at step t the agent is on the gold path, i.e. it has not stopped and its nodes
    at steps 0..t are the reference path's first t + 1 (so reference step t's masks apply).
    nodes [T, B] (the node before each action), path [B, R] (-1 padded), path_len [B],
    done [T, B]."""
    steps = nodes.shape[0]
    ref = jnp.swapaxes(path, 0, 1)[:steps]                                         # [T', B]
    if ref.shape[0] < steps:
        ref = jnp.pad(ref, ((0, steps - ref.shape[0]), (0, 0)), constant_values=-1)
    t = jnp.arange(steps)[:, None]
    match = (nodes == ref) & (t < path_len[None])
    return jnp.cumprod(match, 0).astype(bool) & ~done


PG_LOSSES = ("reinforce", "actor_critic")
ENTROPY_NORMS = ("sum", "mean")


def mixed_loss(model: RCMAgent, config: ml_collections.ConfigDict):
    """loss_fn(params, batch, rng, graph, view_features, geodesic) -> (loss, metrics).

    config: horizon, bc_every (1 = cloning only, 2 = half and half, 0 = policy gradient only),
    gamma, stop_reward, entropy_weight, visual_grounding, textual_grounding, grounding_steps,
    success_radius; optional: pg (`PG_LOSSES`, default "reinforce"), baseline_cost (0.5),
    entropy_norm (`ENTROPY_NORMS`, default "sum").
    """
    horizon = config.horizon
    pg_kind = config.get("pg", "reinforce")
    entropy_norm = config.get("entropy_norm", "sum")
    if pg_kind not in PG_LOSSES:
        raise ValueError(f"loss.pg must be one of {PG_LOSSES}, got {pg_kind!r}")
    if entropy_norm not in ENTROPY_NORMS:
        raise ValueError(f"loss.entropy_norm must be one of {ENTROPY_NORMS}, got "
                         f"{entropy_norm!r}")

    def loss_fn(params, batch, rng, graph, view_features, geodesic):
        b = batch["start"].shape[0]
        ctx, ctx_mask = model.apply(params, batch["tokens"], batch["token_len"],
                                    batch.get("text_features"), method="encode")
        rows = jnp.arange(b)
        forced = (rows % config.bc_every == 0) if config.bc_every else jnp.zeros(b, bool)
        gold = batch["gold"]
        if gold.shape[1] < horizon:
            gold = jnp.pad(gold, ((0, 0), (0, horizon - gold.shape[1])))   # STOP = 0
        policy, carry = rcm_policy(model, params, graph, view_features, ctx, ctx_mask, "sample",
                                   gold=gold, forced=forced)
        state = batched(mp.reset)(graph, batch["start"], batch["heading"])
        final, _, traj = rollout(mp.step, graph, state, policy, carry, rng, horizon)
        logits = traj.output["logits"]                                     # [T, B, A]
        logp = jax.nn.log_softmax(logits)
        actions, done = traj.action, traj.state.done
        t = jnp.arange(horizon)[:, None]

        # behavioural cloning along the reference path
        bc_mask = ((t < batch["path_len"][None]) & forced[None]).astype(jnp.float32)
        bc_w = bc_mask / jnp.maximum(bc_mask.sum(0), 1.0)
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, gold[:, :horizon].T)
        bc = jnp.sum(ce * bc_w)

        # policy gradient on the sampled rows
        nodes = jnp.concatenate([traj.state.node, final.node[None]], 0)
        r = rewards(nodes, actions, done, batch["path"], batch["path_len"], geodesic,
                    config.stop_reward, config.success_radius)
        pg_mask = (~done & ~forced[None]).astype(jnp.float32)
        pg_w = pg_mask / jnp.maximum(pg_mask.sum(0), 1.0)
        sampled = jnp.maximum(jnp.sum(~forced), 1)
        if pg_kind == "reinforce":
            g = discounted_returns(r * pg_mask, config.gamma)
            baseline = jnp.sum(g * pg_mask, 1, keepdims=True) / jnp.maximum(
                pg_mask.sum(1, keepdims=True), 1.0)
            adv = jax.lax.stop_gradient(g - baseline)
        else:    # V-trace on-policy targets; the episode ends at STOP or at the horizon
            values = traj.output["value"]                                  # [T, B]
            ends = (actions == mp.STOP) | (t == horizon - 1)
            discounts = config.gamma * (1.0 - ends.astype(jnp.float32))
            vs, adv = vtrace(jnp.zeros_like(values), discounts, r * pg_mask,
                             jax.lax.stop_gradient(values), jnp.zeros_like(values[0]))
            value_loss = jnp.sum(0.5 * jnp.square(vs - values) * pg_w)
        logp_a = jnp.take_along_axis(logp, actions[..., None], -1)[..., 0]
        entropy = -jnp.sum(jnp.exp(logp) * jnp.where(logits > -1e8, logp, 0.0), -1)
        bonus = entropy / logits.shape[-1] if entropy_norm == "mean" else entropy
        pg = -jnp.sum((logp_a * adv + config.entropy_weight * bonus) * pg_w)

        loss = (bc + pg) / b
        metrics = {"bc_loss": bc / jnp.maximum(jnp.sum(forced), 1),
                   "pg_return": jnp.sum(r * pg_mask) / sampled,
                   "entropy": jnp.sum(entropy * pg_w) / sampled,
                   "action_accuracy": jnp.sum((jnp.argmax(logits, -1) == gold[:, :horizon].T)
                                              * bc_w) / jnp.maximum(jnp.sum(forced), 1)}
        if pg_kind == "actor_critic":
            loss = loss + config.get("baseline_cost", 0.5) * value_loss / b
            metrics["value_loss"] = value_loss / sampled
        vis_w, txt_w = config.visual_grounding, config.textual_grounding
        if (vis_w or txt_w) and "word_mask" in batch:
            steps = min(horizon, batch["word_mask"].shape[1])
            if config.grounding_steps == "cloned":
                on = bc_mask[:steps] > 0
            else:
                on = on_gold_path(traj.state.node[:steps], batch["path"], batch["path_len"],
                                  done[:steps])
            w = on / jnp.maximum(on.sum(0), 1.0)
            grounded = jnp.maximum(jnp.sum(on.any(0)), 1)
            out = traj.output
            ground = 0.0
            if vis_w:
                gl = grounding_loss(out["vis_logits"][:steps],
                                    jnp.swapaxes(batch["view_mask"][:, :steps], 0, 1),
                                    on & batch["has_masks"][None])
                vis = jnp.sum(gl * w)
                loss = loss + vis_w * vis / b
                ground = ground + vis
                metrics["visual_grounding_loss"] = vis / grounded
            if txt_w:
                # word masks index the encoder's positions: tokens, or text-feature subwords
                word_mask = jnp.swapaxes(batch["word_mask"][:, :steps], 0, 1) & ctx_mask[None]
                gl = grounding_loss(out["txt_logits"][:steps], word_mask,
                                    on & batch["has_word_mask"][None])
                txt = jnp.sum(gl * w)
                loss = loss + txt_w * txt / b
                ground = ground + txt
                metrics["textual_grounding_loss"] = txt / grounded
            metrics["grounding_loss"] = ground / grounded
        metrics["loss"] = loss
        return loss, metrics
    return loss_fn
