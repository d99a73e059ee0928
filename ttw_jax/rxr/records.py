"""RxR and R2R instruction records: reading, validation, pose-trace masks and the 36 views.

Readers: `read_r2r` (an R2R JSON file), `read_rxr` (an RxR guide or follower file) and
`read_rxr_split` (a split's guide and / or follower files in a manual directory). Every reader
returns *instruction records*, one dict per instruction (`new_record`; `check_record` validates
one from elsewhere, e.g. a generator):

    instruction_id: int      unique within a split (R2R: path_id * 10 + k, see `read_r2r`)
    path_id: int
    scan: str                Matterport3D scan id
    path: list[str]          viewpoint ids, start first (R2R test: the start only)
    heading: float           initial heading, radians, clockwise from +y (z up)
    instruction: str
    language: str            "en-IN" | "en-US" | "hi-IN" | "te-IN" (RxR), "en" (R2R)
    annotator: str           "guide" | "follower" | "r2r" | "synthetic"
    edit_distance: float     RxR transcription edit distance; NaN when absent
    distance: float          R2R path length in metres; NaN when absent
    timed_words: list[str]   RxR `timed_instruction` words (possibly empty)
    step_words: bool [len(path), len(timed_words)] or None   from the pose trace (below)
    step_views: bool [len(path), NUM_VIEWS] or None          from the pose trace (below)
    step_subwords: bool [len(path), m] or None               the trace's `text_masks`
    text_features: float32 [m, D] or None                     the release's text features
    translated_from: str     "" for an annotation; for a cross-translation (`cross_translations`)
                             the language of the instruction it translates

Manual files (the directory of the annotation file unless `manual_dir` is given):
- R2R: `R2R_{train,val_seen,val_unseen,test}.json` (Matterport3DSimulator, `tasks/R2R/data`).
- RxR: `rxr_{split}_{guide,follower}.jsonl.gz` (or `.jsonl`) of
  https://github.com/google-research-datasets/RxR; the test file keeps its release name
  `rxr_test_standard_public_guide.jsonl.gz` (also accepted without `_public`).
- Pose traces (optional): `pose_traces/rxr_{split}/{id:06d}_{annotator}_pose_trace.npz` as in the
  release, or `pose_traces/{id:06d}_{annotator}_pose_trace.npz`; `id` is the instruction_id for
  guides and the `demonstration_id` for followers (the release's naming), falling back to the
  instruction_id when a follower line has no demonstration_id. No file: masks are None.
- Text features (optional): the release's multilingual-BERT features, one `.npz` per
  instruction, `text_features/rxr_{split}/{id:06d}_{lang}_text_features.npz` (lang = en, hi or
  te: the language without its locale) with `features` float [m, 768] (one row per subword) and
  `tokens` [m, 1]; also found directly in `text_features/` or in `pose_traces/rxr_{split}/`
  (the README's download URLs), or as a converted `text_features/{id:06d}.npy` [L, D] (R2R
  too). Readers attach what they find (None otherwise); a trainer that asks for text features
  refuses records without them.

Follower lines of the release carry only `demonstration_id`, `instruction_id`, `annotator_id`,
`path` and `metrics`: any required field they lack (scan, path_id, heading, instruction, language,
timed_instruction, edit_distance) comes from the guide annotation with the same instruction_id
(`guides` of `read_rxr`); the path is the follower's own.

Word times (seconds, `QUANTITIES["time"]`; NaN, infinite or negative ones are refused). A
`timed_instruction` word whose `start_time` / `end_time` is missing or null (as in parts of the
release) inherits its neighbours' times: a missing start takes the closest known time before it
(normally the previous word's end), a missing end the closest known time after it (normally the
next word's start), so a run of untimed words spans the gap between its timed neighbours; at
the ends of the utterance the other direction is used. An end before its start is raised to the
start.

Pose-trace masks. Keys used: `pano` (viewpoint per snapshot, [T] or [T, 1]), `time` ([T] or
[T, 1] seconds), `extrinsic_matrix` ([T, 16] row-major as released, or [T, 4, 4]) and, in follower
traces, `audio_time` (the follower's position in the guide's recording; used instead of `time` to
align words, since word times are times of the guide's recording); optional, as in the current
release: `intrinsic_matrix` ([T, 16] or [T, 4, 4], the OpenGL projection matrix),
`feature_weights` ([k, 36], the release's observed-pixel mask pooled into the 36 views, one row
per path viewpoint) and `text_masks` (or `text_mask`, [k, m]: the subwords spoken / heard at each
path viewpoint); `image_mask` ([k, H, 2H], the observed pixels) is only checked. Every key is read
whole and checked for its dtype, shape and finite values (`load_pose_trace`). Snapshots are
assigned to path steps in order: a snapshot at the current step's viewpoint stays there,
otherwise it moves to the next later step at that viewpoint, so a path that revisits a viewpoint
is handled. Snapshot i covers the time [t_i, t_{i+1}) (the first from -inf, the last to +inf),
so step t spans from its first snapshot until the next step's.
- `step_words[t, w]`: word w's [start, end] overlaps the time of step t (a zero-length word counts
  at its instant). The paper's textual mask b_t is the words spoken "at or prior to step t": the
  episode arrays take the running OR over steps (`ttw_jax.rxr.episodes`).
- `step_views[t, v]`: the paper's visual mask m_t, "which pixels were observed in the panoramic
  image at t", max-pooled onto the 36 views: `feature_weights > 0` when the trace has them; else
  the equirectangular pixels inside some snapshot's camera frustum at step t (`intrinsic_matrix`)
  max-pooled over each view's 60-degree image (one snapshot covers several views); else, for
  traces without intrinsics, the view nearest each snapshot's centre (`nearest_view`).
- `step_subwords[t, s]`: `text_masks` as released (subwords s of the text features).
Camera direction: the extrinsic matrix is camera-to-world and the camera looks along its local -z
axis (its local +y is up): the OpenGL / three.js convention of the RxR viewer, which renders with
the matrix as the camera's world matrix. Its world frame is three.js's y-up frame, i.e. Matterport
(x, y, z) = (X, -Z, Y); Matterport's own z-up frame is accepted too: `camera_view_angles` picks the
frame whose vertical axis the camera's up axis is closer to on average (`world_up="auto"`).
Heading = atan2(dx, dy) clockwise from +y, elevation = atan2(dz, hypot(dx, dy)) in Matterport axes,
as `ttw_jax.rxr.graph.edge_angles`.
"""
from __future__ import annotations

import math
import os
import re
from typing import Any, Mapping, Sequence

import ml_dtypes
import numpy as np

from ttw_jax.core import paths, records as core
from ttw_jax.rxr.views import (NUM_VIEWS, nearest_view, observed_pixels, pooled_view_mask,
                               view_regions)

RXR_HINT = ("RxR annotations are in the official release, "
            "https://github.com/google-research-datasets/RxR (`rxr_{split}_guide.jsonl.gz`, "
            "`rxr_{split}_follower.jsonl.gz`, `pose_traces/`).")
R2R_HINT = ("R2R annotations are in the Matterport3DSimulator repository "
            "(github.com/peteanderson80/Matterport3DSimulator, `tasks/R2R/data/R2R_{split}.json`).")

RXR_LANGUAGES = ("en-IN", "en-US", "hi-IN", "te-IN")
LANGUAGE_ALIASES = {"hi": "hi-IN", "te": "te-IN"}
ANNOTATORS = ("guide", "follower", "r2r", "synthetic")
R2R_SPLITS = ("train", "val_seen", "val_unseen", "test")
RXR_SPLITS = ("train", "val_seen", "val_unseen", "test_standard")
# Splits whose reference paths the release withholds (a leaderboard scores them): R2R's test
# (`R2R_test.json` holds each path's start viewpoint only; Anderson et al.'s evaluation server) and
# RxR's test_standard / test_challenge (Ku et al. 2020, "Test Set": sequestered for the public
# leaderboard and challenge; the release's test_standard_public file has no path). They get
# predictions, never metrics (`hidden_splits`).
R2R_HIDDEN = ("test",)
RXR_HIDDEN = ("test_standard", "test_challenge")
R2R_IDS_PER_PATH = 10   # R2R instruction_id = path_id * 10 + k (k < 10)
RXR_REQUIRED = ("instruction_id", "path_id", "scan", "path", "heading", "instruction", "language")
# fields a follower line may take from its guide annotation
GUIDE_FIELDS = ("path_id", "scan", "heading", "instruction", "language", "timed_instruction",
                "edit_distance")

RECORD_KEYS = ("instruction_id", "path_id", "scan", "path", "heading", "instruction", "language",
               "annotator", "edit_distance", "distance", "timed_words", "step_words",
               "step_views", "step_subwords", "text_features", "translated_from")
# the languages of the release's text-feature files (`{id:06d}_{lang}_text_features.npz`)
TEXT_FEATURE_LANGUAGES = ("en", "hi", "te")


class RecordFormatError(core.RecordFormatError):
    """An annotation file exists but an entry does not parse; the message names file, line (or
    entry) and field."""


class PoseTraceError(core.RecordFormatError):
    """A pose-trace or text-feature file exists but is malformed; the message names file and key."""


# ----------------------------------------------------------------------------- views and poses

def _world_up(extrinsic: np.ndarray) -> str:
    """"z" or "y": the world axis the cameras' up vectors (local +y) are closer to on average
    ("y" on a tie)."""
    up = np.asarray(extrinsic)[:, :3, 1]
    return "z" if np.abs(up[:, 2]).mean() > np.abs(up[:, 1]).mean() else "y"


def camera_view_angles(extrinsic, world_up: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """(heading [T] in [0, 2pi) clockwise from +y, elevation [T]) of camera-to-world matrices
    [T, 4, 4] (or [T, 16] row-major) whose camera looks along its local -z axis.

    world_up: "y" (three.js frame of the RxR release: Matterport (x, y, z) = (X, -Z, Y)), "z"
    (Matterport frame) or "auto" (the axis the cameras' up vectors, local +y, are closer to on
    average; "y" on a tie)."""
    m = np.asarray(extrinsic, np.float64)
    m = m.reshape(m.shape[0], 4, 4) if m.ndim == 2 else m
    forward = -m[:, :3, 2]
    if world_up == "auto":
        world_up = _world_up(m)
    if world_up == "y":
        dx, dy, dz = forward[:, 0], -forward[:, 2], forward[:, 1]
    elif world_up == "z":
        dx, dy, dz = forward[:, 0], forward[:, 1], forward[:, 2]
    else:
        raise ValueError(f"world_up must be 'auto', 'y' or 'z', got {world_up!r}")
    heading = np.mod(np.arctan2(dx, dy), 2 * math.pi)
    return heading, np.arctan2(dz, np.hypot(dx, dy))


def fill_word_times(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) [W] float64 with missing (NaN) times inherited from the neighbours (see the
    module docstring). ValueError if words exist but no time at all is known."""
    times = np.stack([np.asarray(starts, np.float64), np.asarray(ends, np.float64)], 1).ravel()
    if not len(times):
        return np.zeros(0), np.zeros(0)
    known = np.isfinite(times)
    if not known.any():
        raise ValueError("no word has a start_time or end_time")
    idx = np.arange(len(times))
    last_before = np.maximum.accumulate(np.where(known, idx, -1))
    first_after = np.minimum.accumulate(np.where(known, idx, len(times))[::-1])[::-1]
    prev_val = np.where(last_before >= 0, times[np.maximum(last_before, 0)], np.nan)
    next_val = np.where(first_after < len(times), times[np.minimum(first_after, len(times) - 1)],
                        np.nan)
    is_start = idx % 2 == 0
    fill = np.where(is_start, np.where(np.isnan(prev_val), next_val, prev_val),
                    np.where(np.isnan(next_val), prev_val, next_val))
    times = np.where(known, times, fill).reshape(-1, 2)
    return times[:, 0], np.maximum(times[:, 1], times[:, 0])


def assign_steps(path: Sequence[str], panos: Sequence[str], where: str) -> np.ndarray:
    """Path step [T] int64 of each snapshot (see the module docstring); PoseTraceError naming
    `where` and key 'pano' for a snapshot off the rest of the path."""
    step = np.empty(len(panos), np.int64)
    t = 0
    for i, p in enumerate(panos):
        if p != path[t]:
            k = next((k for k in range(t + 1, len(path)) if path[k] == p), None)
            if k is None:
                raise PoseTraceError(f"{where}: key 'pano': snapshot {i} is at viewpoint {p!r}, "
                                     f"which is not on the path at or after step {t} "
                                     f"({path[t]!r})")
            t = k
        step[i] = t
    return step


def step_masks(path: Sequence[str], panos: Sequence[str], times, extrinsic, word_starts,
               word_ends, where: str = "pose trace", world_up: str = "auto"
               ) -> tuple[np.ndarray, np.ndarray]:
    """(step_words [len(path), W], step_views [len(path), 36]) bool from T snapshots (viewpoint,
    time, camera-to-world matrix) and the W words' filled times (see the module docstring)."""
    n, num_words = len(path), len(word_starts)
    step = assign_steps(path, panos, where)
    times = np.asarray(times, np.float64)
    step_views = np.zeros((n, NUM_VIEWS), bool)
    heading, elevation = camera_view_angles(extrinsic, world_up)
    step_views[step, nearest_view(heading, elevation)] = True
    # snapshot i covers [t_i, t_{i+1}) (its ends swapped if the clock goes back); the first
    # also covers everything before it, the last everything after it
    following = np.concatenate([times[1:], [np.inf]])
    lo, hi = np.minimum(times, following), np.maximum(times, following)
    lo[0] = -np.inf
    a = np.asarray(word_starts, np.float64)[None]            # [1, W]
    b = np.asarray(word_ends, np.float64)[None]
    overlap = (a < hi[:, None]) & ((b > lo[:, None]) | ((a == b) & (a >= lo[:, None])))  # [T, W]
    step_words = np.zeros((n, num_words), bool)
    np.logical_or.at(step_words, step, overlap)
    return step_words, step_views


def _member(data, key: str, path: str) -> np.ndarray | None:
    """Array `key` of an open `.npz`; None when it holds Python objects (they would need pickle,
    which is refused). A damaged member is a PoseTraceError naming the file and the key."""
    with core.damaged(f"{path}: key '{key}'", PoseTraceError):
        try:
            return data[key]
        except ValueError as e:
            if "pickle" not in str(e):
                raise
            return None


def _trace_array(data, key: str, path: str, dtype_kind: str) -> np.ndarray:
    if key not in data:
        raise PoseTraceError(f"{path}: missing key '{key}'")
    arr = _member(data, key, path)
    if arr is None:
        raise PoseTraceError(f"{path}: key '{key}' is not a plain array (an object array would "
                             "need pickle, which is refused)")
    if arr.dtype.kind not in dtype_kind:
        raise PoseTraceError(f"{path}: key '{key}' has dtype {arr.dtype}")
    return arr


def _trace_matrices(data, key: str, path: str, t: int) -> np.ndarray:
    """[t, 4, 4] float64 of a pose-trace key stored as [t, 16] (row-major) or [t, 4, 4]."""
    m = _trace_array(data, key, path, "fiu")
    if m.shape not in ((t, 16), (t, 4, 4)):
        raise PoseTraceError(f"{path}: key '{key}' has shape {m.shape}, expected [{t}, 16] or "
                             f"[{t}, 4, 4] (T from 'pano')")
    m = m.reshape(t, 4, 4).astype(np.float64)
    if not np.isfinite(m).all():
        raise PoseTraceError(f"{path}: key '{key}' has non-finite values")
    # row-major as released: the bottom row of a pose is (0, 0, 0, 1), of an OpenGL projection
    # (0, 0, -1, 0); a column-major (transposed) matrix has it in its last column instead
    bottom = (0.0, 0.0, 0.0, 1.0) if key == "extrinsic_matrix" else (0.0, 0.0, -1.0, 0.0)
    if not np.allclose(m[:, 3], bottom, atol=1e-4):
        transposed = np.allclose(m[:, :, 3], bottom, atol=1e-4)
        raise PoseTraceError(
            f"{path}: key '{key}' has bottom row {m[0, 3].tolist()}, expected {list(bottom)} "
            + ("(it looks column-major: store it row-major, as the release does)" if transposed
               else "(row-major [4, 4] matrices as the release stores them)"))
    return m


# the dtype each feature-like array of a pose trace or text-feature file is used in
TRACE_USED_DTYPES = {"feature_weights": np.float32, "text_masks": np.float32,
                     "text_mask": np.float32, "image_mask": np.float32}
TEXT_FEATURES_DTYPE = ml_dtypes.bfloat16   # `episodes` casts text features to it


def _finite(arr: np.ndarray, key: str, path: str, used_dtype) -> None:
    """PoseTraceError naming the key when `arr` is not finite stored or as `used_dtype`."""
    problem = core.nonfinite_problem(arr, used_dtype)
    if problem:
        raise PoseTraceError(f"{path}: key '{key}': {problem}")


def _mask_rows(data, key: str, path: str, shape: str, tail: tuple = ()) -> np.ndarray:
    """A per-path-viewpoint array of a pose trace (bool, or numbers finite as float32) of the
    `shape` "[k, ...]" (its number of dimensions) whose trailing dimensions are `tail` (where
    given)."""
    arr = _trace_array(data, key, path, "biuf")
    if arr.ndim != shape.count(",") + 1 or (tail and arr.shape[1:] != tail):
        raise PoseTraceError(f"{path}: key '{key}' has shape {arr.shape}, expected {shape} "
                             "(k path viewpoints)")
    _finite(arr, key, path, TRACE_USED_DTYPES[key])
    return arr


def load_pose_trace(path: str) -> dict:
    """{pano: list[str] [T], time: [T] float64, audio_time: [T] float64 or None,
    extrinsic: [T, 4, 4] float64, intrinsic: [T, 4, 4] float64 or None, feature_weights:
    [k, 36] float32 or None, text_masks: [k, m] bool or None, image_mask: [k, H, W] bool or
    None} of an RxR `*_pose_trace.npz` (k path viewpoints, m text-feature subwords; the last four
    keys are optional, as in older traces), validated (PoseTraceError naming the file and the
    key): every member is read whole (a damaged one fails its checksum), each known key has its
    dtype, shape and finite values, and the per-viewpoint keys agree on k."""
    with core.damaged(path, PoseTraceError):
        data = paths.load_numpy(path)
    if not hasattr(data, "files"):
        raise PoseTraceError(f"{path}: not an .npz archive (a single array)")
    with data:      # every member read to its end, once: its checksum is verified
        data = {key: _member(data, key, path) for key in data.files}
    for key, arr in data.items():
        if arr is None:
            raise PoseTraceError(f"{path}: key '{key}' is not a plain array (an object array "
                                 "would need pickle, which is refused)")
    pano = _trace_array(data, "pano", path, "US")
    if pano.ndim == 2 and pano.shape[1] == 1:
        pano = pano[:, 0]
    if pano.ndim != 1 or not len(pano):
        raise PoseTraceError(f"{path}: key 'pano' has shape {pano.shape}, expected [T] or "
                             f"[T, 1] with T >= 1")
    panos = [p.decode() if isinstance(p, bytes) else str(p) for p in pano.tolist()]
    if not all(panos):
        raise PoseTraceError(f"{path}: key 'pano': snapshot {panos.index('')} has an empty "
                             "viewpoint id")
    t = len(panos)
    out = {"pano": panos, "audio_time": None}
    for key in ("time", "audio_time"):
        if key == "audio_time" and key not in data:
            continue
        arr = _trace_array(data, key, path, "fiu")
        if arr.shape not in ((t,), (t, 1)):
            raise PoseTraceError(f"{path}: key '{key}' has shape {arr.shape}, expected "
                                 f"[{t}] or [{t}, 1] (T from 'pano')")
        _finite(arr, key, path, np.float64)
        out[key] = arr.reshape(t).astype(np.float64)
    ext = _trace_matrices(data, "extrinsic_matrix", path, t)
    if (np.linalg.norm(ext[:, :3, 1], axis=-1) < 1e-6).any() or (
            np.linalg.norm(ext[:, :3, 2], axis=-1) < 1e-6).any():
        raise PoseTraceError(f"{path}: key 'extrinsic_matrix' has a degenerate rotation")
    out["extrinsic"] = ext
    out["intrinsic"] = (_trace_matrices(data, "intrinsic_matrix", path, t)
                        if "intrinsic_matrix" in data else None)
    out["feature_weights"] = out["text_masks"] = out["image_mask"] = None
    rows = {}
    if "feature_weights" in data:
        fw = _mask_rows(data, "feature_weights", path, f"[k, {NUM_VIEWS}]",
                        (NUM_VIEWS,))
        out["feature_weights"], rows["feature_weights"] = fw.astype(np.float32), len(fw)
    for key in ("text_masks", "text_mask"):   # the release README uses both names
        if key in data:
            tm = _trace_array(data, key, path, "biuf")
            tm = _mask_rows(data, key, path,
                            "[k, m, 1]" if tm.ndim == 3 and tm.shape[-1] == 1 else "[k, m]")
            out["text_masks"] = (tm[..., 0] if tm.ndim == 3 else tm) != 0
            rows[key] = len(tm)
            break
    if "image_mask" in data:
        im = _mask_rows(data, "image_mask", path, "[k, H, W]")
        if im.shape[2] != 2 * im.shape[1]:
            raise PoseTraceError(f"{path}: key 'image_mask' has shape {im.shape}, expected "
                                 "[k, H, 2H] (equirectangular masks)")
        out["image_mask"], rows["image_mask"] = im != 0, len(im)
    first, k = next(iter(rows.items()), (None, 0))
    for key, n in rows.items():
        if n != k:
            raise PoseTraceError(f"{path}: key '{key}' has {n} rows, key '{first}' {k} (each "
                                 "has one per path viewpoint)")
    return out


def trace_step_views(trace: Mapping[str, Any], path: Sequence[str], where: str,
                     world_up: str = "auto") -> np.ndarray | None:
    """The paper's visual masks m_t [len(path), 36] bool of a loaded pose trace, the best way
    its keys allow: `feature_weights > 0` (the release's masks pooled into the 36 views); else
    the pixels the snapshots' cameras saw (`intrinsic_matrix`), max-pooled over each view's
    60-degree image (`views.pooled_view_mask`); None without intrinsics (then `step_masks`
    falls back to the view nearest each snapshot's centre)."""
    fw = trace.get("feature_weights")
    if fw is not None:
        if len(fw) != len(path):
            raise PoseTraceError(f"{where}: key 'feature_weights' has {len(fw)} rows, expected "
                                 f"one per path viewpoint ({len(path)})")
        return fw > 0
    if trace.get("intrinsic") is None:
        return None
    ext = trace["extrinsic"]
    up = world_up if world_up != "auto" else _world_up(ext)
    observed = observed_pixels(ext, trace["intrinsic"], up)                     # [T, H, W]
    step = assign_steps(path, trace["pano"], where)
    seen = np.zeros((len(path),) + observed.shape[1:], bool)
    np.logical_or.at(seen, step, observed)
    return pooled_view_mask(seen, view_regions(*observed.shape[1:]))


def pose_trace_masks(path_file: str, path: Sequence[str], word_starts, word_ends,
                     world_up: str = "auto"
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(step_words, step_views, step_subwords) of one record from its pose-trace file
    `path_file`: words by time (`step_masks`), views by `trace_step_views` when the trace
    allows, and the release's `text_masks` [len(path), m] over text-feature subwords (None when
    absent)."""
    trace = load_pose_trace(path_file)
    times = trace["audio_time"] if trace["audio_time"] is not None else trace["time"]
    step_words, step_views = step_masks(path, trace["pano"], times, trace["extrinsic"],
                                        word_starts, word_ends, where=path_file,
                                        world_up=world_up)
    pooled = trace_step_views(trace, path, path_file, world_up)
    subwords = trace["text_masks"]
    for key in ("text_masks", "image_mask"):
        if trace[key] is not None and len(trace[key]) != len(path):
            raise PoseTraceError(f"{path_file}: key '{key}' has {len(trace[key])} rows, "
                                 f"expected one per path viewpoint ({len(path)})")
    return step_words, step_views if pooled is None else pooled, subwords


def load_text_features(path: str) -> np.ndarray:
    """float32 [L, D] of a text-feature file: the release's `.npz` (`features` [m, 768] floats,
    one row per multilingual-BERT subword; `tokens` [m] or [m, 1] strings, optional) or a
    `.npy` [L, D] of floats, every byte of it an array's (PoseTraceError naming the file and key:
    integers, no row, values not finite stored or as `TEXT_FEATURES_DTYPE`, the dtype they are
    used in)."""
    if path.endswith(".npy"):
        core.check_npy_size(path, PoseTraceError)
    with core.damaged(path, PoseTraceError):
        data = paths.load_numpy(path)
    if hasattr(data, "files"):
        with data:
            arr = _trace_array(data, "features", path, "fiu")
            # tokens stored as Python objects are not needed: skipped
            tokens = _member(data, "tokens", path) if "tokens" in data.files else None
            if tokens is not None:
                if tokens.dtype.kind not in "US" or tokens.ndim not in (1, 2) or (
                        tokens.ndim == 2 and tokens.shape[1] != 1):
                    raise PoseTraceError(f"{path}: key 'tokens' is {tokens.dtype} "
                                         f"{tokens.shape}, expected strings [m] or [m, 1]")
                if len(tokens) != len(arr):
                    raise PoseTraceError(f"{path}: key 'tokens' has {len(tokens)} rows, "
                                         f"'features' {len(arr)}")
    else:
        arr = data
    if not isinstance(arr, np.ndarray) or arr.ndim != 2 or arr.dtype.kind not in "fiu":
        raise PoseTraceError(f"{path}: text features must be a numeric [L, D] array, got "
                             f"{getattr(arr, 'dtype', type(arr).__name__)} "
                             f"{getattr(arr, 'shape', '')}")
    if arr.dtype.kind != "f":
        raise PoseTraceError(f"{path}: text features are {arr.dtype}, expected "
                             "floating point (the release's float32)")
    if not arr.size:
        raise PoseTraceError(f"{path}: text features of shape {arr.shape}, "
                             "expected at least one subword and one dimension")
    problem = core.nonfinite_problem(arr, TEXT_FEATURES_DTYPE)
    if problem:
        raise PoseTraceError(f"{path}: text features have non-finite values ({problem})")
    return arr.astype(np.float32)


def load_text_tokens(path: str) -> list[str]:
    """The subword tokens of a release text-feature `.npz` (`tokens` [m] or [m, 1]); [] when the
    file has none or stores them as Python objects (which would need pickle)."""
    with core.damaged(path, PoseTraceError), paths.load_numpy(path) as data:
        tokens = _member(data, "tokens", path) if "tokens" in data.files else None
    if tokens is None:
        return []
    return [t.decode() if isinstance(t, bytes) else str(t) for t in tokens.reshape(-1).tolist()]


def cross_translations(records: Sequence[dict], manual_dir: str, split: str | None
                       ) -> list[dict]:
    """The records of the release's cross-translated text features (Ku et al. 2020, Table 5,
    exp. 5): for each guide record and each other language L of `TEXT_FEATURE_LANGUAGES` whose
    `{instruction_id:06d}_{L}_text_features.npz` is in `manual_dir` (where the record's own
    features are looked for), a copy paired with the guide's path that carries those features,
    `language` L's tag ("hi-IN", "te-IN"; "en" for English, whose locale a translation does not
    have), `translated_from` the original language, the instruction as the features' subword
    tokens (without [CLS] / [SEP]) and no pose-trace masks (they index the original's words)."""
    files = FileIndex()
    out = []
    for rec in records:
        if rec["annotator"] != "guide" or rec.get("translated_from"):
            continue
        own = rec["language"].split("-", 1)[0]
        for lang in TEXT_FEATURE_LANGUAGES:
            if lang == own:
                continue
            cands = [c for c in text_features_candidates(manual_dir, rec["instruction_id"], lang,
                                                         split) if c.endswith(".npz")]
            path = files.find(cands)
            if path is None:
                continue
            tokens = [t for t in load_text_tokens(path) if t not in ("[CLS]", "[SEP]")]
            out.append(dict(rec, language=LANGUAGE_ALIASES.get(lang, lang),
                            instruction=" ".join(tokens), translated_from=rec["language"],
                            timed_words=[], step_words=None, step_views=None,
                            step_subwords=None, text_features=load_text_features(path)))
    return out


class FileIndex:
    """Names of the files in a few directories, listed once each (missing directory: none)."""

    def __init__(self):
        self._names: dict[str, frozenset] = {}

    def find(self, candidates: Sequence[str]) -> str | None:
        for path in candidates:
            folder, name = os.path.split(path)
            if folder not in self._names:
                self._names[folder] = (frozenset(paths.listdir(folder))
                                       if paths.isdir(folder) else frozenset())
            if name in self._names[folder]:
                return path
        return None


def pose_trace_candidates(manual_dir: str, file_id: int, annotator: str,
                          split: str | None) -> list[str]:
    """The paths looked at, in order, for the pose trace of one RxR annotation."""
    name = f"{file_id:06d}_{annotator}_pose_trace.npz"
    out = [os.path.join(manual_dir, "pose_traces", f"rxr_{split}", name)] if split else []
    return out + [os.path.join(manual_dir, "pose_traces", name)]


def text_features_candidates(manual_dir: str, instruction_id: int, language: str,
                             split: str | None = None) -> list[str]:
    """The paths looked at, in order, for an instruction's text features: the release's
    `text_features/rxr_{split}/{id:06d}_{lang}_text_features.npz` (lang: en, hi or te), the
    same without the split folder or under `pose_traces/rxr_{split}/` (where the release
    README's per-file URLs put them), then a converted `text_features/{id:06d}.npy`."""
    name = f"{instruction_id:06d}_{language.split('-', 1)[0]}_text_features.npz"
    folders = ([os.path.join("text_features", f"rxr_{split}")] if split else []) + \
        ["text_features"] + ([os.path.join("pose_traces", f"rxr_{split}")] if split else [])
    return [os.path.join(manual_dir, f, name) for f in folders] + [
        os.path.join(manual_dir, "text_features", f"{instruction_id:06d}.npy")]


# ----------------------------------------------------------------------------- field checks

def _fields(rec: Mapping[str, Any], where: str) -> core.Fields:
    return core.Fields(rec, where, RecordFormatError)


def _viewpoints(f: core.Fields, name: str) -> list[str]:
    return list(f.get(name, core.list_of(core.is_nonempty_string, 1),
                      "a non-empty list of viewpoint ids (non-empty strings)"))


def normalize_language(lang: str) -> str | None:
    """An RxR language tag ("hi" -> "hi-IN", "te" -> "te-IN"), None if not an RxR language."""
    lang = LANGUAGE_ALIASES.get(lang, lang)
    return lang if lang in RXR_LANGUAGES else None


def _timed_words(rec, where: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(words, filled starts, filled ends) of `timed_instruction` (absent or null: none)."""
    raw = rec.get("timed_instruction")
    if raw is None:
        return [], np.zeros(0), np.zeros(0)
    name, f = "timed_instruction", _fields(rec, where)
    if not isinstance(raw, list):
        raise f.bad(name, "a list of {word, start_time, end_time}", raw)
    words, times = [], []
    for j, item in enumerate(raw):
        if not isinstance(item, dict) or not core.is_string(item.get("word")):
            raise f.bad(f"{name}[{j}].word", "a string", item)
        words.append(item["word"])
        for key in ("start_time", "end_time"):
            problem = item.get(key) is not None and core.quantity_problem(item[key], "time")
            if problem:
                raise f.fail(f"{name}[{j}].{key}", f"{problem} (or absent, or null)")
        times.append([math.nan if item.get(k) is None else float(item[k])
                      for k in ("start_time", "end_time")])
    try:
        starts, ends = fill_word_times(*np.asarray(times, np.float64).reshape(-1, 2).T)
    except ValueError as e:
        raise f.fail(name, str(e)) from None
    return words, starts, ends


def new_record(**fields) -> dict:
    """A record with every key of `RECORD_KEYS` (defaults: NaN floats, no words, no masks)."""
    rec = {"edit_distance": math.nan, "distance": math.nan, "timed_words": [],
           "step_words": None, "step_views": None, "step_subwords": None, "text_features": None,
           "translated_from": ""}
    rec.update(fields)
    unknown = set(rec) - set(RECORD_KEYS)
    missing = set(RECORD_KEYS) - set(rec)
    if unknown or missing:
        raise KeyError(f"record keys: unknown {sorted(unknown)}, missing {sorted(missing)}")
    return {k: rec[k] for k in RECORD_KEYS}


def check_record(rec: Mapping[str, Any], where: str) -> dict:
    """A validated copy of an instruction record (e.g. from a generator) in the canonical form:
    plain Python scalars, masks as bool arrays or None, `text_features` float32 or None (the key
    may be absent). RecordFormatError naming `where` and the field otherwise."""
    if not isinstance(rec, Mapping):
        raise RecordFormatError(f"{where}: expected a record dict, got {type(rec).__name__}")
    f = _fields(rec, where)
    path = _viewpoints(f, "path")
    annotator = f.get("annotator", lambda a: isinstance(a, str) and a in ANNOTATORS,
                      f"one of {ANNOTATORS}")
    words = f.get("timed_words", core.list_of(core.is_string), "a list of strings")
    out = new_record(
        instruction_id=f.int("instruction_id", 0), path_id=f.int("path_id", 0),
        scan=f.file_stem("scan"), path=path, heading=f.number("heading"),
        instruction=f.string("instruction"), language=f.string("language", nonempty=True),
        annotator=annotator, edit_distance=f.optional_number("edit_distance"),
        distance=f.optional_number("distance"), timed_words=list(words))
    shapes = {"step_words": (len(path), len(words)), "step_views": (len(path), NUM_VIEWS)}
    for key, shape in shapes.items():
        v = rec.get(key)
        if v is not None:
            arr = np.asarray(v)
            if arr.dtype != np.bool_ or arr.shape != shape:
                raise f.bad(key, f"None or a bool array of shape {shape}",
                            f"{arr.dtype} {arr.shape}")
            out[key] = arr
    if (out["step_words"] is None) != (out["step_views"] is None):
        raise RecordFormatError(f"{where}: fields 'step_words' and 'step_views' must both be "
                                f"arrays or both None")
    sub = rec.get("step_subwords")
    if sub is not None:
        arr = np.asarray(sub)
        if arr.dtype != np.bool_ or arr.ndim != 2 or len(arr) != len(path):
            raise f.bad("step_subwords", f"None or a bool array of shape ({len(path)}, m)",
                        f"{arr.dtype} {arr.shape}")
        out["step_subwords"] = arr
    tf = rec.get("text_features")
    if tf is not None:
        arr = np.asarray(tf)
        if arr.ndim != 2 or arr.dtype.kind not in "fiu":
            raise f.bad("text_features", "None or a numeric [L, D] array",
                        f"{arr.dtype} {arr.shape}")
        out["text_features"] = arr.astype(np.float32)
    if rec.get("translated_from"):
        out["translated_from"] = f.string("translated_from")
    return out


# ----------------------------------------------------------------------------- R2R

def read_r2r(path: str, manual_dir: str | None = None, bodies: bool = True) -> list[dict]:
    """The instruction records of an R2R JSON file, in file order (entry by entry, then
    instruction by instruction).

    The file is a JSON list of {distance (metres, absent in test), scan, path_id, path, heading
    (radians), instructions: [1-10 non-empty strings]} (the release has 3, a few train / val
    paths have 4); numbers follow the shared rule (`core.QUANTITIES`: a NaN, negative or huge
    distance or heading is refused). Instruction
    k of a path gets `instruction_id = path_id * 10 + k`, language "en", annotator "r2r", no
    words and no masks; `text_features/{instruction_id:06d}.npy` in `manual_dir` (default: the
    file's directory) is attached when present (`bodies=False`: never looked up, for
    `ttw_jax.rxr.validate`, which checks those files one by one). FileNotFoundError for a missing file,
    RecordFormatError "{path}: entry {i}: field '...'" (i from 0) for a malformed entry or a
    path_id repeated within the file.
    """
    data = core.read_json_list(path, "paths", RecordFormatError, R2R_HINT)
    manual_dir = os.path.dirname(path) if manual_dir is None else manual_dir
    files = FileIndex()
    records: list[dict] = []
    seen: dict[int, int] = {}
    for i, entry in enumerate(data):
        where = f"{path}: entry {i}"
        if not isinstance(entry, dict):
            raise RecordFormatError(f"{where}: expected a JSON object, got "
                                    f"{type(entry).__name__}")
        f = _fields(entry, where)
        path_id = f.int("path_id", 0)
        if path_id in seen:
            raise RecordFormatError(f"{where}: field 'path_id' {path_id} repeats entry "
                                    f"{seen[path_id]}")
        seen[path_id] = i
        scan, viewpoints = f.file_stem("scan"), _viewpoints(f, "path")
        heading = f.quantity("heading", "radians")
        distance = math.nan if entry.get("distance") is None else f.quantity("distance",
                                                                              "distance")
        instructions = f.get("instructions",
                             core.list_of(core.is_nonempty_string, 1, R2R_IDS_PER_PATH),
                             f"a list of 1 to {R2R_IDS_PER_PATH} non-empty strings")
        for k, text in enumerate(instructions):
            iid = path_id * R2R_IDS_PER_PATH + k
            tf = files.find(text_features_candidates(manual_dir, iid, "en")) if bodies else None
            records.append(new_record(
                instruction_id=iid, path_id=path_id, scan=scan, path=list(viewpoints),
                heading=heading, instruction=text, language="en", annotator="r2r",
                distance=distance, text_features=None if tf is None else load_text_features(tf)))
    return records


# ----------------------------------------------------------------------------- RxR

_RXR_NAME = re.compile(r"^rxr_(?P<split>[a-z_]+?)(?:_public)?_(?P<annotator>guide|follower)"
                       r"\.jsonl(?:\.gz)?$")


def parse_rxr_file_name(path: str) -> tuple[str, str] | None:
    """(split, annotator) of an RxR annotation file name (`rxr_val_seen_guide.jsonl.gz`,
    `rxr_test_standard_public_guide.jsonl.gz`, ...), None for another name."""
    m = _RXR_NAME.match(os.path.basename(path))
    return (m.group("split"), m.group("annotator")) if m else None


def rxr_file_names(split: str, annotator: str) -> tuple[str, ...]:
    """The accepted names of one RxR annotation file, preferred first."""
    stems = [f"rxr_{split}_{annotator}"]
    if split.startswith("test"):
        stems.insert(0, f"rxr_{split}_public_{annotator}")   # the release's test name
    return tuple(s + ext for s in stems for ext in (".jsonl.gz", ".jsonl"))


def read_rxr(path: str, guides: Mapping[int, Mapping[str, Any]] | None = None,
             manual_dir: str | None = None, world_up: str = "auto",
             guide_fields: dict[int, dict] | None = None, bodies: bool = True) -> list[dict]:
    """The instruction records of an RxR guide or follower file (gzip JSON lines, or plain
    `.jsonl`), in file order; blank lines are skipped.

    The annotator ("guide" / "follower") and split come from the file name
    (`rxr_{split}_{annotator}.jsonl.gz`); for another name a line with `demonstration_id` is a
    follower's. Required per line: instruction_id, path_id, scan, path, heading, instruction,
    language (en-IN, en-US, hi-IN, te-IN; "hi" / "te" become "hi-IN" / "te-IN"); optional:
    timed_instruction, edit_distance; other fields are ignored. A follower line lacking one of
    `GUIDE_FIELDS` takes it from `guides[instruction_id]`, the raw fields of the guide line (as
    collected by `guide_fields` of an earlier call on the guide file: that dict, when given, is
    filled with instruction_id -> the line's `GUIDE_FIELDS`). Pose traces and text features are
    looked up in `manual_dir` (default: the file's directory; see the module docstring); not at
    all with `bodies=False` (`ttw_jax.rxr.validate` checks them one by one).

    FileNotFoundError for a missing file; RecordFormatError "{path}:{line}: ..." naming the field
    for a malformed line or an instruction_id repeated within the file; PoseTraceError naming the
    file and key for a malformed pose trace or text-feature file.
    """
    split, annotator = parse_rxr_file_name(path) or (None, None)
    manual_dir = os.path.dirname(path) if manual_dir is None else manual_dir
    files = FileIndex()
    records: list[dict] = []
    seen: dict[int, int] = {}
    for where, line_no, raw in core.read_jsonl(path, RecordFormatError, RXR_HINT):
        who = annotator or ("follower" if "demonstration_id" in raw else "guide")
        iid = _fields(raw, where).int("instruction_id", 0)
        if iid in seen:
            raise RecordFormatError(f"{where}: field 'instruction_id' {iid} repeats line "
                                    f"{seen[iid]}")
        seen[iid] = line_no
        if who == "follower":
            raw = _with_guide_fields(raw, iid, guides, where)
        rec, starts, ends = _rxr_record(raw, who, where)
        if guide_fields is not None:
            guide_fields[iid] = {f: raw[f] for f in GUIDE_FIELDS if f in raw}
        file_id = iid
        if who == "follower" and raw.get("demonstration_id") is not None:
            file_id = _fields(raw, where).int("demonstration_id", 0)
        if not bodies:
            records.append(rec)
            continue
        trace = files.find(pose_trace_candidates(manual_dir, file_id, who, split))
        if trace is not None:
            rec["step_words"], rec["step_views"], rec["step_subwords"] = pose_trace_masks(
                trace, rec["path"], starts, ends, world_up)
        tf = files.find(text_features_candidates(manual_dir, iid, rec["language"], split))
        if tf is not None:
            rec["text_features"] = load_text_features(tf)
        records.append(rec)
    return records


def find_rxr_file(manual_dir: str, split: str, annotator: str) -> str | None:
    """Path of the RxR annotation file of (split, annotator) in `manual_dir`, None if absent."""
    return next((p for p in (os.path.join(manual_dir, n) for n in rxr_file_names(split, annotator))
                 if paths.isfile(p)), None)


def read_rxr_split(manual_dir: str, split: str, annotators: Sequence[str] = ("guide",),
                   world_up: str = "auto") -> list[dict]:
    """The records of one RxR split for the given annotators (guides first), read from
    `manual_dir`; follower lines take their missing fields from the split's guide file, which is
    read (once) whenever it is present. FileNotFoundError naming the accepted file names if a
    requested annotator's file is absent."""
    unknown = [a for a in annotators if a not in ("guide", "follower")]
    if unknown:
        raise ValueError(f"RxR annotators are 'guide' and 'follower', got {unknown}")
    files = {a: find_rxr_file(manual_dir, split, a) for a in ("guide", "follower")}
    for a in annotators:
        if files[a] is None:
            raise FileNotFoundError(
                f"RxR {a} file of split {split!r} missing in {manual_dir}: expected "
                f"{' or '.join(rxr_file_names(split, a))}. {RXR_HINT}")
    out: list[dict] = []
    guides = None
    if "guide" in annotators or ("follower" in annotators and files["guide"] is not None):
        guides = {}
        recs = read_rxr(files["guide"], manual_dir=manual_dir, world_up=world_up,
                        guide_fields=guides if "follower" in annotators else None)
        if "guide" in annotators:
            out += recs
    if "follower" in annotators:
        out += read_rxr(files["follower"], guides=guides, manual_dir=manual_dir,
                        world_up=world_up)
    return out


def _with_guide_fields(raw: Mapping[str, Any], iid: int, guides, where: str) -> dict:
    missing = [f for f in GUIDE_FIELDS if f not in raw]
    guide = None if guides is None else guides.get(iid)
    if missing and guide is None:
        required = [f for f in missing if f in RXR_REQUIRED]
        if required:
            hint = ("no guide annotations were given" if guides is None else
                    f"instruction_id {iid} is not among the {len(guides)} guide annotations")
            raise RecordFormatError(
                f"{where}: missing field '{required[0]}' (a follower line takes it from the "
                f"guide annotation with the same instruction_id, in "
                f"`rxr_{{split}}_guide.jsonl.gz`; {hint})")
    out = dict(raw)
    for f in missing:
        if guide is not None and f in guide:
            out[f] = guide[f]
    return out


def _rxr_record(raw: Mapping[str, Any], annotator: str, where: str
                ) -> tuple[dict, np.ndarray, np.ndarray]:
    """(record, filled word starts, filled word ends) of one validated RxR line."""
    f = _fields(raw, where)
    language = f.get("language", lambda v: isinstance(v, str) and normalize_language(v),
                     f"one of {RXR_LANGUAGES} (or 'hi', 'te')")
    rec = new_record(
        instruction_id=f.int("instruction_id", 0), path_id=f.int("path_id", 0),
        scan=f.file_stem("scan"), path=_viewpoints(f, "path"),
        heading=f.quantity("heading", "radians"), instruction=f.string("instruction", True),
        language=normalize_language(language), annotator=annotator,
        edit_distance=f.optional_number("edit_distance"))
    if rec["edit_distance"] < 0:
        raise f.fail("edit_distance", core.quantity_problem(rec["edit_distance"], "distance"))
    rec["timed_words"], starts, ends = _timed_words(raw, where)
    return rec, starts, ends


def hidden_splits(tfds_config: str) -> tuple[str, ...]:
    """The splits of an `rxr` TFDS config whose references are withheld: none for the synthetic
    data (its test split has reference paths), `R2R_HIDDEN` for `r2r`, else `RXR_HIDDEN`."""
    if tfds_config == "synthetic":
        return ()
    return R2R_HIDDEN if tfds_config == "r2r" else RXR_HIDDEN
