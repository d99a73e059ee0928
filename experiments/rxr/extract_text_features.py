r"""RxR / R2R instructions to multilingual-BERT text features, in the layouts the trainer reads.

Encodes every instruction of the annotation files you name with a BERT checkpoint you name (a
Hugging Face folder such as bert-base-multilingual-cased: `config.json`, `model.safetensors` and
`tokenizer.json` or `vocab.txt`; `pytorch_model.bin` only with torch installed; nothing is
downloaded) and writes one file per instruction under `--out_dir`, the folder given to the trainer
as `data.manual_dir` (RxR) or `data.multitask_dir` (R2R):

  python -m experiments.rxr.extract_text_features \
      --annotations=/data/rxr/rxr_train_guide.jsonl.gz,/data/rxr/rxr_val_seen_guide.jsonl.gz \
      --checkpoint=/models/bert-base-multilingual-cased --out_dir=/data/rxr

  python -m experiments.rxr.extract_text_features --annotations=/data/r2r/R2R_train.json \
      --checkpoint=/models/bert-base-multilingual-cased --out_dir=/data/r2r [--layout=npy]

RxR files give the release's layout, `text_features/rxr_{split}/{instruction_id:06d}_{lang}_
text_features.npz` (`tokens` [m, 1], `features` [m, 768] float32, one row per subword of
"[CLS] instruction [SEP]"); R2R files give the multitask layout `text_features/
{instruction_id:06d}.npy` [m, 768] float32 (instruction k of path p: 10 p + k); `--layout`
forces one for both. The features are the last layer's hidden states (the release's, `--layer=-1`;
0 is the embeddings, k layer k's output). Instructions over 512 subwords are cut to 512 and
counted in a warning. Rerunning skips the files already written (each is written whole, under a
temporary name then renamed). Runs on the default JAX device; `ttw_jax.rxr.bert` and
`ttw_jax.rxr.text_features` say more.
"""
from absl import app, flags

from ttw_jax.rxr import bert, text_features


def _define_flags():
    """The command's flags (defined when it runs, so importing this module defines none)."""
    flags.DEFINE_list("annotations", None, "RxR guide / follower files "
                      "(`rxr_{split}_guide.jsonl.gz`) and / or R2R files (`R2R_{split}.json`).")
    flags.DEFINE_string("checkpoint", None, "BERT checkpoint: a Hugging Face folder "
                        "(config.json + model.safetensors) or a .safetensors file.")
    flags.DEFINE_string("bert_config", "", "The checkpoint's config.json (default: beside it).")
    flags.DEFINE_string("tokenizer", "", "Folder holding tokenizer.json or vocab.txt (default: "
                        "the checkpoint's).")
    flags.DEFINE_enum("lowercase", "auto", ["auto", "true", "false"], "Lowercase with a "
                      "vocab.txt tokenizer (auto: the folder's tokenizer_config.json, else cased).")
    flags.DEFINE_string("out_dir", None, "Data folder the text_features/ files go under.")
    flags.DEFINE_enum("layout", "auto", list(text_features.LAYOUTS), "release: `{id:06d}_{lang}_"
                      "text_features.npz`; npy: `{id:06d}.npy`; auto: release for RxR, npy for "
                      "R2R.")
    flags.DEFINE_integer("layer", -1, "Hidden states of this layer (-1: last, the release's; 0: "
                         "embeddings).")
    flags.DEFINE_integer("batch_size", 32, "Instructions per device batch.")
    flags.DEFINE_list("buckets", ["32", "64", "128", "256", "512"], "Padded lengths (one "
                      "compilation each); the model's maximum is always one.")
    flags.DEFINE_integer("window", 1024, "Instructions read, sorted by length and batched at a "
                         "time.")
    flags.DEFINE_enum("precision", "highest", sorted(bert.PRECISIONS), "Matmul precision "
                      "(highest: float32 everywhere; default: the device's fastest, e.g. TF32 / "
                      "bfloat16).")
    flags.DEFINE_bool("progress", True, "Show progress.")
    flags.mark_flags_as_required(["annotations", "checkpoint", "out_dir"])


def run(annotations, checkpoint: str, out_dir: str, bert_config: str = "", tokenizer: str = "",
        lowercase: str = "auto", layout: str = "auto", layer: int = -1, batch_size: int = 32,
        buckets=(32, 64, 128, 256, 512), window: int = 1024, precision: str = "highest",
        progress: bool = True) -> dict:
    """Extracts the features of every instruction not yet written; returns
    `text_features.extract`'s counts."""
    config, variables = bert.load_checkpoint(checkpoint, bert_config)
    words = bert.WordPiece(tokenizer or checkpoint, config.max_position_embeddings,
                           {"auto": None, "true": True, "false": False}[lowercase])
    encoder = bert.Encoder(config, variables, layer, batch_size, [int(b) for b in buckets],
                           precision)
    return text_features.extract(list(annotations), words, encoder, out_dir, layout, window,
                                 progress)


def main(argv):
    del argv
    f = flags.FLAGS
    counts = run(f.annotations, f.checkpoint, f.out_dir, f.bert_config, f.tokenizer, f.lowercase,
                 f.layout, f.layer, f.batch_size, f.buckets, f.window, f.precision, f.progress)
    print(f"{counts['written']} instruction(s) written under {f.out_dir}/text_features "
          f"({counts['skipped']} already done, {counts['truncated']} truncated to the model's "
          "length)")


if __name__ == "__main__":
    _define_flags()
    app.run(main)
