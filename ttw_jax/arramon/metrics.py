"""ArraMon metrics (Kim et al. 2020, section 5), per phase of one turn; batched and jittable, with
NumPy twins for the worked examples.

- nDTW = exp(-DTW(path, ref) / (3.0 * |ref|)) with Euclidean (x, z) point costs (threshold 3.0
  units), for navigation and assembly paths alike.
- CTC-k (collected-target correctness): 1 if the agent picked up an object itself (not by the
  step-limit fallback) and its final position (x, 0.525, z) is strictly closer than k to the
  target object (3-D distance); CTC-0 instead requires that it picked up the target itself.
  `strict=False` drops the fallback rule for k > 0 (the final distance alone): the paper's
  random-walk row is reproduced that way (README).
- rPOD = 1 / (1 + D^2) and PTC = [D = 0], D the Manhattan distance between the placed and the
  target (gx, level, gz); both are 0 when the object was placed by the fallback or was not
  collected (the paper counts CTC-3 as collected).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from ttw_jax.core.sequence import dtw, dtw_np

NDTW_THRESHOLD = 3.0
CTC_KS = (0, 3, 5, 7)
AGENT_Y = 0.525


def ndtw(path: ArrayLike, path_len: ArrayLike, ref: ArrayLike, ref_len: ArrayLike,
         threshold: float = NDTW_THRESHOLD) -> jax.Array:
    """[B] nDTW of paths [B, T, 2] (first path_len [B] points) against refs [B, R, 2]."""
    path, ref = jnp.asarray(path, jnp.float32), jnp.asarray(ref, jnp.float32)
    cost = jnp.linalg.norm(path[:, :, None] - ref[:, None, :], axis=-1)
    d = jax.vmap(dtw)(cost, path_len, ref_len)
    return jnp.exp(-d / (threshold * jnp.maximum(jnp.asarray(ref_len, jnp.float32), 1.0)))


def ctc(final_xz: ArrayLike, target_xyz: ArrayLike, picked_target: ArrayLike, auto: ArrayLike,
        ks=CTC_KS, strict: bool = True) -> dict[str, jax.Array]:
    """{"ctc{k}": [B] float32}: final_xz [B, 2], target_xyz [B, 3], picked_target [B] bool (the
    object picked is the target), auto [B] bool (picked by the fallback). With strict=False the
    fallback's pick-ups count too (CTC-k for k > 0 is then the final distance alone)."""
    final_xz = jnp.asarray(final_xz, jnp.float32)
    agent = jnp.stack([final_xz[:, 0], jnp.full(final_xz.shape[:1], AGENT_Y), final_xz[:, 1]], -1)
    dist = jnp.linalg.norm(agent - jnp.asarray(target_xyz, jnp.float32), axis=-1)
    real = ~jnp.asarray(auto, bool) if strict else jnp.ones(dist.shape, bool)
    out = {}
    for k in ks:
        hit = (jnp.asarray(picked_target, bool) & ~jnp.asarray(auto, bool)) if k == 0 else dist < k
        out[f"ctc{k}"] = (real & hit).astype(jnp.float32)
    return out


def placement(placed: ArrayLike, target: ArrayLike, collected: ArrayLike,
              auto: ArrayLike) -> dict[str, jax.Array]:
    """{"rpod", "ptc"}: [B] float32 from placed / target [B, 3] (gx, level, gz) ints, collected
    [B] (CTC-3 of the turn's navigation) and auto [B] (placed by the fallback)."""
    d = jnp.sum(jnp.abs(jnp.asarray(placed, jnp.int32) - jnp.asarray(target, jnp.int32)), -1)
    ok = (jnp.asarray(collected) > 0) & ~jnp.asarray(auto, bool)
    d = d.astype(jnp.float32)
    return {"rpod": jnp.where(ok, 1.0 / (1.0 + d * d), 0.0),
            "ptc": (ok & (d == 0)).astype(jnp.float32)}


def ndtw_np(path, ref, threshold: float = NDTW_THRESHOLD) -> float:
    """nDTW of one path against one reference (lists of (x, z))."""
    cost = np.array([[math.dist(p, q) for q in ref] for p in path])
    return math.exp(-dtw_np(cost) / (threshold * len(ref)))


def ctc_np(final_xz, target_xyz, picked_target: bool, auto: bool, ks=CTC_KS) -> dict[str, float]:
    """CTC-k of one turn from the definitions."""
    dist = math.dist((final_xz[0], AGENT_Y, final_xz[1]), target_xyz)
    return {f"ctc{k}": float(not auto and (picked_target if k == 0 else dist < k)) for k in ks}


def placement_np(placed, target, collected: bool, auto: bool) -> dict[str, float]:
    """rPOD and PTC of one turn from the definitions."""
    if auto or not collected:
        return {"rpod": 0.0, "ptc": 0.0}
    d = sum(abs(a - b) for a, b in zip(placed, target))
    return {"rpod": 1.0 / (1.0 + d * d), "ptc": float(d == 0)}
