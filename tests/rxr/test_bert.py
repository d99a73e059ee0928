"""The Flax BERT encoder and tokenizer against Hugging Face's (`ttw_jax.rxr.bert`), and the
text-feature extractor writing files the trainer's readers read back
(`experiments.rxr.extract_text_features`, `ttw_jax.rxr.text_features`).

The reference is a tiny random `BertModel` with its tokenizer (tests/rxr/fixtures/tiny_bert/) and
its token ids and hidden states for multilingual sentences, computed once by transformers /
torch (tests/rxr/fixtures/make_bert_fixture.py, not run here)."""
import gzip
import json
import os
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from experiments.rxr import extract_text_features
from ttw_jax.rxr import bert, records as rr, text_features as tf

pytest.importorskip("tokenizers")

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
CHECKPOINT = os.path.join(FIXTURES, "tiny_bert")
REFERENCE = np.load(os.path.join(FIXTURES, "tiny_bert_reference.npz"))
SENTENCES = [str(s) for s in REFERENCE["sentences"]]
N = len(SENTENCES)
TOL = 1e-5
BUCKETS = (16,)             # the 64-position model adds 64


def reference(i, layer=-1):
    return REFERENCE[f"ids_{i}"], [str(t) for t in REFERENCE[f"tokens_{i}"]], \
        REFERENCE[f"hidden_{i}"][layer]


# ----------------------------------------------------------------------------- tokenizer

@pytest.mark.parametrize("files", ["tokenizer.json", "vocab.txt"])
def test_tokenizer_gives_the_reference_ids(tmp_path, files):
    folder = CHECKPOINT
    if files == "vocab.txt":            # vocab.txt alone (no tokenizer_config.json): cased
        folder = str(tmp_path)
        shutil.copy(os.path.join(CHECKPOINT, "vocab.txt"), folder)
    words = bert.WordPiece(folder, max_length=64)
    assert words.source.endswith(files)
    encoded = words(SENTENCES)
    for i, e in enumerate(encoded):
        ids, tokens, _ = reference(i)
        assert e.ids.tolist() == ids.tolist(), (SENTENCES[i], e.tokens, tokens)
        assert e.tokens == tokens
    # only the last sentence is longer than the model's 64 positions
    assert [e.truncated for e in encoded] == [False] * (N - 1) + [True]
    assert len(encoded[-1].ids) == 64 and encoded[-1].tokens[-1] == "[SEP]"


def test_tokenizer_is_cased_and_vocab_lowercase_follows_the_config(tmp_path):
    shutil.copy(os.path.join(CHECKPOINT, "vocab.txt"), tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    lowered = bert.WordPiece(str(tmp_path))(["Walk Turn"])[0].tokens
    assert lowered == ["[CLS]", "walk", "turn", "[SEP]"]
    cased = bert.WordPiece(str(tmp_path), lowercase=False)(["Walk Turn"])[0].tokens
    assert cased == ["[CLS]", "Walk", "Turn", "[SEP]"]
    with pytest.raises(FileNotFoundError, match="tokenizer.json or vocab.txt"):
        bert.WordPiece(str(tmp_path / "missing"))


# ----------------------------------------------------------------------------- encoder

def test_encoder_gives_the_reference_hidden_states():
    config, variables = bert.load_checkpoint(CHECKPOINT)
    assert (config.hidden_size, config.num_hidden_layers, config.max_position_embeddings) == \
        (32, 2, 64)
    ids = [reference(i)[0] for i in range(N)]
    worst = {}
    # batch 3: padded rows, and sentences padded to 16 and 64 positions together
    for layer in (-1, 0, 1):
        out = bert.Encoder(config, variables, layer, batch_size=3,
                           buckets=BUCKETS if layer == -1 else ())(ids)
        for i, h in enumerate(out):
            want = reference(i, layer)[2]
            assert h.dtype == np.float32 and h.shape == want.shape == (len(ids[i]), 32)
        worst[layer] = max(float(np.abs(h - reference(i, layer)[2]).max())
                           for i, h in enumerate(out))
    assert max(worst.values()) < TOL, worst
    assert bert.resolve_layer(config, -1) == bert.resolve_layer(config, 2) == 2
    with pytest.raises(ValueError, match="layer 3 out of range"):
        bert.resolve_layer(config, 3)


def test_checkpoint_names_prefix_old_layernorm_names_and_a_bare_file(tmp_path):
    config, want = bert.load_checkpoint(CHECKPOINT)
    state = load_file(os.path.join(CHECKPOINT, "model.safetensors"))
    renamed = {}
    for k, v in state.items():       # a pre-training checkpoint: `bert.` prefix, gamma / beta
        k = "bert." + k
        if "LayerNorm" in k:
            k = k.replace(".weight", ".gamma").replace(".bias", ".beta")
        renamed[k] = v
    renamed["cls.predictions.bias"] = np.zeros(config.vocab_size, np.float32)
    save_file(renamed, str(tmp_path / "weights.safetensors"))
    _, got = bert.load_checkpoint(str(tmp_path / "weights.safetensors"),
                                  os.path.join(CHECKPOINT, "config.json"))
    np.testing.assert_equal(got, want)
    with pytest.raises(FileNotFoundError, match="config.json"):
        bert.load_checkpoint(str(tmp_path / "weights.safetensors"))

    broken = dict(state)
    del broken["encoder.layer.1.output.dense.weight"]
    with pytest.raises(ValueError, match="missing 1 parameter.*layer_1/output/kernel"):
        bert.flax_params(broken, config)
    broken = dict(state, **{"encoder.layer.0.attention.self.key.weight": np.zeros((32, 31))})
    with pytest.raises(ValueError, match="'encoder.layer.0.attention.self.key.weight' has shape"):
        bert.flax_params(broken, config)
    broken = dict(state, **{"encoder.layer.2.output.dense.bias": np.zeros(32)})
    with pytest.raises(ValueError, match="unexpected key 'encoder.layer.2.output.dense.bias'"):
        bert.flax_params(broken, config)
    with pytest.raises(ValueError, match="model_type 'roberta'"):
        bert.BertConfig.from_dict({"model_type": "roberta", "vocab_size": 5})


# ----------------------------------------------------------------------------- extractor

LANGUAGES = ["en-US", "en-IN", "hi-IN", "te-IN", "en-US", "en-US", "en-IN"]
R2R_PATHS = {7: [0, 1], 12: [4, 5, 6]}          # path_id -> reference sentences


def write_annotations(folder):
    """An RxR guide file of every reference sentence (instruction_id 100 + i), a follower file
    of two of them (release follower lines: no instruction) and an R2R file."""
    guide = os.path.join(folder, "rxr_val_seen_guide.jsonl.gz")
    with gzip.open(guide, "wt", encoding="utf-8") as f:
        for i, (text, lang) in enumerate(zip(SENTENCES, LANGUAGES)):
            f.write(json.dumps({"instruction_id": 100 + i, "language": lang, "path_id": i,
                                "scan": "scanA", "path": ["a", "b"], "heading": 0.5,
                                "instruction": text}, ensure_ascii=False) + "\n")
    follower = os.path.join(folder, "rxr_val_seen_follower.jsonl.gz")
    with gzip.open(follower, "wt", encoding="utf-8") as f:
        for i in (2, 3):
            f.write(json.dumps({"demonstration_id": 900 + i, "instruction_id": 100 + i,
                                "annotator_id": 1, "path": ["a", "b"]}) + "\n")
    r2r = os.path.join(folder, "R2R_val_seen.json")
    with open(r2r, "w", encoding="utf-8") as f:
        json.dump([{"path_id": p, "scan": "scanA", "path": ["a", "b"], "heading": 0.5,
                    "distance": 3.0, "instructions": [SENTENCES[i] for i in idx]}
                   for p, idx in R2R_PATHS.items()], f)
    return guide, follower, r2r


def run(annotations, out_dir, **kwargs):
    return extract_text_features.run(annotations, CHECKPOINT, out_dir, batch_size=4,
                                     buckets=BUCKETS, window=5, progress=False, **kwargs)


def test_extractor_writes_what_the_readers_read_back_and_resumes(tmp_path):
    guide, follower, r2r = write_annotations(str(tmp_path))
    rxr_dir, r2r_dir = tmp_path / "rxr", tmp_path / "r2r"
    counts = run([guide, follower], str(rxr_dir))
    # the follower lines are the guide's instructions: nothing more to write
    assert counts == {"written": N, "skipped": 2, "truncated": 1}
    counts = run([r2r], str(r2r_dir))
    assert counts == {"written": 5, "skipped": 0, "truncated": 1}

    # RxR: the release layout, read by the trainer's reader
    feats = rxr_dir / "text_features" / "rxr_val_seen"
    assert sorted(os.listdir(feats)) == sorted(
        f"{100 + i:06d}_{lang.split('-')[0]}_text_features.npz"
        for i, lang in enumerate(LANGUAGES))
    records = rr.read_rxr(guide, manual_dir=str(rxr_dir))
    worst = 0.0
    for i, rec in enumerate(records):
        ids, tokens, hidden = reference(i)
        assert rec["text_features"].dtype == np.float32
        assert rec["text_features"].shape == hidden.shape == (len(ids), 32)
        worst = max(worst, float(np.abs(rec["text_features"] - hidden).max()))
        path = feats / f"{100 + i:06d}_{LANGUAGES[i].split('-')[0]}_text_features.npz"
        assert rr.load_text_tokens(str(path)) == tokens
        with np.load(path) as z:
            assert z["tokens"].shape == (len(ids), 1) and z["tokens"].dtype.kind == "U"
            assert z["features"].dtype == np.float32
    # R2R: the multitask layout, `text_features/{10 p + k:06d}.npy`
    assert sorted(os.listdir(r2r_dir / "text_features")) == \
        ["000070.npy", "000071.npy", "000120.npy", "000121.npy", "000122.npy"]
    r2r_records = rr.read_r2r(r2r, manual_dir=str(r2r_dir))
    sentence_of = [i for idx in R2R_PATHS.values() for i in idx]
    for rec, i in zip(r2r_records, sentence_of):
        hidden = reference(i)[2]
        assert rec["text_features"].shape == hidden.shape
        worst = max(worst, float(np.abs(rec["text_features"] - hidden).max()))
    assert worst < TOL, worst

    # rerun: every file is there, nothing is rewritten; a removed file is written again
    stamps = {p: os.stat(p).st_mtime_ns for p in feats.iterdir()}
    assert run([guide], str(rxr_dir)) == {"written": 0, "skipped": N, "truncated": 0}
    assert {p: os.stat(p).st_mtime_ns for p in feats.iterdir()} == stamps
    os.remove(feats / "000102_hi_text_features.npz")
    assert run([guide, follower], str(rxr_dir)) == {"written": 1, "skipped": N + 1,
                                                    "truncated": 0}
    assert not [p for p in feats.iterdir() if ".tmp" in p.name]


def test_extractor_layouts_and_a_follower_file_alone(tmp_path):
    guide, follower, r2r = write_annotations(str(tmp_path))
    out = tmp_path / "out"
    # a follower file alone takes its instructions from the guide file beside it
    assert run([follower], str(out)) == {"written": 2, "skipped": 0, "truncated": 0}
    assert sorted(os.listdir(out / "text_features" / "rxr_val_seen")) == \
        ["000102_hi_text_features.npz", "000103_te_text_features.npz"]
    # R2R in the release layout (no split folder): the R2R reader finds it too
    run([r2r], str(out), layout="release", layer=0)
    r2r_records = rr.read_r2r(r2r, manual_dir=str(out))
    assert os.path.isfile(out / "text_features" / "000070_en_text_features.npz")
    np.testing.assert_allclose(r2r_records[0]["text_features"], reference(0, 0)[2], atol=TOL)

    inst = tf.Instruction(5, "hi", "x", "train")
    assert tf.output_path("/d", inst, "auto").endswith(
        "text_features/rxr_train/000005_hi_text_features.npz")
    assert tf.output_path("/d", inst, "npy") == "/d/text_features/000005.npy"
    os.remove(guide)
    with pytest.raises(FileNotFoundError, match="follower line"):
        list(tf.instructions(follower))
    with pytest.raises(ValueError, match="not an RxR"):
        tf.instructions("notes.txt")
