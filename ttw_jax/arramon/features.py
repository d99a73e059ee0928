"""The ArraMon release's pre-recorded image features (the official `src/main_nosim.py` and
`src/sim_mul.py`), read as shipped, packed into a float16 cache, and looked up at evaluation.

Layout, in the folder the user names (`data.features_dir`):

    pos_sim_passed_sec/pos_<mapId>.json
        {"<mapId>_<tag>": [obj_ids, obj_pos, agent_pos, agent_rot], ...}
    vfeat_sim_passed_sec/vfeat_<mapId>_<tag>.npy
        float32 [7, 7, 2048]: a ResNet feature map (the official ResNet-101 without its last
        two layers, channels last) of the agent's view

with `<tag>` = `navi_<turn>_<t>` or `assem_<turn>_<t>`, turn 0 or 1, and t the step of the
official teacher-forced loop: the view at step t is the one the agent has before the
demonstration's action t (t = 0: the phase's first view), and it predicts action t from it.
A step with no entry keeps the previous entry's positions and, as the official `getFeats`
does, gets a zero feature map (`missing="zeros"`, the default; `missing="previous"` keeps the
previous step's features instead). Entries past the demonstration's last action are not used.

Read as permissively as the official reader, a dict lookup by key: keys in any order, an
`obj_ids` written as an integral float (`-1.0`: the simulator's replies are parsed into float
tensors), and keys of turns beyond the two the official loop runs (turn >= 2: never read; counted,
`Poses.ignored`, and reported). Checks (each error names the file, and the key and field): a
missing file (with where the release keeps it), an empty one, a key of another map or not of the
form `<mapId>_<phase>_<turn>_<t>`, no entry for a phase's first step, a malformed entry
(`entry_problem`: not four fields; `obj_ids` not an integer or integral float, e.g. 1.5; a
position not three coordinates or `agent_rot` not angles in degrees under the shared rule,
`core.records.QUANTITIES`, e.g. NaN or 1e300), a feature file that is unreadable, truncated or
longer than its header announces, not a float [7, 7, 2048], or not finite as stored or as the
float16 it is packed into (`core.records.nonfinite_problem`).

The recorded `agent_pos` is Unity's world (x, y, z) of the agent (the official `sim_mul.py`
passes it on as the agent's position, compared with the ground-truth path points), so its
(x, z) is the project's plane; `agent_rot` is the rotation as three numbers, read here as Unity
Euler angles in degrees (yaw `agent_rot[1]`, from +z towards +x, as psi), which the official
code never uses. `merge_recorded` puts a recorded (x, z) in place of the replayed one where the
two differ by more than `POSE_TOL`, with the heading of its yaw when that lies on the 30-degree
lattice of the replay (`recorded_headings`), else the replayed heading.

`pack` writes one split's features once into `<cache_dir>/<fingerprint>/` (`feats.npy`, float16
[rows, 7, 7, 2048], memory-mapped when read; `index.npz`), keyed by a fingerprint of the
instances' step counts and every source file's size and modification time, so a changed
release is packed again instead of served stale. Training streams its rows
(`PackedFeatures.turn_rows`, `core.stream.LazyRows` read by grain's threads).

Evaluation rollouts leave the recorded path, where no feature exists: the agent then sees the
features of the nearest recorded pose of the same instance, turn and phase
(`nearest_recorded`: the nearest position, then among equally near ones the nearest heading,
then the earliest step; recorded poses are those the demonstration's actions reach in the
simulator, `demonstration_poses`, or the recorded ones where these differ, `merge_recorded`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from typing import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.arramon import env
from ttw_jax.arramon.episodes import assembly_start, navigation_start, turn_examples
from ttw_jax.core import paths
from ttw_jax.core.env import replay_policy, rollout
from ttw_jax.core.progress import progress as progress_report
from ttw_jax.core.records import (RecordFormatError, check_npy_size, damaged, is_int, is_number,
                                  nonfinite_problem, quantity_problem, read_json, shown)
from ttw_jax.core.stream import LazyRows

POS_DIR = "pos_sim_passed_sec"
VFEAT_DIR = "vfeat_sim_passed_sec"
FEATURE_SHAPE = (7, 7, 2048)
FEATURE_DTYPE = np.float16   # the packed cache's, which training reads
PHASES = ("navi", "assem")
MISSING = ("zeros", "previous")
PACK_VERSION = 1
TURNS = 2                # turns the official loop runs (`s_turn = 0, e_turn = 2`)
POSE_TOL = 0.25          # (x, z) units: recorded vs replayed pose (a step is 1.0, a cell 1.5)
ROT_TOL = 5.0            # degrees: a recorded yaw this near the 30-degree lattice gives a heading
HINT = ("The pre-recorded features come with the ArraMon release (github.com/hyounghk/ArraMon, "
        f"the feature download of its README): `{POS_DIR}/` and `{VFEAT_DIR}/` in one folder, "
        "passed as --config.data.features_dir.")
_TAG = re.compile(r"(navi|assem)_(\d+)_(\d+)")


class FeatureFormatError(RecordFormatError):
    """A pose or feature file of the release that cannot be read as documented."""


def pose_path(features_dir: str, map_id) -> str:
    return os.path.join(features_dir, POS_DIR, f"pos_{map_id}.json")


def feature_path(features_dir: str, map_id, phase: str, turn: int, t: int) -> str:
    return os.path.join(features_dir, VFEAT_DIR, f"vfeat_{map_id}_{phase}_{turn}_{t}.npy")


ENTRY_FIELDS = ("obj_ids", "obj_pos", "agent_pos", "agent_rot")
# field -> (the shared rule's kind of its numbers, what it is)
_ENTRY_KINDS = {"obj_pos": ("coordinate", "[x, y, z]"), "agent_pos": ("coordinate", "[x, y, z]"),
                "agent_rot": ("degrees", "[x, y, z] Euler angles, or one angle")}


def is_integral(v) -> bool:
    """An integer, or a finite float of integral value (`-1.0`)."""
    return is_int(v) or (is_number(v) and float(v).is_integer())


def entry_problem(entry) -> str | None:
    """Why a pose file's entry is not [obj_ids (an integer, or a float of integral value),
    obj_pos [x, y, z], agent_pos [x, y, z], agent_rot [x, y, z] or one number], positions and
    angles under the shared rule (`QUANTITIES`: coordinates, degrees), or None; it names the
    field."""
    if not (isinstance(entry, list) and len(entry) == len(ENTRY_FIELDS)):
        return (f"expected [{', '.join(ENTRY_FIELDS)}], got {json.dumps(entry)[:120]}")
    if not is_integral(entry[0]):
        return ("field 'obj_ids' (entry[0]) is not an integer, or a float of integral value: "
                f"{shown(entry[0])}")
    for k, name in enumerate(ENTRY_FIELDS[1:], 1):
        kind, what = _ENTRY_KINDS[name]
        value = entry[k]
        values = value if isinstance(value, list) and len(value) == 3 else None
        if values is None and name == "agent_rot" and not isinstance(value, list):
            values = [value]
        if values is None:
            return f"field '{name}' (entry[{k}]) is not {what}: {shown(value)}"
        for c in values:
            problem = quantity_problem(c, kind)
            if problem:
                return f"field '{name}' (entry[{k}]) {problem} (in {shown(value)})"
    return None


class Poses(dict):
    """{(phase, turn, t): [obj_ids (int), obj_pos, agent_pos, agent_rot]} of one pose file (turns
    0 and 1); `ignored`: how many of its keys are of a turn >= 2 (checked, not kept)."""
    ignored = 0


def read_poses(features_dir: str, map_id) -> Poses:
    """The entries of one map's pose file, validated (see the module docstring)."""
    path = pose_path(features_dir, map_id)
    if not paths.resolve(path).is_file():
        raise FileNotFoundError(f"{path}: file not found (no recorded poses for mapId "
                                f"{map_id}). {HINT}")
    data = read_json(path, FeatureFormatError, HINT)
    if not isinstance(data, dict):
        raise FeatureFormatError(f"{path}: top level: expected a JSON object keyed by "
                                 f"'<mapId>_<tag>', got {type(data).__name__}")
    if not data:
        raise FeatureFormatError(f"{path}: no entries (every phase's first step needs one)")
    out, prefix = Poses(), f"{map_id}_"
    for key, entry in data.items():
        tag = key[len(prefix):] if key.startswith(prefix) else None
        m = _TAG.fullmatch(tag) if tag is not None else None
        if m is None:
            raise FeatureFormatError(f"{path}: key {key!r} is not '{prefix}<navi|assem>_<turn>_"
                                     "<step>'")
        problem = entry_problem(entry)
        if problem:
            raise FeatureFormatError(f"{path}: key {key!r}: {problem}")
        phase, turn, t = m.group(1), int(m.group(2)), int(m.group(3))
        if turn >= TURNS:
            out.ignored += 1
            continue
        out[(phase, turn, t)] = [int(entry[0]), *entry[1:]]
    return out


def entry_poses(poses: Mapping, phase: str, turn: int, length: int) -> np.ndarray:
    """[length, 6] float64: agent_pos (x, y, z) and agent_rot of the phase's first `length`
    steps (a number agent_rot in the middle), NaN where a step has no entry."""
    out = np.full((length, 6), np.nan)
    for t in range(length):
        entry = poses.get((phase, turn, t))
        if entry is not None:
            rot = entry[3] if isinstance(entry[3], list) else [np.nan, entry[3], np.nan]
            out[t] = [*entry[2], *rot]
    return out


def read_feature(path: str) -> np.ndarray:
    """One feature file as float16 [7, 7, 2048] (`FEATURE_DTYPE`, the packed cache's);
    FeatureFormatError naming it when unreadable, truncated or longer than its header announces,
    of another shape or dtype, or not finite as stored or as float16 (`nonfinite_problem`; never
    unpickled)."""
    if not paths.resolve(path).is_file():
        raise FileNotFoundError(f"{path}: file not found (its pose file lists it). {HINT}")
    check_feature_header(path)
    with damaged(path, FeatureFormatError):
        x = paths.load_numpy(path)
    problem = nonfinite_problem(x, FEATURE_DTYPE)
    if problem:
        raise FeatureFormatError(f"{path}: {problem}")
    return x.astype(FEATURE_DTYPE)


def check_feature_header(path: str) -> None:
    """Checks a feature file's header (`check_npy_size`: exactly the bytes it announces, no
    object array) and that it announces a float `FEATURE_SHAPE` array."""
    shape, dtype = check_npy_size(path, FeatureFormatError)
    if shape != FEATURE_SHAPE or dtype.kind != "f":
        raise FeatureFormatError(f"{path}: expected float {list(FEATURE_SHAPE)}, got {dtype} "
                                 f"{list(shape)}")


def recorded_steps(poses: Mapping, phase: str, turn: int, length: int, where: str) -> np.ndarray:
    """[length] bool: which of the phase's first `length` steps have an entry; step 0 must."""
    steps = np.array([(phase, turn, t) in poses for t in range(length)], bool)
    if length and not steps[0]:
        raise FeatureFormatError(f"{where}: no entry for {phase}_{turn}_0, the first view of "
                                 f"turn {turn}'s {'navigation' if phase == 'navi' else 'assembly'}")
    return steps


@dataclasses.dataclass
class PackedFeatures:
    """One split's features: rows [R, 7, 7, 2048] float16 (memory-mapped), and per instance,
    turn and phase the first row `offset` [N, 2, 2] and the number of steps `length` [N, 2, 2]
    (phase axis: navi, assem); `recorded` [R] whether a row's step had its own entry; `poses`
    [R, 6] its `entry_poses` and `ignored` the pose files' keys of turns >= 2 (both from the
    pose files, read by every `pack`, not cached)."""
    feats: np.ndarray
    offset: np.ndarray
    length: np.ndarray
    recorded: np.ndarray
    poses: np.ndarray
    ignored: int = 0

    def _read(self, i: int, turn: int, phase: int, horizon: int) -> np.ndarray:
        out = np.zeros((horizon, 49, FEATURE_SHAPE[2]), np.float16)
        lo, n = int(self.offset[i, turn, phase]), min(int(self.length[i, turn, phase]), horizon)
        out[:n] = np.asarray(self.feats[lo:lo + n]).reshape(n, 49, -1)
        return out

    def turn_rows(self, phase: str, horizon: int) -> LazyRows:
        """[2N, horizon, 49, 2048] float16 rows in `episodes.turn_examples` order (turn 2 rows
        after all turn 1 rows), zero past each phase's length."""
        p, n = PHASES.index(phase), len(self.offset)
        return LazyRows(lambda r: self._read(r % n, r // n, p, horizon), 2 * n,
                        (horizon, 49, FEATURE_SHAPE[2]), np.float16)

    def episode_rows(self, phase: str, horizon: int) -> LazyRows:
        """[N, 2, horizon, 49, 2048] float16: both turns of each instance."""
        p = PHASES.index(phase)
        return LazyRows(lambda i: np.stack([self._read(i, t, p, horizon) for t in range(2)]),
                        len(self.offset), (2, horizon, 49, FEATURE_SHAPE[2]), np.float16)

    def _by_turn(self, rows: np.ndarray, phase: str, horizon: int, fill) -> np.ndarray:
        """[N, 2, horizon, ...] of per-row values `rows` [R, ...], `fill` past each length."""
        p, n = PHASES.index(phase), len(self.offset)
        out = np.full((n, 2, horizon, *rows.shape[1:]), fill, rows.dtype)
        for i in range(n):
            for t in range(2):
                lo, k = int(self.offset[i, t, p]), min(int(self.length[i, t, p]), horizon)
                out[i, t, :k] = rows[lo:lo + k]
        return out

    def recorded_mask(self, phase: str, horizon: int) -> np.ndarray:
        """[N, 2, horizon] bool: steps with their own entry (the nearest-pose candidates)."""
        return self._by_turn(self.recorded, phase, horizon, False)

    def recorded_poses(self, phase: str, horizon: int) -> np.ndarray:
        """[N, 2, horizon, 6] float32 `entry_poses` (NaN without an entry)."""
        return self._by_turn(self.poses, phase, horizon, np.nan)


def _listed(folder: str) -> dict[str, tuple[int, int, int]]:
    """{file name: (size, mtime ns, ctime ns)} of a folder, in one listing (none if absent)."""
    return paths.file_stats(folder) if paths.isdir(folder) else {}


def pack(features_dir: str, records: Sequence[Mapping], lengths: Mapping[str, np.ndarray],
         cache_dir: str, missing: str = "zeros", progress: bool = True) -> PackedFeatures:
    """The split's features (instances `records`, whose phases take lengths[phase] [N, 2]
    steps: `episodes`' navi_len / assem_len), packed into `cache_dir` on first use."""
    if missing not in MISSING:
        raise ValueError(f"data.missing_feature must be one of {MISSING}, got {missing!r}")
    n = len(records)
    length = np.stack([np.asarray(lengths[p]) for p in PHASES], -1).astype(np.int64)  # [N, 2, 2]
    poses, sources, ignored, seen = [], [PACK_VERSION, missing], 0, set()
    offset = np.zeros((n, 2, 2), np.int64)
    offset.reshape(-1)[1:] = np.cumsum(length.reshape(-1))[:-1]
    total = int(length.sum())
    recorded_at = np.full((max(total, 1), 6), np.nan, np.float32)
    listed = {d: _listed(paths.join(features_dir, d)) for d in (POS_DIR, VFEAT_DIR)}

    def stat(path: str, folder: str) -> list:
        size, mtime, _ = listed[folder][os.path.basename(path)]
        return [os.path.basename(path), size, mtime]
    for i, rec in enumerate(records):
        pz = read_poses(features_dir, rec["mapId"])
        ignored += pz.ignored if rec["mapId"] not in seen else 0
        seen.add(rec["mapId"])
        where = pose_path(features_dir, rec["mapId"])
        steps = {}
        for turn in range(2):
            for p, phase in enumerate(PHASES):
                k = int(length[i, turn, p])
                steps[turn, p] = recorded_steps(pz, phase, turn, k, where)
                lo = int(offset[i, turn, p])
                recorded_at[lo:lo + k] = entry_poses(pz, phase, turn, k)
        poses.append(steps)
        used = [feature_path(features_dir, rec["mapId"], PHASES[p], turn, t)
                for (turn, p), s in steps.items() for t in np.flatnonzero(s)]
        missing_files = [f for f in used if os.path.basename(f) not in listed[VFEAT_DIR]]
        if missing_files:
            raise FileNotFoundError(f"{missing_files[0]}: file not found ({len(missing_files)} "
                                    f"feature files of mapId {rec['mapId']} are missing; its pose "
                                    f"file {where} lists them). {HINT}")
        sources.append([str(rec["mapId"]), length[i].tolist(), stat(where, POS_DIR)]
                       + [stat(f, VFEAT_DIR) for f in used])
    fingerprint = hashlib.sha256(json.dumps(sources).encode()).hexdigest()[:24]
    folder = os.path.join(cache_dir, fingerprint)
    done = os.path.join(folder, "COMPLETE")
    if not os.path.isfile(done):
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f"feats.npy.tmp.{os.getpid()}")
        feats = np.lib.format.open_memmap(tmp, "w+", np.float16, (max(total, 1), *FEATURE_SHAPE))
        recorded = np.zeros(max(total, 1), bool)
        items = range(n)
        if progress:
            items = progress_report(items, desc=f"packing features ({n} instances)", unit="instance")
        for i in items:
            rec = records[i]
            for (turn, p), steps in poses[i].items():
                lo, prev = int(offset[i, turn, p]), None
                for t, has in enumerate(steps):
                    if has:
                        prev = read_feature(feature_path(features_dir, rec["mapId"], PHASES[p],
                                                         turn, t))
                        feats[lo + t] = prev
                        recorded[lo + t] = True
                    else:
                        feats[lo + t] = prev if missing == "previous" else 0
        feats.flush()
        del feats
        os.replace(tmp, os.path.join(folder, "feats.npy"))
        tmp = os.path.join(folder, f"index.npz.tmp.{os.getpid()}")
        with open(tmp, "wb") as f:       # atomic, like feats.npy: hosts may share the cache
            np.savez(f, offset=offset, length=length, recorded=recorded)
        os.replace(tmp, os.path.join(folder, "index.npz"))
        paths.write_text(done, json.dumps({"instances": n, "rows": total}) + "\n")
    index = paths.load_numpy(os.path.join(folder, "index.npz"))
    feats = paths.load_numpy(os.path.join(folder, "feats.npy"), mmap_mode="r")
    return PackedFeatures(feats, index["offset"], index["length"], index["recorded"],
                          recorded_at, ignored)


@jax.jit
def _replay(walkable: env.Walkable, ex: dict) -> dict:
    """{phase: [T, 2N, 3]} (x, z, heading) of the turn-level examples' demonstrations (module
    level, so a second split of the same shapes reuses the compiled replay)."""
    _, _, nav = rollout(env.step_navigation, walkable, navigation_start(walkable, ex),
                        replay_policy, ex["navi_actions"], jax.random.key(0),
                        ex["navi_actions"].shape[1])
    _, _, assem = rollout(env.step_assembly, env.ASSEMBLY, assembly_start(env.ASSEMBLY, ex),
                          replay_policy, ex["assem_actions"], jax.random.key(0),
                          ex["assem_actions"].shape[1])
    return {p: jnp.concatenate([s.position, s.heading[..., None].astype(jnp.float32)], -1)
            for p, s in (("navi", nav.state), ("assem", assem.state))}


def demonstration_poses(walkable: env.Walkable, ep: Mapping[str, np.ndarray]) -> dict:
    """{"navi": [N, 2, Tn, 3], "assem": [N, 2, Ta, 3]} float32 (x, z, heading index) of the
    pose before each demonstration action (Tn, Ta the padded action lengths of `ep`, the
    arrays of `episodes.episodes`), each turn from the ground truth's state at its start: the
    poses at which the release recorded its views."""
    ex = {k: jnp.asarray(v) for k, v in turn_examples(dict(ep)).items()}
    n = len(ep["psi0"])
    out = jax.device_get(_replay(walkable, ex))
    return {p: np.transpose(v, (1, 0, 2)).reshape(2, n, -1, 3).transpose(1, 0, 2, 3)
            for p, v in out.items()}


def recorded_headings(rot: np.ndarray, base_deg) -> np.ndarray:
    """[...] int32 heading index (30-degree steps from `base_deg` [...], degrees: psi0 in
    navigation, 0 in assembly) of recorded agent_rot [..., 3] read as Unity Euler angles
    (pitch, yaw, roll), or -1 where that reading does not hold: NaN, a pitch or roll more than
    `ROT_TOL` off 0, or a yaw more than `ROT_TOL` off the lattice."""
    rot = np.asarray(rot, np.float64)
    with np.errstate(invalid="ignore"):
        level = lambda a: np.abs((a + 180.0) % 360.0 - 180.0) <= ROT_TOL    # noqa: E731
        k = (rot[..., 1] - base_deg) / 30.0
        steps = np.round(k)
        ok = level(rot[..., 0]) & level(rot[..., 2]) & (np.abs(k - steps) * 30.0 <= ROT_TOL)
    return np.where(ok, np.mod(np.nan_to_num(steps), env.NUM_HEADINGS), -1).astype(np.int32)


def heading_base(phase: str, psi0: np.ndarray) -> np.ndarray:
    """[N, 1, 1] degrees that heading index 0 points to: psi0 in navigation (`episodes`' psi0
    [N], radians), +z (0) in assembly."""
    psi0 = np.asarray(psi0, np.float64).reshape(-1, 1, 1)
    return np.degrees(psi0) if phase == "navi" else np.zeros_like(psi0)


def pose_offsets(recorded: np.ndarray, replayed: np.ndarray) -> np.ndarray:
    """[...] (x, z) distance between recorded `entry_poses` [..., 6] and replayed poses [..., 3]
    (x, z, heading: `demonstration_poses`); NaN where nothing was recorded."""
    return np.hypot(recorded[..., 0] - replayed[..., 0], recorded[..., 2] - replayed[..., 1])


def merge_recorded(replayed: np.ndarray, recorded: np.ndarray, base_deg: np.ndarray,
                   tol: float = POSE_TOL) -> tuple[np.ndarray, dict[str, int]]:
    """(poses [N, 2, T, 3] float32, counts): the replayed demonstration poses [N, 2, T, 3], with
    the recorded (x, z) of `recorded` [N, 2, T, 6] (`PackedFeatures.recorded_poses`) at the steps
    where the two differ by more than `tol`, and there the recorded heading where it converts
    (`recorded_headings` from `base_deg`, `heading_base`), else the replayed one. counts:
    `compared` (recorded steps), `differ` (replaced), `headings` (of those, recorded heading)."""
    dist = pose_offsets(recorded, replayed)
    with np.errstate(invalid="ignore"):
        differ = dist > tol                                   # False where NaN
    heading = recorded_headings(recorded[..., 3:], base_deg)
    turned = differ & (heading >= 0)
    out = np.array(replayed, np.float32)
    out[..., 0] = np.where(differ, recorded[..., 0], out[..., 0])
    out[..., 1] = np.where(differ, recorded[..., 2], out[..., 1])
    out[..., 2] = np.where(turned, heading, out[..., 2])
    return out, {"compared": int(np.isfinite(dist).sum()), "differ": int(differ.sum()),
                 "headings": int(turned.sum())}


def recorded_pose_note(counts: Mapping[str, Mapping[str, int]], ignored: int,
                       tol: float = POSE_TOL) -> str:
    """The log line of `merge_recorded`'s counts per phase and the ignored keys."""
    per = ", ".join(f"{p} {c['differ']} of {c['compared']}" for p, c in counts.items())
    headings = sum(c["headings"] for c in counts.values())
    return (f"recorded poses: {per} differ from the replayed demonstration by more than {tol:g} "
            f"in (x, z); the nearest-pose lookup takes the recorded ones there ({headings} with "
            f"the recorded heading); {ignored} pose-file keys of turns >= {TURNS} ignored")


def nearest_recorded(position: jax.Array, heading: jax.Array, poses: jax.Array,
                     recorded: jax.Array, tol: float = 1e-3) -> jax.Array:
    """Index of the recorded pose (poses [T, 3] (x, z, heading index), recorded [T] bool)
    nearest to one agent pose (position [2], heading ()): the nearest position; among those
    within `tol` of it the nearest heading (in 30-degree steps, either way round); then the
    earliest step."""
    dist = jnp.linalg.norm(poses[:, :2] - position, axis=-1)
    dist = jnp.where(recorded, dist, jnp.inf)
    near = recorded & (dist <= jnp.min(dist) + tol)
    turn = jnp.abs(poses[:, 2].astype(jnp.int32) - heading) % env.NUM_HEADINGS
    turn = jnp.minimum(turn, env.NUM_HEADINGS - turn)
    t = jnp.arange(poses.shape[0])
    return jnp.argmin(jnp.where(near, turn * poses.shape[0] + t, jnp.iinfo(jnp.int32).max))


def nearest_steps(batch: Mapping, phase: str, state) -> jax.Array:
    """[B] int: each agent's `nearest_recorded` step among a turn-level `batch`'s
    `{phase}_feat_pose` [B, T, 3] where `{phase}_recorded` [B, T]."""
    return jax.vmap(nearest_recorded)(state.position, state.heading,
                                      batch[f"{phase}_feat_pose"], batch[f"{phase}_recorded"])


def feature_view(batch: Mapping, phase: str):
    """view(state) -> (feats [B, 49, 2048], valid [B, 49]) for a turn-level `batch` holding
    `{phase}_feats` [B, T, 49, 2048], `{phase}_feat_pose` [B, T, 3] and `{phase}_recorded`
    [B, T]: the features of each agent's nearest recorded pose."""
    feats = batch[f"{phase}_feats"]

    def view(state):
        idx = nearest_steps(batch, phase, state)
        f = feats[jnp.arange(feats.shape[0]), idx]
        return f, jnp.ones(f.shape[:2], bool)
    return view
