"""The environment protocol every simulator follows, and the one batched rollout.

An environment is a set of pure functions over ONE episode (no batch axis):

    reset(params, ...) -> State                 the start state (`...`: the episode's start)
    step(params, state, action) -> State        one action; a done episode never changes
    observe(params, state, ...) -> observation  what the agent perceives, where it needs one

`params` is the environment's static data: Touchdown's compiled `TouchdownSim`, Matterport's
`PanoGraph`, ArraMon's `Walkable` map (navigation) or `AssemblyGrid` (assembly), Talk The Walk's
landmark window. `State` is a `flax.struct.dataclass` whose fields include

    done: jax.Array       # () bool the episode has ended
    num_steps: jax.Array  # () int32 actions taken before it ended (the ending action included)

A batch is `jax.vmap` of these functions (`batched`); every env module also names its actions in
an `ACTION_NAMES` tuple with one upper-case constant per name (`FORWARD = 0`, ...).

A policy acts on a whole batch, inside the scan of `rollout`:

    policy(carry, state, t, key) -> (carry, action, output)

state: the batched `State` (leaves [B, ...]); t: () int32 step index; key: the step's PRNG key;
action: [B] int32; output: a pytree of [B, ...] arrays (e.g. logits), or None; carry: what the
policy threads through time (an LSTM state, the actions to replay, ...).

A policy factory builds a policy inside a jitted evaluation, so that baselines and models share
one code path and compile once per shape:

    factory(params, consts, batch) -> (policy, initial carry)

params: the environment's params; consts: the policy's own constants (model parameters, feature
tables; None for baselines); batch: the episode arrays of the batch.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
from flax import struct

Policy = Callable[[Any, Any, jax.Array, jax.Array], tuple[Any, jax.Array, Any]]
PolicyFactory = Callable[[Any, Any, dict], tuple[Policy, Any]]
Step = Callable[[Any, Any, jax.Array], Any]


@struct.dataclass
class Trajectory:
    """What a `rollout` went through, the same fields for every environment."""
    state: Any          # the batched states the actions were taken in, leaves [T, B, ...]
    action: jax.Array   # [T, B] int32 actions
    output: Any         # the policy's outputs, leaves [T, B, ...] (None for baselines)


def batched(fn: Callable, params_axis: int | None = None) -> Callable:
    """`fn(params, *args)` of one episode as a function of a batch: mapped over the leading axis
    of every argument after `params`, which all episodes share (`params_axis=None`) or which
    holds one entry per episode (`params_axis=0`, e.g. Talk The Walk windows). Host arrays
    become device arrays first (so a batch has the dtypes of a single episode)."""
    def over_batch(params, *args):
        args = jax.tree.map(jnp.asarray, args)
        return jax.vmap(fn, in_axes=(params_axis,) + (0,) * len(args))(params, *args)
    return over_batch


def rollout(step: Step, params: Any, state: Any, policy: Policy, carry: Any, rng: jax.Array,
            horizon: int, params_axis: int | None = None):
    """Runs `horizon` steps of a batch of episodes in one `lax.scan`; the policy (a model, if
    you like) runs inside the scan and `step` is vmapped over the batch.

    step: an environment's single-episode `step(params, state, action)`; state: the batched
    start states (leaves [B, ...]); rng: split into one key per step; params_axis: as in
    `batched`. Returns (final state with `done` set everywhere, final carry, `Trajectory`).
    """
    step_batch = batched(step, params_axis)

    def body(c, xs):
        state, carry = c
        t, key = xs
        carry, action, out = policy(carry, state, t, key)
        return (step_batch(params, state, action), carry), (state, action, out)

    keys = jax.random.split(rng, horizon)
    (state, carry), (states, actions, outs) = jax.lax.scan(
        body, (state, carry), (jnp.arange(horizon), keys))
    return (state.replace(done=jnp.ones_like(state.done)), carry,
            Trajectory(state=states, action=actions, output=outs))


def choose_action(logits: jax.Array, t: jax.Array, key: jax.Array, gold: jax.Array | None = None,
                  greedy: bool = True) -> jax.Array:
    """[B] int32 action of a model policy at step t: the demonstrated gold[:, t] (teacher
    forcing) when `gold` [B, T] is given, else the argmax of logits [B, A] (greedy) or a sample."""
    if gold is not None:
        action = gold[:, t]
    elif greedy:
        action = jnp.argmax(logits, -1)
    else:
        action = jax.random.categorical(key, logits)
    return action.astype(jnp.int32)


def replay_policy(carry, state, t, key):
    """Plays fixed action sequences: carry is [B, T] int32 actions (the last column repeats
    after T; pad with the environment's ending action)."""
    return carry, carry[:, jnp.minimum(t, carry.shape[1] - 1)], None


def compact_path(points: jax.Array, final: jax.Array,
                 fill: Any = None) -> tuple[jax.Array, jax.Array]:
    """The places a batch visited, consecutive repeats dropped: points [T, B, ...] of the
    states the actions were taken in plus final [B, ...] -> (path [B, T + 1, ...] compacted to
    the front and padded with `fill` (default: its last place), length [B] int32). A place is
    kept when it differs from the one before, so turns and refused moves add nothing."""
    pts = jnp.swapaxes(jnp.concatenate([points, final[None]], 0), 0, 1)      # [B, T + 1, ...]
    b, n = pts.shape[:2]
    trailing = (1,) * (pts.ndim - 2)
    moved = jnp.any((pts[:, 1:] != pts[:, :-1]).reshape(b, n - 1, -1), -1)
    keep = jnp.concatenate([jnp.ones((b, 1), bool), moved], 1)
    length = jnp.sum(keep, 1).astype(jnp.int32)
    order = jnp.argsort(~keep, axis=1, stable=True)          # kept places first, in order
    kept = jnp.take_along_axis(keep, order, 1).reshape(b, n, *trailing)
    path = jnp.take_along_axis(pts, order.reshape(b, n, *trailing), 1)
    if fill is None:
        fill = jnp.take_along_axis(path, (length - 1).reshape(b, 1, *trailing), 1)
    return jnp.where(kept, path, fill), length
