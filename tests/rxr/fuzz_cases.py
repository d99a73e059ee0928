"""The RxR / R2R fuzz cases (`tests/fuzz.py`): a small release in the official layout, damaged one
file, one record field or one array at a time.

The clean release: R2R entries and the connectivity graphs of their two scans copied from the
real files in `../shared/data` (val_seen and train entries of scan `SCAN`, a test entry of
`TEST_SCAN`); what `../shared` does not ship written in the release's layout by the project's
writers: the RxR guide and follower files, pose traces and text features of `SCAN`'s real R2R
paths (`rxr.release.write_release`), R2R text features `text_features/{id:06d}.npy`
(`text_features.write_features`) and a Matterport3DSimulator view-feature TSV of both scans
(`view_features.write_tsv`).
"""
from __future__ import annotations

import json
import math
import pathlib
import re
import shutil
from typing import Any, Callable

import numpy as np

from tests.conftest import shared_path
from tests.fuzz import (DELETE, Case, Mutation, Release, append, duplicate_item, edit_json,
                        edit_npy, edit_npz, edit_text, file_damage, flip_bytes, planted,
                        set_field)
from ttw_jax.rxr import view_features as vf
from ttw_jax.rxr.graph import load_matterport_graph
from ttw_jax.rxr.release import write_release
from ttw_jax.rxr.text_features import write_features

SCAN, TEST_SCAN = "gZ6f7yhEvPG", "2t7WUuJeko7"   # 8 and 37 viewpoints: small graphs
DIM, VIEW_DIM = 8, 4                              # text- and view-feature widths
R2R = {"val_seen": (SCAN, 1), "train": (SCAN, 2), "test": (TEST_SCAN, 1)}   # entries taken
VAL_SEEN_PATH_ID = 6047   # the path_id of the val_seen entry taken

CONN = f"conn/{SCAN}_connectivity.json"
R2R_VAL, R2R_TRAIN, R2R_TEST = (f"data/R2R_{s}.json" for s in ("val_seen", "train", "test"))
GUIDE, FOLLOWER = "data/rxr_val_seen_guide.jsonl.gz", "data/rxr_val_seen_follower.jsonl.gz"
TRACE = "data/pose_traces/rxr_val_seen/000000_guide_pose_trace.npz"
FOLLOWER_TRACE = "data/pose_traces/rxr_val_seen/100001_follower_pose_trace.npz"
TEXT = "data/text_features/rxr_val_seen/000000_en_text_features.npz"
TEXT_HI = "data/text_features/rxr_val_seen/000001_hi_text_features.npz"
VIEWS = "views.tsv"


def r2r_text_features(path_id: int) -> str:
    """The converted text features of the first instruction of an R2R path."""
    return f"data/text_features/{path_id * 10:06d}.npy"


# ----------------------------------------------------------------------------- the clean release

def r2r_entries(split: str) -> list[dict]:
    """The first entries of `R` of the real R2R split file (`R2R`: their scan and count)."""
    scan, count = R2R[split]
    with open(shared_path("r2r", f"R2R_{split}.json"), encoding="utf-8") as f:
        return [e for e in json.load(f) if e["scan"] == scan][:count]


def build(folder: pathlib.Path) -> None:
    """Writes the clean release (module docstring) into `folder`."""
    conn, data = folder / "conn", folder / "data"
    conn.mkdir(parents=True)
    data.mkdir()
    for scan in (SCAN, TEST_SCAN):
        name = f"{scan}_connectivity.json"
        shutil.copy(shared_path("matterport", "connectivity", name), conn / name)
    entries = {split: r2r_entries(split) for split in R2R}
    assert entries["val_seen"][0]["path_id"] == VAL_SEEN_PATH_ID
    for split, rows in entries.items():
        (data / f"R2R_{split}.json").write_text(json.dumps(rows), encoding="utf-8")
    rng = np.random.default_rng(0)
    (data / "text_features").mkdir()
    for e in entries["val_seen"]:
        for k, text in enumerate(e["instructions"]):
            words = text.split()
            write_features(str(data / "text_features" / f"{e['path_id'] * 10 + k:06d}.npy"),
                           words, rng.normal(size=(len(words), DIM)))
    graph, nodes, _ = load_matterport_graph(str(conn), [SCAN])
    train = entries["train"]
    guides = [{"instruction_id": i, "path_id": e["path_id"], "scan": SCAN, "path": e["path"],
               "heading": e["heading"], "instruction": e["instructions"][0], "language": lang}
              for i, (e, lang) in enumerate(zip(train, ("en-US", "hi-IN")))]
    write_release(str(data), graph, nodes, {"val_seen": guides}, dim=DIM)
    _, all_nodes, _ = load_matterport_graph(str(conn))
    vf.write_tsv(str(folder / VIEWS), all_nodes.ids,
                 rng.normal(size=(len(all_nodes.ids), 36, VIEW_DIM)).astype(np.float32))


def flags(folder: pathlib.Path) -> dict:
    """`experiments.validate.report` keywords: the release, its graphs and view features."""
    return {"data_dir": str(folder / "data"), "graph_dir": str(folder / "conn"),
            "view_features": str(folder / VIEWS)}


# ----------------------------------------------------------------------------- mutations

def drop_npz_key(key: str) -> Mutation:
    """Removes member `key` of an `.npz`, the others unchanged."""
    def mutate(path):
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files if k != key}
        with open(path, "wb") as f:
            np.savez(f, **arrays)
    return mutate


def edit_tsv_row(line: int, edit: Callable[[list[str]], list[str]]) -> Mutation:
    """Rewrites the tab-separated fields of line `line` (from 1) of a TSV."""
    def change(lines):
        lines[line - 1] = "\t".join(edit(lines[line - 1].split("\t")))
        return lines
    return edit_text(change)


def tsv_features(value: float) -> Callable[[list[str]], list[str]]:
    """A TSV row edit: the middle value of its base64 float32 features set to `value`."""
    def edit(fields):
        feats = np.frombuffer(vf.binascii.a2b_base64(fields[5]), "<f4").copy()
        feats[feats.size // 2] = value
        return fields[:5] + [vf.base64.b64encode(feats.tobytes()).decode("ascii")]
    return edit


def middle(value: float, dtype: Any = None) -> Callable[[np.ndarray], np.ndarray]:
    """An array edit: the middle element set to `value` (as `dtype`), `fuzz.planted`."""
    return lambda a: planted(a, value, dtype)


def rows(count: int) -> Callable[[np.ndarray], np.ndarray]:
    """The first `count` rows of an array (fewer than the path's viewpoints)."""
    return lambda a: a[:count]


# ----------------------------------------------------------------------------- cases

def named_field(field: str) -> str:
    """How a problem names a `set_field` path: `a.0.b` as `a[0].b`, `a.0` as `a`."""
    parts = field.split(".")
    return f"{parts[0]}[{parts[1]}].{parts[2]}" if len(parts) == 3 else parts[0]


def field_cases(file: str, index: int, where: str, fields: dict[str, list[tuple[str, Any]]]
                ) -> list[Case]:
    """A case per (field, (label, value)) of record `index` of a JSON / JSON-lines file; `where`
    has `{field}` where the problem names the field."""
    return [Case(f"{file}: {field} {label}", file, set_field(index, field, value),
                 where.format(field=re.escape(named_field(field))))
            for field, values in fields.items() for label, value in values]


def number_values(kind: str) -> list[tuple[str, Any]]:
    """(label, value) of the bad values of a number of a `QUANTITIES` kind."""
    out = [("NaN", math.nan), ("inf", math.inf), ("1e300", 1e300), ("a string", "1.0")]
    return out + ([("negative", -1.0)] if kind in ("distance", "time") else [])


def r2r_cases() -> list[Case]:
    where = r"entry 0: (missing )?field '{field}"
    cases = field_cases(R2R_VAL, 0, where, {
        "heading": number_values("radians") + [("deleted", DELETE)],
        "distance": number_values("distance"),
        "scan": [("deleted", DELETE), ("empty", ""), ("a number", 5), ("a path", "../x")],
        "path_id": [("deleted", DELETE), ("negative", -1), ("a string", "7"), ("a float", 1.5)],
        "path": [("deleted", DELETE), ("empty", []), ("a string", "vp"), ("empty id", [""])],
        "instructions": [("deleted", DELETE), ("empty", []), ("an empty string", [""]),
                         ("not strings", [5])],
    })
    cases += field_cases(R2R_TEST, 0, where, {"heading": [("1e300", 1e300)],
                                              "path": [("unknown viewpoint", ["nowhere"])]})
    cases += field_cases(R2R_TRAIN, 1, r"entry 1: (missing )?field '{field}", {
        "path.1": [("off the graph", "0123456789abcdef0123456789abcdef")],
        "scan": [("of no graph", "ghost")]})
    return cases + [
        Case(f"{R2R_TRAIN}: duplicate path_id", R2R_TRAIN, duplicate_item(0),
             r"entry 2: field 'path_id'"),
        Case(f"{R2R_VAL}: an object, not a list", R2R_VAL, edit_json(lambda d: d[0]), "top level"),
        Case(f"{R2R_VAL}: no entry", R2R_VAL, edit_json(lambda d: []), "no records"),
        Case(f"{R2R_TRAIN}: an entry not an object", R2R_TRAIN, edit_json(lambda d: d + [3]),
             "entry 2"),
    ]


def rxr_cases() -> list[Case]:
    where = r"\.jsonl\.gz:1: (missing )?field '{field}"
    cases = field_cases(GUIDE, 0, where, {
        "heading": number_values("radians") + [("deleted", DELETE)],
        "instruction_id": [("negative", -1), ("a string", "0"), ("2**40", 2**40)],
        "path_id": [("deleted", DELETE), ("a string", "7")],
        "scan": [("deleted", DELETE), ("empty", "")],
        "path": [("empty", []), ("a number", 3)],
        "instruction": [("deleted", DELETE), ("empty", ""), ("a number", 5)],
        "language": [("deleted", DELETE), ("unknown", "xx-XX")],
        "edit_distance": [("inf", math.inf), ("negative", -0.5), ("a string", "low")],
        "timed_instruction.0.start_time": [("NaN", math.nan), ("negative", -3.0),
                                           ("1e300", 1e300)],
        "timed_instruction.1.end_time": [("NaN", math.nan), ("a string", "1.0")],
        "timed_instruction.2.word": [("a number", 7)],
        "timed_instruction": [("a string", "walk")],
    })
    cases += field_cases(GUIDE, 1, r"\.jsonl\.gz:2: (missing )?field '{field}", {
        "path.1": [("off the graph", "0123456789abcdef0123456789abcdef")],
        "instruction_id": [("a repeat", 0)]})
    cases += field_cases(FOLLOWER, 0, where, {
        "demonstration_id": [("negative", -1), ("a string", "x")],
        "path": [("empty", []), ("unknown viewpoint", [f"{SCAN}_x"])]})
    return cases + [
        Case(f"{FOLLOWER}: instruction_id of no guide", FOLLOWER,
             set_field(0, "instruction_id", 999), r"\.jsonl\.gz:1: .*instruction_id 999"),
        Case(f"{GUIDE}: 16 bytes flipped at 30%", GUIDE, flip_bytes(16, 0.3)),
        Case(f"{GUIDE}: 16 bytes flipped at 70%", GUIDE, flip_bytes(16, 0.7)),
        Case(f"{GUIDE}: a line not JSON", GUIDE,
             edit_json(lambda d: d[:1] + ["x"] + d[1:]), r"\.jsonl\.gz:2"),
        Case(f"{FOLLOWER}: no line", FOLLOWER, edit_json(lambda d: []), "no records"),
    ]


def trace_cases() -> list[Case]:
    edits = [   # (key, label, mutation)
        ("image_mask", "2-D", edit_npz("image_mask", lambda a: a[:, 0])),
        ("image_mask", "a row short", edit_npz("image_mask", rows(3))),
        ("image_mask", "square", edit_npz("image_mask", lambda a: a[:, :, :128])),
        ("feature_weights", "NaN", edit_npz("feature_weights", middle(math.nan))),
        ("feature_weights", "float64 1e300", edit_npz("feature_weights",
                                                      middle(1e300, np.float64))),
        ("feature_weights", "[k, 35]", edit_npz("feature_weights", lambda a: a[:, :35])),
        ("feature_weights", "strings", edit_npz("feature_weights", lambda a: a.astype(str))),
        ("time", "NaN", edit_npz("time", middle(math.nan))),
        ("time", "float64 inf", edit_npz("time", middle(math.inf, np.float64))),
        ("time", "a row short", edit_npz("time", rows(2))),
        ("extrinsic_matrix", "NaN", edit_npz("extrinsic_matrix", middle(math.nan))),
        ("extrinsic_matrix", "[T, 12]", edit_npz("extrinsic_matrix", lambda a: a[:, :12])),
        ("intrinsic_matrix", "NaN", edit_npz("intrinsic_matrix", middle(math.nan))),
        ("intrinsic_matrix", "transposed", edit_npz(
            "intrinsic_matrix", lambda a: a.reshape(-1, 4, 4).transpose(0, 2, 1).reshape(-1, 16))),
        ("pano", "integers", edit_npz("pano", lambda a: np.arange(len(a))[:, None])),
        ("pano", "off the path", edit_npz("pano", lambda a: np.full_like(a, "elsewhere"))),
        ("pano", "deleted", drop_npz_key("pano")),
        ("extrinsic_matrix", "deleted", drop_npz_key("extrinsic_matrix")),
        ("text_masks", "a row short", edit_npz("text_masks", rows(3))),
        ("text_masks", "NaN floats", edit_npz("text_masks", middle(math.nan, np.float32))),
        ("text_masks", "a subword short", edit_npz("text_masks", lambda a: a[:, :-1])),
    ]
    return [Case(f"{TRACE}: {key} {label}", TRACE, mutate, f"key '{key}'")
            for key, label, mutate in edits] + [
        Case(f"{FOLLOWER_TRACE}: audio_time NaN", FOLLOWER_TRACE,
             edit_npz("audio_time", middle(math.nan)), "key 'audio_time'"),
        Case(f"{FOLLOWER_TRACE}: image_mask 3 rows short", FOLLOWER_TRACE,
             edit_npz("image_mask", rows(1)), "key 'image_mask'"),
    ]


def text_cases() -> list[Case]:
    return [Case(f"{TEXT}: {label}", TEXT, mutate, where) for label, mutate, where in [
        ("integer features", edit_npz("features", lambda a: np.round(a).astype(np.int32)),
         "text features are int32"),
        ("NaN", edit_npz("features", middle(math.nan)), "non-finite"),
        ("float64 1e300", edit_npz("features", middle(1e300, np.float64)), "bfloat16"),
        ("float32 3.4e38", edit_npz("features", middle(3.4e38)), "bfloat16"),
        ("a narrower width", edit_npz("features", lambda a: a[:, :-1]), "width 7"),
        ("1-D", edit_npz("features", lambda a: a[:, 0]), r"\[L, D\]"),
        ("no row", edit_npz("features", lambda a: a[:0]), "'features' 0"),
        ("a token short", edit_npz("tokens", lambda a: a[:-1]), "key 'tokens'"),
        ("numeric tokens", edit_npz("tokens", lambda a: np.zeros(a.shape)), "key 'tokens'"),
        ("features deleted", drop_npz_key("features"), "key 'features'"),
    ]] + [Case(f"{TEXT_HI}: NaN", TEXT_HI, edit_npz("features", middle(math.nan)),
               "non-finite")]


def npy_cases() -> list[Case]:
    npy = r2r_text_features(VAL_SEEN_PATH_ID)
    return [
        Case(f"{npy}: bytes appended", npy, append(), "bytes after the array"),
        Case(f"{npy}: NaN", npy, edit_npy(middle(math.nan)), "non-finite"),
        Case(f"{npy}: integers", npy, edit_npy(lambda a: a.astype(np.int64)), "int64"),
        Case(f"{npy}: float64 1e300", npy, edit_npy(middle(1e300, np.float64)), "bfloat16"),
    ]


def connectivity_cases() -> list[Case]:
    where = r"viewpoint 3: (missing )?field '{field}"
    cases = field_cases(CONN, 3, where, {
        "height": [("NaN", math.nan), ("negative", -1.0), ("1e300", 1e300), ("a string", "1")],
        "pose.3": [("NaN", math.nan), ("1e300", 1e300), ("a string", "x")],
        "pose": [("deleted", DELETE), ("15 numbers", [0.0] * 15)],
        "included": [("a number", 1), ("deleted", DELETE)],
        "unobstructed": [("short", [True]), ("deleted", DELETE)],
        "unobstructed.3": [("a self-link", True)],
        "visible": [("short", [False])],
        "image_id": [("empty", ""), ("deleted", DELETE)],
    })
    return cases + [
        Case(f"{CONN}: an image_id twice", CONN,
             edit_json(lambda d: d.__setitem__(4, dict(d[4], image_id=d[3]["image_id"]))),
             r"viewpoint 4: field 'image_id'"),
        Case(f"{CONN}: no viewpoint", CONN, edit_json(lambda d: []), "no viewpoint"),
        Case(f"{CONN}: an object, not a list", CONN, edit_json(lambda d: d[0]), "top level"),
    ]


def view_cases() -> list[Case]:
    where = r"views\.tsv:3: field '{}'"
    return [Case(f"{VIEWS}: {label}", VIEWS, mutate, where) for label, mutate, where in [
        ("NaN", edit_tsv_row(3, tsv_features(math.nan)), where.format("features")),
        ("beyond float16", edit_tsv_row(3, tsv_features(1e5)), where.format("features")),
        ("a row cut", edit_tsv_row(3, lambda f: f[:5] + [f[5][:-9]]), where.format("features")),
        ("a field short", edit_tsv_row(3, lambda f: f[:5]), r"views\.tsv:3"),
        ("vfov not a number", edit_tsv_row(3, lambda f: f[:4] + ["wide"] + f[5:]),
         where.format("vfov")),
        ("unknown viewpoint", edit_tsv_row(3, lambda f: [f[0], "nowhere"] + f[2:]),
         where.format("viewpointId")),
        ("a row twice", edit_text(lambda lines: lines + [lines[2]]), "listed twice"),
        ("a row missing", edit_text(lambda lines: lines[1:]), "have no features"),
    ]]


def cases() -> list[Case]:
    """Every case: whole-file damage of each file kind, then per field and array."""
    files = [CONN, R2R_VAL, R2R_TEST, GUIDE, FOLLOWER, TRACE, FOLLOWER_TRACE, TEXT, VIEWS]
    out = [c for f in files for c in file_damage(f)]
    # a raw `.npy` has no checksum: bytes flipped among its values are other values, named only
    # when not finite; its header is damaged instead
    npy = r2r_text_features(VAL_SEEN_PATH_ID)
    out += [c for c in file_damage(npy) if "flipped" not in c.name]
    out.append(Case(f"{npy}: 16 header bytes flipped", npy, flip_bytes(16, 0.1)))
    out += (r2r_cases() + rxr_cases() + trace_cases() + text_cases()
            + npy_cases() + connectivity_cases() + view_cases())
    return out


RELEASE = Release("rxr", build, flags, cases)
