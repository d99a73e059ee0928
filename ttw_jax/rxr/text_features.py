"""Instructions to multilingual-BERT text features, in the layouts the readers look for.

Inputs (`instructions`): RxR guide or follower files (`rxr_{split}_{guide,follower}.jsonl.gz`, or
`.jsonl`), streamed line by line, and R2R files (`R2R_{split}.json`, read by
`records.read_r2r`: instruction k of path p is `instruction_id = 10 p + k`, language en). A
release follower line has no instruction: its text is its guide's, read from the split's guide
file beside it, and its features are the guide's file (one per instruction_id and language).

Outputs, under `out_dir` (the folder the trainer reads as `data.manual_dir` or
`data.multitask_dir`), one file per instruction (`output_path`):
- "release": `text_features/rxr_{split}/{instruction_id:06d}_{lang}_text_features.npz` (lang: en,
  hi or te; R2R and a file without a split: straight under `text_features/`), with `tokens` [m, 1]
  (unicode subword strings, [CLS] first, [SEP] last) and `features` [m, H] float32, the
  release's schema;
- "npy" (R2R's multitask layout, `configs/paper_multitask.py`): `text_features/
  {instruction_id:06d}.npy`, float32 [m, H];
- "auto": release for RxR files, npy for R2R files.
`records.text_features_candidates` finds both, `records.load_text_features` reads both.

`extract` is resumable: an instruction whose file exists is skipped (each output folder is listed
once), and every file is written under a temporary name and renamed (on a bucket: one upload), so
a stopped run leaves whole files only. Instructions are read `window` at a time, tokenized,
sorted by length and encoded in fixed-shape batches (`bert.Encoder`).
"""
from __future__ import annotations

import dataclasses
import io
import os
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
from absl import logging

from ttw_jax.core import paths, records as core
from ttw_jax.core.progress import progress as progress_report
from ttw_jax.rxr import bert, records as rr

LAYOUTS = ("auto", "release", "npy")


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One instruction to encode: its id, the feature files' language (en, hi, te), its text,
    the RxR split its file names ("" for R2R or an unnamed file) and whether it is R2R's."""
    instruction_id: int
    language: str
    text: str
    split: str = ""
    r2r: bool = False


def feature_language(language: str) -> str:
    """The text-feature files' language of a record's tag ("en-US" -> "en", "hi-IN" -> "hi")."""
    return language.split("-", 1)[0]


def _rxr_line(raw: dict, where: str, split: str) -> Instruction:
    f = core.Fields(raw, where, rr.RecordFormatError)
    language = f.get("language", lambda v: isinstance(v, str) and rr.normalize_language(v),
                     f"one of {rr.RXR_LANGUAGES} (or 'hi', 'te')")
    return Instruction(f.int("instruction_id", 0),
                       feature_language(rr.normalize_language(language)),
                       f.string("instruction"), split)


def rxr_instructions(path: str) -> Iterator[Instruction]:
    """The instructions of an RxR guide or follower file, streamed (module docstring); an
    instruction_id once. RecordFormatError naming file, line and field for a malformed line;
    FileNotFoundError when follower lines need a guide file that is not beside it."""
    split, annotator = rr.parse_rxr_file_name(path) or ("", "")
    seen: set[int] = set()
    wanted: set[int] = set()          # follower lines without their own text: from the guide
    for where, _, raw in core.read_jsonl(path, rr.RecordFormatError, rr.RXR_HINT):
        if "instruction" not in raw and ("demonstration_id" in raw or annotator == "follower"):
            wanted.add(core.Fields(raw, where, rr.RecordFormatError).int("instruction_id", 0))
            continue
        inst = _rxr_line(raw, where, split)
        if inst.instruction_id not in seen:
            seen.add(inst.instruction_id)
            yield inst
    wanted -= seen
    if not wanted:
        return
    guide = rr.find_rxr_file(os.path.dirname(path), split, "guide") if split else None
    if guide is None:
        raise FileNotFoundError(
            f"{path}: {len(wanted)} follower line(s) carry no instruction; it is in the guide "
            f"file of the split ({' or '.join(rr.rxr_file_names(split or '<split>', 'guide'))}"
            f" beside it). {rr.RXR_HINT}")
    for where, _, raw in core.read_jsonl(guide, rr.RecordFormatError, rr.RXR_HINT):
        iid = core.Fields(raw, where, rr.RecordFormatError).int("instruction_id", 0)
        if iid in wanted:
            wanted.discard(iid)
            yield _rxr_line(raw, where, split)
    if wanted:
        raise rr.RecordFormatError(f"{path}: instruction_id {min(wanted)} (and "
                                   f"{len(wanted) - 1} others) not in the guide file {guide}")


def r2r_instructions(path: str) -> Iterator[Instruction]:
    """The instructions of an R2R JSON file (`records.read_r2r`: ids 10 p + k, English)."""
    for rec in rr.read_r2r(path, bodies=False):
        yield Instruction(rec["instruction_id"], "en", rec["instruction"], "", r2r=True)


def instructions(path: str) -> Iterator[Instruction]:
    """The instructions of an RxR (`.jsonl`, `.jsonl.gz`) or R2R (`.json`) annotation file."""
    name = os.path.basename(path)
    if name.endswith((".jsonl", ".jsonl.gz")):
        return rxr_instructions(path)
    if name.endswith(".json"):
        return r2r_instructions(path)
    raise ValueError(f"{path}: not an RxR (`rxr_{{split}}_guide.jsonl.gz`) or R2R "
                     "(`R2R_{split}.json`) annotation file")


def output_path(out_dir: str, inst: Instruction, layout: str = "auto") -> str:
    """Where an instruction's features go (module docstring)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if layout == "npy" or (layout == "auto" and inst.r2r):
        return paths.join(out_dir, "text_features", f"{inst.instruction_id:06d}.npy")
    folder = paths.join(out_dir, "text_features", *([f"rxr_{inst.split}"] if inst.split else []))
    return paths.join(folder, f"{inst.instruction_id:06d}_{inst.language}_text_features.npz")


def write_features(path: str, tokens: Sequence[str], features: np.ndarray) -> None:
    """Writes one instruction's file atomically: an `.npz` with `tokens` [m, 1] (unicode) and
    `features` [m, H] float32, or an `.npy` of the features."""
    features = np.asarray(features, np.float32)
    buf = io.BytesIO()
    if path.endswith(".npy"):
        np.save(buf, features)
    else:
        np.savez(buf, tokens=np.asarray(list(tokens), dtype=str).reshape(-1, 1),
                 features=features)
    paths.write_bytes(path, buf.getvalue())


class _Done:
    """The output files present: each folder listed once, then kept up to date."""

    def __init__(self):
        self.names: dict[str, set[str]] = {}

    def folder(self, folder: str) -> set[str]:
        if folder not in self.names:
            if paths.isdir(folder):
                self.names[folder] = set(paths.listdir(folder))
            else:
                if paths.is_local(folder):
                    os.makedirs(folder, exist_ok=True)
                self.names[folder] = set()
        return self.names[folder]

    def __contains__(self, path: str) -> bool:
        folder, name = os.path.split(path)
        return name in self.folder(folder)

    def add(self, path: str) -> None:
        folder, name = os.path.split(path)
        self.folder(folder).add(name)


def _windows(items: Iterable, size: int) -> Iterator[list]:
    window = []
    for item in items:
        window.append(item)
        if len(window) == size:
            yield window
            window = []
    if window:
        yield window


def extract(files: Sequence[str], tokenizer: Callable[[Sequence[str]], list[bert.Encoded]],
            encoder: Callable[[Sequence[np.ndarray]], list[np.ndarray]], out_dir: str,
            layout: str = "auto", window: int = 1024, progress: bool = True) -> dict:
    """Writes the features of every instruction of `files` not written yet (module docstring);
    returns counts {"written", "skipped", "truncated"} (truncated: instructions longer than the
    model, cut to it, also logged as a warning)."""
    counts = {"written": 0, "skipped": 0, "truncated": 0}
    done = _Done()
    bar = progress_report(desc="instructions", unit="instr") if progress else None

    def todo() -> Iterator[tuple[Instruction, str]]:
        for path in files:
            for inst in instructions(path):
                out = output_path(out_dir, inst, layout)
                if out in done:
                    counts["skipped"] += 1
                    if bar is not None:
                        bar.update(1)
                    continue
                done.add(out)        # a later duplicate (e.g. a follower's guide) is skipped
                yield inst, out

    for batch in _windows(todo(), window):
        encoded = tokenizer([inst.text for inst, _ in batch])
        order = sorted(range(len(batch)), key=lambda i: len(encoded[i].ids))
        hidden = encoder([encoded[i].ids for i in order])
        for i, h in zip(order, hidden):
            write_features(batch[i][1], encoded[i].tokens, h)
            if encoded[i].truncated:
                counts["truncated"] += 1
        counts["written"] += len(batch)
        if bar is not None:
            bar.update(len(batch))
    if bar is not None:
        bar.close()
    if counts["truncated"]:
        logging.warning("%d instruction(s) were longer than the model's %s subwords and were "
                        "truncated to it (their features cover the first subwords only)",
                        counts["truncated"], getattr(tokenizer, "max_length", "maximum"))
    return counts
