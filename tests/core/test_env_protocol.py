"""Every environment through the one protocol of `ttw_jax.core.env`: Talk The Walk's grid,
Touchdown, Matterport, ArraMon navigation and ArraMon assembly reset, step single-episode and
vmapped, and roll out with the same generic `rollout` into the same `Trajectory`; `done` and
`num_steps` mean the same everywhere."""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ttw_jax.arramon import env as arramon, episodes as ae, synthetic as arramon_synthetic
from ttw_jax.core.env import Trajectory, batched, rollout
from ttw_jax.core.pano_graph import build_graph
from ttw_jax.core.vocab import Vocabulary
from ttw_jax.rxr import env as matterport
from ttw_jax.talk_the_walk import env as grid, maps
from ttw_jax.touchdown import env as touchdown
from ttw_jax.touchdown.graph import compile_touchdown, synthetic_street_grid

pytestmark = pytest.mark.usefixtures("fast_compile")   # small programs: compilation dominates

B, HORIZON = 4, 12


class Case(NamedTuple):
    module: Any                 # the env module (ACTION_NAMES, constants, path_of)
    reset: Callable
    step: Callable
    params: Any
    reset_args: tuple           # batched start arguments, leading axis B
    num_actions: int
    params_axis: int | None = None
    ends: bool = True           # has an ending action (Talk The Walk does not)


def ttw_case() -> Case:
    windows = maps.windows(maps.synthetic_maps(0)).landmarks[:B]
    return Case(grid, grid.random_reset, grid.step, jnp.asarray(windows),
                (jax.random.split(jax.random.key(0), B),), len(grid.ACTION_NAMES), 0, False)


def touchdown_case() -> Case:
    nodes, links = synthetic_street_grid(num_avenues=3, num_streets=3, panos_per_block=3, seed=1)
    graph, _ = compile_touchdown(nodes, links)
    sim = touchdown.compile_sim(graph)
    rng = np.random.default_rng(0)
    start = rng.integers(0, graph.num_nodes, B)
    heading = np.asarray(graph.headings)[start, 0]
    heading[::2] = rng.integers(0, 360, B // 2)            # half start between out-edges
    return Case(touchdown, touchdown.reset, touchdown.step, sim, (start, heading),
                touchdown.NUM_ACTIONS)


def matterport_case() -> Case:
    rng = np.random.default_rng(1)
    n = 12
    pos = np.concatenate([rng.uniform(0, 8, (n, 2)), np.zeros((n, 1))], 1)
    pairs = sorted({(i, int(j)) for i in range(n)
                    for j in np.argsort(np.linalg.norm(pos - pos[i], axis=1))[1:4]})
    pairs = sorted(set(pairs) | {(j, i) for i, j in pairs})
    src, dst = (np.array(p) for p in zip(*pairs))
    delta = pos[dst] - pos[src]
    heading = np.mod(np.arctan2(delta[:, 0], delta[:, 1]), 2 * math.pi).astype(np.float32)
    graph = jax.device_put(build_graph(n, src, dst, heading, np.linalg.norm(delta, axis=1), pos,
                                       elevations=np.zeros(len(src), np.float32)))
    return Case(matterport, matterport.reset, matterport.step, graph,
                (rng.integers(0, n, B), rng.uniform(0, 2 * math.pi, B).astype(np.float32)),
                matterport.num_actions(graph))


def _arramon_turns():
    records = arramon_synthetic.synthetic_instances(B // 2, seed=3)
    walk, index = ae.walkable_for(records)
    turns = ae.turn_examples(ae.episodes(records, Vocabulary.build(["go"]), map_index=index))
    return jax.device_put(walk), turns


def arramon_navigation_case() -> Case:
    walk, turns = _arramon_turns()
    # Object 0 one unit straight ahead of the start, so that random pick-ups end some episodes.
    psi = turns["psi0"] + np.pi / 6 * turns["heading"]
    turns["objects"][:, 0, 0] = turns["start"][:, 0] + np.sin(psi)
    turns["objects"][:, 0, 2] = turns["start"][:, 1] + np.cos(psi)
    turns["present"][:, 0] = True
    args = tuple(turns[k] for k in ("start", "psi0", "objects", "present", "map_index",
                                    "heading"))
    return Case(arramon, arramon.reset_navigation, arramon.step_navigation, walk, args,
                arramon.NUM_ACTIONS)


def arramon_assembly_case() -> Case:
    _, turns = _arramon_turns()
    return Case(arramon, arramon.reset_assembly, arramon.step_assembly, arramon.ASSEMBLY,
                (turns["heights"],), arramon.NUM_ACTIONS)


CASES = {"talk_the_walk": ttw_case, "touchdown": touchdown_case, "matterport": matterport_case,
         "arramon_navigation": arramon_navigation_case, "arramon_assembly": arramon_assembly_case}


def uniform_policy(num_actions: int):
    def policy(carry, state, t, key):
        return carry, jax.random.randint(key, state.done.shape, 0, num_actions, jnp.int32), None
    return policy


@pytest.fixture(scope="module")
def runs():
    """{system: (case, batched start, single-episode start of episode 0, final, trajectory)}."""
    out = {}
    for name, make in CASES.items():
        case = make()
        start = batched(case.reset, case.params_axis)(case.params, *case.reset_args)
        params0 = case.params if case.params_axis is None else jax.tree.map(
            lambda x: x[0], case.params)
        single = case.reset(params0, *(a[0] for a in case.reset_args))
        run = jax.jit(rollout, static_argnums=(0, 3, 6, 7))
        final, carry, traj = run(case.step, case.params, start, uniform_policy(case.num_actions),
                                 None, jax.random.key(1), HORIZON, case.params_axis)
        assert carry is None
        out[name] = (case, start, single, final, traj)
    return out


def leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


@pytest.mark.parametrize("name", CASES)
def test_state_and_actions_follow_the_protocol(runs, name):
    case, start, single, _, _ = runs[name]
    names = [f.name for f in dataclasses.fields(single)]
    assert "done" in names and "num_steps" in names and hasattr(single, "replace")
    assert single.done.shape == () and single.done.dtype == jnp.bool_ and not single.done
    assert single.num_steps.shape == () and single.num_steps.dtype == jnp.int32
    assert int(single.num_steps) == 0
    # The batch is the vmap of the single-episode reset.
    assert jax.tree.structure(start) == jax.tree.structure(single)
    for b_leaf, s_leaf in zip(leaves(start), leaves(single)):
        assert b_leaf.shape == (B,) + s_leaf.shape and b_leaf.dtype == s_leaf.dtype
        np.testing.assert_array_equal(b_leaf[0], s_leaf)
    names = case.module.ACTION_NAMES
    assert isinstance(names, tuple) and all(n.isupper() for n in names)
    assert [getattr(case.module, n) for n in names] == list(range(len(names)))


@pytest.mark.parametrize("name", CASES)
def test_rollout_shapes_and_trajectory_fields(runs, name):
    case, start, _, final, traj = runs[name]
    assert type(traj) is Trajectory
    assert [f.name for f in dataclasses.fields(traj)] == ["state", "action", "output"]
    assert traj.output is None
    assert traj.action.shape == (HORIZON, B) and traj.action.dtype == jnp.int32
    assert jax.tree.structure(final) == jax.tree.structure(start)
    for s, f, t in zip(leaves(start), leaves(final), leaves(traj.state)):
        assert f.shape == s.shape and t.shape == (HORIZON,) + s.shape
    np.testing.assert_array_equal(leaves(traj.state)[0][0], leaves(start)[0])
    if hasattr(case.module, "path_of"):
        path, length = case.module.path_of(traj, final)
        assert path.shape[:2] == (B, HORIZON + 1) and length.shape == (B,)
        assert length.dtype == jnp.int32 and bool(jnp.all((length >= 1)
                                                          & (length <= HORIZON + 1)))


@pytest.mark.parametrize("name", CASES)
def test_done_and_num_steps_mean_the_same_everywhere(runs, name):
    case, _, _, final, traj = runs[name]
    done, steps = np.asarray(traj.state.done), np.asarray(traj.state.num_steps)
    assert not done[0].any() and (steps[0] == 0).all()
    # num_steps counts the actions taken while not done, the ending one included.
    np.testing.assert_array_equal(steps[1:], steps[:-1] + ~done[:-1])
    np.testing.assert_array_equal(np.asarray(final.num_steps), steps[-1] + ~done[-1])
    assert (done[1:] >= done[:-1]).all()                 # once done, always done
    assert np.asarray(final.done).all()                  # the horizon ends every episode
    # A done episode never changes.
    history = [np.concatenate([t, f[None]]) for t, f in zip(leaves(traj.state), leaves(final))]
    for t in range(HORIZON):
        for leaf in history:
            np.testing.assert_array_equal(leaf[t + 1][done[t]], leaf[t][done[t]])
    if case.ends:
        assert done[-1].any(), "random actions should end some episode"
    else:
        assert not done.any()                            # nothing ends a Talk The Walk walk


@pytest.mark.parametrize("name", CASES)
def test_single_episode_step_replays_the_vmapped_rollout(runs, name):
    case, _, single, final, traj = runs[name]
    params0 = case.params if case.params_axis is None else jax.tree.map(
        lambda x: x[0], case.params)

    @jax.jit
    def replay(params, state, actions):
        def body(s, a):
            return case.step(params, s, a), s
        return jax.lax.scan(body, state, actions)

    last, states = replay(params0, single, traj.action[:, 0])
    for got, want in zip(leaves(states), leaves(traj.state)):
        np.testing.assert_array_equal(got, want[:, 0])
    for got, want in zip(leaves(last.replace(done=jnp.ones((), bool))), leaves(final)):
        np.testing.assert_array_equal(got, want[0])
