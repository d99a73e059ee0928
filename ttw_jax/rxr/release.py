"""Synthetic RxR releases: instruction records written as the official release's files, every key
of its README's schema, so the whole pipeline (TFDS builder, readers, masks, text features,
trainer) runs on the release's layout with no download.

`write_release(manual_dir, graph, nodes, records_by_split)` writes, per split:
- `rxr_{split}_guide.jsonl.gz`: split, instruction_id, annotator_id, language, path_id, scan,
  path, heading, instruction, timed_instruction [{word, start_time, end_time}], edit_distance;
- `rxr_{split}_follower.jsonl.gz` (not for test splits): demonstration_id, instruction_id,
  annotator_id, path (the guide's, one step short for every other instruction), metrics {ne, sr,
  spl, dtw, ndtw, sdtw} of the follower's path against the guide's (`metrics.path_metrics_np`
  over the graph's geodesics, i.e. the connectivity poses' distances, 3 m success radius: what
  `follower_metrics` recomputes; the readers ignore them);
- `pose_traces/rxr_{split}/{instruction_id:06d}_guide_pose_trace.npz` and
  `{demonstration_id:06d}_follower_pose_trace.npz`: pano [n, 1], time [n, 1], audio_time [n, 1]
  (followers), extrinsic_matrix [n, 16] (camera-to-world, three.js y-up frame, row-major),
  intrinsic_matrix [n, 16] (OpenGL projection, 60 degrees tall, 75.2 wide), image_mask [k, 128, 256],
  feature_weights [k, 36] (the mask mean-pooled over each view's 60-degree image) and
  text_masks [k, m] (the subwords spoken at each of the k path viewpoints);
- `text_features/rxr_{split}/{instruction_id:06d}_{lang}_text_features.npz`: tokens [m, 1]
  ("[CLS]", the words, "[SEP]") and features [m, dim] float32, each word's fixed random vector
  plus noise, so a model can read the instruction from them; with `cross_translations`, also the
  files of the two other languages (train splits), whose "translation" marks every word with the
  language (`hi:walk`), so its vectors differ from the original's.
The guide looks towards the next viewpoint and 60 degrees to its right at every viewpoint, and
speaks the words in order, spread evenly over the path's viewpoints.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
from typing import Mapping, Sequence

import numpy as np

from ttw_jax.core.pano_graph import NodeTable, PanoGraph, distances_from
from ttw_jax.core.vocab import tokenize
from ttw_jax.rxr.metrics import path_metrics_np
from ttw_jax.rxr.views import MASK_SHAPE, observed_pixels, view_regions, view_weights

SECONDS_PER_VIEWPOINT = 3.0
CAMERA_HEIGHT = 1.5   # metres above the viewpoint
FOLLOWER_ID_OFFSET = 100_000
TEST_SPLITS = ("test_standard",)


def gl_projection(fovy_deg: float = 60.0, aspect: float = 4 / 3, near: float = 0.1,
                  far: float = 100.0) -> np.ndarray:
    """[4, 4] OpenGL perspective projection (the release's `intrinsic_matrix`, row-major)."""
    t = 1 / math.tan(math.radians(fovy_deg) / 2)
    return np.array([[t / aspect, 0, 0, 0], [0, t, 0, 0],
                     [0, 0, (far + near) / (near - far), 2 * far * near / (near - far)],
                     [0, 0, -1, 0]])


def camera_to_world(heading: float, position) -> np.ndarray:
    """[4, 4] camera-to-world of a level camera at `position` (Matterport metres) facing
    `heading` (radians clockwise from +y), in the release's three.js frame (y up): the camera
    looks along its local -z with +y up."""
    forward = np.array([math.sin(heading), math.cos(heading), 0.0])
    right = np.array([math.cos(heading), -math.sin(heading), 0.0])
    m = np.eye(4)
    m[:3, 0], m[:3, 1], m[:3, 2] = right, np.cross(-forward, right), -forward
    m[:3, 3] = position
    to_three = np.array([[1, 0, 0], [0, 0, 1], [0, -1, 0]], float)   # (x, y, z) -> (x, z, -y)
    m[:3] = to_three @ m[:3]
    return m


def word_vector(word: str, dim: int) -> np.ndarray:
    """A fixed unit vector per word (from its hash): the synthetic text features' meaning."""
    seed = int.from_bytes(hashlib.sha256(word.encode("utf-8")).digest()[:8], "little")
    v = np.random.default_rng(seed).normal(size=dim)
    return v / np.linalg.norm(v)


def _trace(path_nodes: Sequence[int], graph: PanoGraph, viewpoints: Sequence[str],
           num_words: int, start_time: float, audio: bool) -> tuple[dict, np.ndarray]:
    """(pose-trace arrays, the viewpoint index [num_words] at which each word is spoken)."""
    positions = np.asarray(graph.positions)
    k = len(path_nodes)
    panos, times, ext = [], [], []
    for i, node in enumerate(path_nodes):
        nxt = path_nodes[min(i + 1, k - 1)]
        delta = positions[nxt] - positions[node]
        facing = math.atan2(delta[0], delta[1]) if i + 1 < k else 0.0
        for j, heading in enumerate((facing, facing + math.pi / 3)):
            panos.append(viewpoints[i])
            times.append(start_time + SECONDS_PER_VIEWPOINT * (i + j / 2))
            ext.append(camera_to_world(heading, positions[node] + [0, 0, CAMERA_HEIGHT]))
    ext = np.stack(ext)
    intr = np.tile(gl_projection(), (len(ext), 1, 1))
    seen = observed_pixels(ext, intr, "y")                                  # [n, 128, 256]
    step = np.repeat(np.arange(k), 2)
    image_mask = np.zeros((k,) + MASK_SHAPE, bool)
    np.logical_or.at(image_mask, step, seen)
    weights = view_weights(image_mask, view_regions())
    spoken = np.minimum(np.arange(num_words) * k // max(num_words, 1), k - 1)
    arrays = {"pano": np.asarray(panos)[:, None], "time": np.asarray(times, np.float32)[:, None],
              "extrinsic_matrix": ext.reshape(-1, 16).astype(np.float32),
              "intrinsic_matrix": intr.reshape(-1, 16).astype(np.float32),
              "image_mask": image_mask, "feature_weights": weights.astype(np.float32)}
    if audio:
        arrays["audio_time"] = arrays["time"].copy()
    return arrays, spoken


def write_release(manual_dir: str, graph: PanoGraph, nodes: NodeTable,
                  records_by_split: Mapping[str, Sequence[dict]], dim: int = 768,
                  seed: int = 0, pose_traces: bool = True,
                  cross_translations: bool = False) -> dict[str, int]:
    """Writes `records_by_split` (records with instruction_id, path_id, scan, path, heading,
    instruction, language) as an RxR release in `manual_dir` (module docstring); `graph` /
    `nodes` hold the records' viewpoints ("scan/viewpoint" ids). Returns {split: guide lines}.
    `pose_traces=False` writes the guide files and text features only (no pose traces, no
    follower files; the words timed as the traces would time them): a release for the `guide`
    configs, written about 50x faster."""
    rng = np.random.default_rng(seed)
    counts = {}
    for split, records in records_by_split.items():
        traces = os.path.join(manual_dir, "pose_traces", f"rxr_{split}")
        feats = os.path.join(manual_dir, "text_features", f"rxr_{split}")
        os.makedirs(traces, exist_ok=True)
        os.makedirs(feats, exist_ok=True)
        guides, followers = [], []
        for rec in records:
            iid = int(rec["instruction_id"])
            words = rec["instruction"].split()
            path_nodes = nodes.lookup([f"{rec['scan']}/{v}" for v in rec["path"]], "viewpoint")
            if pose_traces:
                arrays, spoken = _trace(path_nodes, graph, rec["path"], len(words), 0.0, False)
                t0 = arrays["time"][::2, 0]                                 # per viewpoint
            else:
                k = len(path_nodes)
                spoken = np.minimum(np.arange(len(words)) * k // max(len(words), 1), k - 1)
                t0 = SECONDS_PER_VIEWPOINT * np.arange(k)
            timed = [{"word": w, "start_time": float(t0[spoken[i]] + 0.1 * (i % 10)),
                      "end_time": float(t0[spoken[i]] + 0.1 * (i % 10) + 0.08)}
                     for i, w in enumerate(words)]
            subwords = [tokenize(w) for w in words]
            tokens = ["[CLS]"] + [s for sub in subwords for s in sub] + ["[SEP]"]
            word_of = [-1] + [i for i, sub in enumerate(subwords) for _ in sub] + [-1]
            text_masks = np.zeros((len(path_nodes), len(tokens)), bool)
            for s, w in enumerate(word_of):
                if w >= 0:
                    text_masks[spoken[w], s] = True
            if pose_traces:
                arrays["text_masks"] = text_masks
                np.savez(os.path.join(traces, f"{iid:06d}_guide_pose_trace.npz"), **arrays)
            own = rec["language"].split("-")[0]
            languages = [own] + ([x for x in ("en", "hi", "te") if x != own]
                                 if cross_translations and split == "train" else [])
            for lang in languages:
                toks = tokens if lang == own else [
                    t if t in ("[CLS]", "[SEP]") else f"{lang}:{t}" for t in tokens]
                vectors = np.stack([word_vector(t, dim) for t in toks])
                np.savez(os.path.join(feats, f"{iid:06d}_{lang}_text_features.npz"),
                         tokens=np.asarray(toks)[:, None],
                         features=(vectors + 0.1 * rng.normal(size=vectors.shape)
                                   ).astype(np.float32))
            guides.append({
                "split": split, "instruction_id": iid, "annotator_id": int(iid % 7),
                "language": rec["language"], "path_id": int(rec["path_id"]),
                "scan": rec["scan"], "path": list(rec["path"]), "heading": float(rec["heading"]),
                "instruction": rec["instruction"], "timed_instruction": timed,
                "edit_distance": float(rng.uniform(0.0, 0.2))})
            if split in TEST_SPLITS or not pose_traces:
                continue
            short = iid % 2 == 1 and len(rec["path"]) > 2
            f_path = list(rec["path"][:-1] if short else rec["path"])
            f_nodes = path_nodes[:len(f_path)]
            demo = FOLLOWER_ID_OFFSET + iid
            f_arrays, f_spoken = _trace(f_nodes, graph, f_path, len(words), 0.0, True)
            f_masks = np.zeros((len(f_nodes), len(tokens)), bool)
            for s, w in enumerate(word_of):
                if w >= 0:
                    f_masks[min(f_spoken[w], len(f_nodes) - 1), s] = True
            f_arrays["text_masks"] = f_masks
            np.savez(os.path.join(traces, f"{demo:06d}_follower_pose_trace.npz"), **f_arrays)
            followers.append({
                "demonstration_id": demo, "instruction_id": iid, "annotator_id": int(iid % 5),
                "path": f_path, "metrics": _follower_metrics(graph, f_nodes, path_nodes)})
        name = "rxr_test_standard_public_guide" if split in TEST_SPLITS else f"rxr_{split}_guide"
        _write_jsonl(os.path.join(manual_dir, f"{name}.jsonl.gz"), guides)
        if followers:
            _write_jsonl(os.path.join(manual_dir, f"rxr_{split}_follower.jsonl.gz"), followers)
        counts[split] = len(guides)
    return counts


def _follower_metrics(graph: PanoGraph, path: Sequence[int], ref: Sequence[int]
                      ) -> dict[str, float]:
    """The release's follower `metrics` {ne, sr, spl, dtw, ndtw, sdtw} of node path `path`
    against `ref`, over the graph's geodesics."""
    nodes = sorted(set(path) | set(ref))
    local = {n: i for i, n in enumerate(nodes)}
    dist = distances_from(graph, nodes, weighted=True)[:, nodes]
    m = path_metrics_np([local[n] for n in path], [local[n] for n in ref], dist)
    return {k: m[k] for k in ("ne", "sr", "spl", "dtw", "ndtw", "sdtw")}


def _write_jsonl(path: str, rows: Sequence[dict]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
