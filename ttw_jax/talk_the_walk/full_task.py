"""The full Talk The Walk task with emergent communication (App. E, Algorithm 1), on device.

Each episode has a window and a target corner. The tourist starts on a uniformly random corner and
walks randomly (agnostic moves, or TURNLEFT/TURNRIGHT/FORWARD for an orientation-aware tourist).
Once it has made T moves, at every step the tourist sends a message about its last T+1
observations and T actions, the guide predicts a distribution over the 16 corners and samples from
it (or takes the mode); when the prediction is the target the guide asks to evaluate: success if
the tourist stands on the target (`label="final"`), or, for a guide trained to name where the walk
started (`label="start"`, the released `evaluate_location.py`), if the first of the T+1 corners
its message describes is the target; otherwise one of `max_evals` evaluations is spent. Episodes end on success, when evaluations run out, or after `max_steps` steps. All episodes
run on device in a fixed pool of slots (`lax.while_loop`, the policy inside the loop).
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ttw_jax.talk_the_walk import env as grid
from ttw_jax.talk_the_walk.walks import check_label

PredictFn = Callable[..., jax.Array]   # (obs, actions, landmarks[, keys]) -> logits


@struct.dataclass
class FullTaskResult:
    """Per episode: success (E,) bool, ended (E,) bool, steps (E,) int32 (moves made when the episode
    ended; max_steps if it did not), evaluations (E,) int32 (EVALUATE_LOCATION requests)."""
    success: jax.Array
    ended: jax.Array
    steps: jax.Array
    evaluations: jax.Array

    def summary(self) -> dict:
        """success_rate, mean steps over successful and over ended episodes, mean evaluations."""
        mean = lambda x, m: float(jnp.sum(x * m) / jnp.maximum(jnp.sum(m), 1))
        return {"success_rate": float(jnp.mean(self.success)),
                "mean_steps_success": mean(self.steps, self.success),
                "mean_steps_ended": mean(self.steps, self.ended),
                "mean_evaluations": float(jnp.mean(self.evaluations))}


@struct.dataclass
class _Slots:
    """The episodes being played, one per slot (S slots); `episode` is E for an empty slot."""
    episode: jax.Array     # (S,) int32 index of the episode in the slot
    state: grid.GridState  # (S,) the tourist
    t: jax.Array           # (S,) int32 moves made so far
    obs_buf: jax.Array     # (S, T+1, K) last T+1 observations
    pos_buf: jax.Array     # (S, T+1, 2) the corners they were made at
    act_buf: jax.Array     # (S, T) last T actions
    evals: jax.Array       # (S,) int32 evaluations spent


def run_full_task(key: jax.Array, predict_fn: PredictFn, landmarks: jax.Array, target: jax.Array,
                  T: int, max_steps: int = 150, max_evals: int = 3, greedy: bool = False,
                  label: str = "final", orientation_aware: bool = False,
                  slots: int | None = None, message_keys: bool = False) -> FullTaskResult:
    """Plays episodes on windows `landmarks` (E, X, Y, K) with targets `target` (E,) (x * Y + y).

    predict_fn(obs (S, T+1, K), actions (S, T), landmarks (S, X, Y, K)) -> location logits
    (S, X*Y), for the S = `slots` episodes played at a time (default: all E). A `lax.while_loop`
    steps the slots together; a slot whose episode ends takes the next unplayed episode, so
    finished episodes cost nothing and the loop runs until the last episode ends (with S < E,
    about E * mean length / S iterations instead of `max_steps` over all E). Episode e draws its
    randomness from `fold_in(key, e)` alone, so the results do not depend on `slots`.
    With `message_keys`, predict_fn takes a fourth argument: (S,) PRNG keys, fresh for every
    episode and step (folded from the step's key), for messages drawn at random (sampled
    utterances or bits), as the released code draws them anew at every step.
    """
    e, _, ny, _ = landmarks.shape
    s = e if slots is None else max(1, min(int(slots), e))
    observe = jax.vmap(lambda lm, st: grid.observe(lm, st, orientation_aware))
    lo, hi = (grid.TURNLEFT, grid.FORWARD + 1) if orientation_aware else (0, grid.NUM_AGNOSTIC_ACTIONS)
    checked = 0 if check_label(label) == "start" else T
    episode_keys = jax.vmap(lambda i: jax.random.split(jax.random.fold_in(key, i)))

    def start(ep):   # (S,) episode ids (E: none) -> fresh slots
        ep_ = jnp.minimum(ep, e - 1)
        k_reset = episode_keys(ep_)[:, 0]
        lm = landmarks[ep_]
        state = jax.vmap(grid.random_reset)(lm, k_reset)
        zeros = jnp.zeros((len(ep),), jnp.int32)
        return _Slots(ep, state, zeros, jnp.repeat(observe(lm, state)[:, None], T + 1, axis=1),
                      jnp.repeat(state.pos[:, None], T + 1, axis=1),
                      jnp.zeros((len(ep), T), jnp.int32), zeros)

    def body(carry):
        sl, next_ep, out = carry
        live = sl.episode < e
        ep_ = jnp.minimum(sl.episode, e - 1)
        lm, tgt = landmarks[ep_], target[ep_]
        k_step = jax.vmap(jax.random.fold_in)(episode_keys(ep_)[:, 1], sl.t)
        k_pred, k_move = jnp.moveaxis(jax.vmap(jax.random.split)(k_step), 1, 0)
        if message_keys:
            k_msg = jax.vmap(jax.random.fold_in, in_axes=(0, None))(k_step, 2)
            logits = predict_fn(sl.obs_buf, sl.act_buf, lm, k_msg)
        else:
            logits = predict_fn(sl.obs_buf, sl.act_buf, lm)
        pred = (jnp.argmax(logits, -1) if greedy
                else jax.vmap(jax.random.categorical)(k_pred, logits))
        asks = live & (sl.t >= T) & (pred == tgt)
        here = sl.pos_buf[:, checked, 0] * ny + sl.pos_buf[:, checked, 1] == tgt
        evals = sl.evals + asks
        hit = asks & here
        finished = hit | (asks & (evals >= max_evals))
        done = live & (finished | (sl.t + 1 >= max_steps))
        # Record the episodes that end (index E drops the write).
        idx = jnp.where(done, sl.episode, e)
        out = {"success": out["success"].at[idx].set(hit, mode="drop"),
               "ended": out["ended"].at[idx].set(finished, mode="drop"),
               "steps": out["steps"].at[idx].set(jnp.where(finished, sl.t, max_steps),
                                                  mode="drop"),
               "evaluations": out["evaluations"].at[idx].set(evals, mode="drop")}
        # The tourist moves.
        action = jax.vmap(lambda k: jax.random.randint(k, (), lo, hi))(k_move)
        state = jax.vmap(grid.step)(lm, sl.state, action)
        shift = lambda buf, new: jnp.concatenate([buf, new[:, None]], 1)[:, 1:]
        moved = _Slots(sl.episode, state, sl.t + 1, shift(sl.obs_buf, observe(lm, state)),
                       shift(sl.pos_buf, state.pos), shift(sl.act_buf, action), evals)
        # Slots whose episode ended take the next episodes in order.
        rank = jnp.cumsum(done) - 1
        new_ep = jnp.where(done, jnp.minimum(next_ep + rank, e), sl.episode)
        fresh = start(new_ep)
        sl = jax.tree_util.tree_map(
            lambda f, m: jnp.where(done.reshape((-1,) + (1,) * (f.ndim - 1)), f, m), fresh, moved)
        return sl, jnp.minimum(next_ep + jnp.sum(done), e), out

    out = {"success": jnp.zeros((e,), bool), "ended": jnp.zeros((e,), bool),
           "steps": jnp.zeros((e,), jnp.int32), "evaluations": jnp.zeros((e,), jnp.int32)}
    init = (start(jnp.arange(s, dtype=jnp.int32)), jnp.int32(s), out)
    _, _, out = jax.lax.while_loop(lambda c: jnp.any(c[0].episode < e), body, init)
    return FullTaskResult(out["success"], out["ended"], out["steps"], out["evaluations"])


def full_task_episodes(table: np.ndarray, repeats: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (window, target corner) `repeats` times: landmarks (E, 4, 4, K), target (E,)."""
    w, nx, ny, _ = table.shape
    win = np.repeat(np.arange(w), nx * ny * repeats)
    target = np.tile(np.repeat(np.arange(nx * ny), repeats), w)
    return table[win], target.astype(np.int32)
