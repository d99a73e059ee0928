"""The generic batched episode loop: a policy and a pure `step` in one `lax.scan`."""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

# policy(carry, state, t, rng) -> (carry, action, output); `state` leaves are batched ([B, ...]).
Policy = Callable[[Any, Any, jax.Array, jax.Array], tuple[Any, jax.Array, Any]]


def scan_rollout(step: Callable[[Any, jax.Array], Any], state: Any, policy: Policy, carry: Any,
                 rng: jax.Array, horizon: int):
    """Runs `horizon` steps; the policy (a model, if you like) runs inside the scan.

    Returns (final state with `done` set everywhere, final carry, states [horizon, B, ...] the
    actions were taken in, actions [horizon, B], policy outputs [horizon, B, ...]).
    """
    def body(c, xs):
        state, carry = c
        t, key = xs
        carry, action, out = policy(carry, state, t, key)
        return (step(state, action), carry), (state, action, out)

    keys = jax.random.split(rng, horizon)
    (state, carry), (states, actions, outs) = jax.lax.scan(
        body, (state, carry), (jnp.arange(horizon), keys))
    return state.replace(done=jnp.ones_like(state.done)), carry, states, actions, outs


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
