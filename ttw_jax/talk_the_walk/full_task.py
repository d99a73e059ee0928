"""The full Talk The Walk task with emergent communication (App. E, Algorithm 1), on device.

Each episode has a window and a target corner. The tourist starts on a uniformly random corner and
walks randomly (agnostic moves, or TURNLEFT/TURNRIGHT/FORWARD for an orientation-aware tourist).
Once it has made T moves, at every step the tourist sends a message about its last T+1
observations and T actions, the guide predicts a distribution over the 16 corners and samples from
it (or takes the mode); when the prediction is the target the guide asks to evaluate: success if
the tourist stands on the target (`label="final"`), or, for a guide trained to name where the walk
started (`label="start"`, the released `evaluate_location.py`), if the first of the T+1 corners
its message describes is the target; otherwise one of `max_evals` evaluations is spent. Episodes end on success, when evaluations run out, or after `max_steps` steps. All episodes
run as one batch: `lax.scan` over steps, the policy inside the scan.
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ttw_jax.talk_the_walk import env as grid
from ttw_jax.talk_the_walk.walks import check_label

PredictFn = Callable[[jax.Array, jax.Array, jax.Array], jax.Array]


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


def run_full_task(key: jax.Array, predict_fn: PredictFn, landmarks: jax.Array, target: jax.Array,
                  T: int, max_steps: int = 150, max_evals: int = 3, greedy: bool = False,
                  label: str = "final", orientation_aware: bool = False) -> FullTaskResult:
    """Plays episodes on windows `landmarks` (E, X, Y, K) with targets `target` (E,) (x * Y + y).

    predict_fn(obs (E, T+1, K), actions (E, T), landmarks) -> location logits (E, X*Y).
    """
    e, _, ny, _ = landmarks.shape
    k_reset, k_scan = jax.random.split(key)
    state = jax.vmap(grid.random_reset)(landmarks, jax.random.split(k_reset, e))
    observe = jax.vmap(lambda lm, s: grid.observe(lm, s, orientation_aware))
    obs_buf = jnp.repeat(observe(landmarks, state)[:, None], T + 1, axis=1)
    pos_buf = jnp.repeat(state.pos[:, None], T + 1, axis=1)   # (E, T+1, 2) corners described
    act_buf = jnp.zeros((e, T), jnp.int32)
    lo, hi = (grid.TURNLEFT, grid.FORWARD + 1) if orientation_aware else (0, grid.NUM_AGNOSTIC_ACTIONS)
    checked = 0 if check_label(label) == "start" else T
    zeros = jnp.zeros((e,), jnp.int32)
    false = jnp.zeros((e,), bool)

    def body(carry, inp):
        state, obs_buf, pos_buf, act_buf, evals, ended, success, steps = carry
        t, k = inp
        k_pred, k_move = jax.random.split(k)
        logits = predict_fn(obs_buf, act_buf, landmarks)
        pred = (jnp.argmax(logits, -1) if greedy else jax.random.categorical(k_pred, logits))
        asks = ~ended & (t >= T) & (pred == target)
        here = pos_buf[:, checked, 0] * ny + pos_buf[:, checked, 1] == target
        evals = evals + asks
        hit = asks & here
        finished = hit | (asks & (evals >= max_evals))
        steps = jnp.where(finished, t, steps)
        ended, success = ended | finished, success | hit
        action = jax.random.randint(k_move, (e,), lo, hi)
        state = jax.vmap(grid.step)(landmarks, state, action)
        shift = lambda buf, new: jnp.concatenate([buf, new[:, None]], 1)[:, 1:]
        obs_buf = shift(obs_buf, observe(landmarks, state))
        pos_buf = shift(pos_buf, state.pos)
        act_buf = shift(act_buf, action)
        return (state, obs_buf, pos_buf, act_buf, evals, ended, success, steps), None

    init = (state, obs_buf, pos_buf, act_buf, zeros, false, false, zeros + max_steps)
    inputs = (jnp.arange(max_steps), jax.random.split(k_scan, max_steps))
    (*_, evals, ended, success, steps), _ = jax.lax.scan(body, init, inputs)
    return FullTaskResult(success, ended, steps, evals)


def full_task_episodes(table: np.ndarray, repeats: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (window, target corner) `repeats` times: landmarks (E, 4, 4, K), target (E,)."""
    w, nx, ny, _ = table.shape
    win = np.repeat(np.arange(w), nx * ny * repeats)
    target = np.tile(np.repeat(np.arange(nx * ny), repeats), w)
    return table[win], target.astype(np.int32)
