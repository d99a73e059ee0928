"""The full ArraMon task with cascading errors: navigate, pick up, assemble, twice.

Turn 2 navigation starts where the agent's own turn 1 ended (position and heading), without the
object it picked; turn 2 assembly starts from the grid as the agent left it. Each phase runs to
its step limit (150) with the paper's fallbacks. Metrics per turn and overall (the mean of the
two turns, as the official `main.py` and the paper's Table 5): navigation nDTW and CTC-0/3/5/7,
assembly nDTW, rPOD and PTC, under both CTC rules of `metrics` (the names in METRICS hold the
chosen rule's values, `{metric}_{rule}` both).

Policies per phase come from factories: the trained modules (`agent_factories`), the random walk
(`random_factories`), the ground truth's actions (`gold_navigation_factory`,
`gold_assembly_factory`). The shortest-path row of the paper's Table 2 is the ground truth in
both phases (its paths are A* shortest paths, App. B); its Table 6, assembly after perfect
navigation, is the ground truth's navigation followed by the agent's assembly.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.arramon import env, metrics as am, render
from ttw_jax.arramon.episodes import assembly_start, navigation_start
from ttw_jax.arramon.model import PhaseAgent, assembly_policy, navigation_policy
from ttw_jax.core.chunks import map_in_chunks
from ttw_jax.core.env import PolicyFactory, batched, compact_path, replay_policy, rollout

EPISODE_KEYS = ("start", "psi0", "turn_heading", "map_index", "objects", "object_attrs",
                "object_mask", "heights", "grid_attrs", "navi_path", "navi_path_len",
                "assem_path", "assem_path_len", "target_pos", "assem_target", "navi_tokens",
                "navi_token_len", "assem_tokens", "assem_token_len", "navi_actions",
                "assem_actions")
# With the release's recorded features (`features`, `model.visual == "features"`): per phase the
# views [N, 2, T, 49, 2048], the recorded poses [N, 2, T, 3] and which steps were recorded.
FEATURE_KEYS = tuple(f"{p}_{k}" for p in ("navi", "assem")
                     for k in ("feats", "feat_pose", "recorded"))
# With rendered views (`render.DEMO_KEYS`): the demonstration's poses and world per turn, which
# the nearest-recorded perception reads. VIEW_KEYS: both sets once, sliced per turn.
VIEW_KEYS = FEATURE_KEYS + tuple(k for k in render.DEMO_KEYS if k not in FEATURE_KEYS)
EPISODE_KEYS += VIEW_KEYS
# What a rollout needs only for its metrics (or a gold policy): a hidden split's predictions are
# made without them (`make_task_rollout(..., scored=False)`, `predict`).
REFERENCE_KEYS = ("navi_path", "navi_path_len", "assem_path", "assem_path_len", "target_pos",
                  "assem_target", "navi_actions", "assem_actions")
PREDICT_KEYS = tuple(k for k in EPISODE_KEYS if k not in REFERENCE_KEYS)
METRICS = ("navi_ndtw", "ctc0", "ctc3", "ctc5", "ctc7", "assem_ndtw", "rpod", "ptc")
RULE_METRICS = ("ctc0", "ctc3", "ctc5", "ctc7", "rpod", "ptc")     # depend on the CTC rule


def random_factories() -> tuple[PolicyFactory, PolicyFactory]:
    """The random walk: uniform over the four actions in both phases."""
    def factory(params, consts, batch):
        return env.random_policy, None
    return factory, factory


def gold_navigation_factory(params, consts, batch):
    """The ground truth's navigation actions (padded with PICK), replayed."""
    return replay_policy, batch["navi_actions"]


def gold_assembly_factory(params, consts, batch):
    """The ground truth's assembly actions (padded with PLACE), replayed."""
    return replay_policy, batch["assem_actions"]


def agent_factories(nav_model: PhaseAgent, assem_model: PhaseAgent, num_types: int,
                    perceive: tuple | None = None) -> tuple[PolicyFactory, PolicyFactory]:
    """Greedy decoding of the trained modules; consts = {"navi": params, "assem": params}.
    `perceive`: the (navigation, assembly) view builders of `render.perception`, else the
    modules' own (`model.navigation_policy`)."""
    see_nav, see_assem = perceive or (None, None)

    def nav(walkable, consts, batch):
        return navigation_policy(nav_model, consts["navi"], batch, perceive=see_nav)

    def assem(grid, consts, batch):
        return assembly_policy(assem_model, consts["assem"], batch, num_types,
                               perceive=see_assem)
    return nav, assem


def _phase(step, finish, params, start, factory: PolicyFactory, consts, batch: dict,
           rng: jax.Array, horizon: int):
    """(final state after the fallback, trajectory) of one phase of a turn `batch`."""
    policy, carry = factory(params, consts, batch)
    final, _, traj = rollout(step, params, start, policy, carry, rng, horizon)
    return batched(finish)(params, final), traj


def make_task_rollout(factories: tuple[PolicyFactory, PolicyFactory],
                      horizon: int = env.STEP_LIMIT, rule: str = "distance", scored: bool = True):
    """Jitted run(walkable, consts, batch, rng) -> {f"{name}_{turn}": [B]} for both turns of a
    batch of instances (keys EPISODE_KEYS of `episodes.episodes`). The (navigation, assembly)
    policy factories get the phase's params (the walkable map, `env.ASSEMBLY`), `consts` and
    each turn's batch: the keys of `episodes.turn_examples`, plus `turn` [B]. Names: METRICS
    (under `rule`), `{m}_{rule}` for m in RULE_METRICS and both rules, `navi_steps`, and for
    figures and predictions files the agent's paths `navi_xz` [B, horizon + 1, 2] /
    `navi_xz_len` [B] and `assem_xz` / `assem_xz_len` (world (x, z)), `assem_cell`
    [B, horizon + 1, 2] / `assem_cell_len` (grid (gx, gz)), `picked` [B] (object index, -1
    none) and `pick_auto` [B] (by the fallback), `placed` [B, 3] and `place_auto` [B].
    `scored=False`: the paths and outcomes only, no metric, reading none of REFERENCE_KEYS
    (a hidden split's predictions)."""
    am.check_rule(rule)
    nav_factory, assem_factory = factories

    @jax.jit
    def run(walkable, consts, batch, rng):
        out = {}
        start, heading = batch["start"], batch["turn_heading"][:, 0]
        present, heights, grid_attrs = batch["object_mask"], batch["heights"], batch["grid_attrs"]
        rows = jnp.arange(start.shape[0])
        for t in range(2):
            k_nav, k_assem = jax.random.split(jax.random.fold_in(rng, t))
            turn = {k: batch[k] for k in ("psi0", "map_index", "objects", "object_attrs",
                                          "object_mask")}
            turn.update(start=start, heading=heading, present=present, heights=heights,
                        grid_attrs=grid_attrs, turn=jnp.full(start.shape[:1], t, jnp.int32))
            for key in ("navi_tokens", "navi_token_len", "assem_tokens", "assem_token_len",
                        "navi_actions", "assem_actions") + VIEW_KEYS:
                if key in batch:
                    turn[key] = batch[key][:, t]
            final, traj = _phase(env.step_navigation, env.finish_navigation, walkable,
                                 navigation_start(walkable, turn), nav_factory, consts, turn,
                                 k_nav, horizon)
            path, path_len = env.path_of(traj, final)
            out[f"navi_xz_{t}"], out[f"navi_xz_len_{t}"] = path, path_len
            if scored:
                out[f"navi_ndtw_{t}"] = am.ndtw(path, path_len, batch["navi_path"][:, t],
                                                batch["navi_path_len"][:, t])
            out[f"navi_steps_{t}"] = final.num_steps
            out[f"picked_{t}"], out[f"pick_auto_{t}"] = final.picked, final.auto

            placed, traj = _phase(env.step_assembly, env.finish_assembly, env.ASSEMBLY,
                                  assembly_start(env.ASSEMBLY, turn), assem_factory, consts,
                                  turn, k_assem, horizon)
            path, path_len = env.path_of(traj, placed)
            out[f"assem_xz_{t}"], out[f"assem_xz_len_{t}"] = path, path_len
            if scored:
                out[f"assem_ndtw_{t}"] = am.ndtw(path, path_len, batch["assem_path"][:, t],
                                                 batch["assem_path_len"][:, t])
            cells, cells_len = compact_path(traj.state.cell, placed.cell)
            out[f"assem_cell_{t}"], out[f"assem_cell_len_{t}"] = cells, cells_len
            out[f"placed_{t}"], out[f"place_auto_{t}"] = placed.placed, placed.auto
            for r in am.CTC_RULES if scored else ():
                ctc = am.ctc(final.position, batch["target_pos"][:, t], final.picked == t,
                             final.auto, rule=r)
                ctc.update(am.placement(placed.placed, batch["assem_target"][:, t],
                                        am.collected(ctc, r), placed.auto, r))
                out.update({f"{k}_{r}_{t}": v for k, v in ctc.items()})
                if r == rule:
                    out.update({f"{k}_{t}": v for k, v in ctc.items()})
            # Cascade: the next turn starts from what this turn did.
            start, heading, present = final.position, final.heading, final.present
            heights = placed.heights
            held = batch["object_attrs"][rows, jnp.maximum(final.picked, 0)]
            grid_attrs = grid_attrs.at[rows, placed.placed[:, 0], placed.placed[:, 2]].set(held)
        return out
    return run


def predict(run, walkable: env.Walkable, consts, episodes: dict, rng: jax.Array,
            batch_size: int = 256) -> dict:
    """The per-episode arrays of a `make_task_rollout(..., scored=False)` rollout over every
    instance of `episodes`, given none of its REFERENCE_KEYS: no metric is computed."""
    walkable = jax.device_put(walkable)
    return map_in_chunks(lambda batch, key: run(walkable, consts, batch, key), episodes,
                         PREDICT_KEYS, batch_size, rng)


def evaluate(run, walkable: env.Walkable, consts, episodes: dict, rng: jax.Array,
             batch_size: int = 256) -> dict:
    """{metric: mean over both turns, f"{metric}_{turn}": per-turn mean, "episodes": per-episode
    arrays}, over every instance of `episodes`. The walkable map goes to the device once, not
    with every chunk."""
    walkable = jax.device_put(walkable)
    per = map_in_chunks(lambda batch, key: run(walkable, consts, batch, key), episodes,
                        EPISODE_KEYS, batch_size, rng)
    res: dict = {"episodes": per}
    names = METRICS + ("navi_steps",) + tuple(f"{m}_{r}" for m in RULE_METRICS
                                             for r in am.CTC_RULES)
    for m in names:
        turns = [float(np.mean(per[f"{m}_{t}"])) for t in range(2)]
        res.update({f"{m}_{t}": v for t, v in enumerate(turns)})
        res[m] = float(np.mean(turns))
    return res
