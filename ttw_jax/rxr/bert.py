"""A BERT encoder in Flax, equal to Hugging Face's `BertModel`, with its WordPiece tokenizer.

RxR's text features are multilingual cased BERT's (`bert-base-multilingual-cased`, the TF-Hub
`bert_multi_cased_L-12_H-768_A-12` of the release README), "extracted from the last layer of the
BERT encoder": one 768-vector per subword of `[CLS] instruction [SEP]`. `BertEncoder` is the
encoder of Devlin et al. 2019 as Hugging Face's `BertModel` computes it in inference mode: word +
absolute position + token-type (all 0) embeddings, LayerNorm, then `num_hidden_layers` post-norm
transformer layers (self-attention over the unpadded subwords, dense, residual, LayerNorm; dense,
GELU with the exact erf, dense, residual, LayerNorm), LayerNorm epsilon from the config (1e-12);
no pooler. `layer` picks whose output is returned as Hugging Face numbers `hidden_states`: 0 the
embeddings, k the output of layer k, -1 (default, the release's choice) the last layer, i.e.
`last_hidden_state`; layers after it are not computed.

Checkpoints are files you name, never downloads (`load_checkpoint`): a Hugging Face model folder
(`config.json` and `model.safetensors`, else `pytorch_model.bin` read with torch's weights-only
loader when torch is installed) or a `.safetensors` file with its `config.json`. Parameter names
are Hugging Face's (`embeddings.word_embeddings.weight`, `encoder.layer.3.attention.self.query.
weight`, ...; `bert.` prefixed in a pre-training checkpoint, LayerNorm `gamma` / `beta` in old
ones), mapped one by one onto the Flax tree (`flax_params`); the pooler and pre-training heads
are ignored, any other key, a missing one or a wrong shape is an error naming it.

`WordPiece` tokenizes with the `tokenizers` library (the `text` extra) from the same folder:
`tokenizer.json` when present, else `vocab.txt` (BERT's WordPiece: cased unless the folder's
`tokenizer_config.json` says `do_lower_case`; accents kept when cased, CJK characters split,
control characters dropped, [CLS] / [SEP] added), truncated to the model's 512 positions.
`Encoder` runs the jitted encoder over batches of token ids padded to a few bucketed lengths and
a fixed batch size, so it compiles once per bucket.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import re
from typing import Any, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.core import paths
from ttw_jax.core.state_dict import read_state_dict

ACTIVATIONS = {"gelu": lambda x: nn.gelu(x, approximate=False),
               "gelu_new": lambda x: nn.gelu(x, approximate=True),
               "gelu_pytorch_tanh": lambda x: nn.gelu(x, approximate=True),
               "relu": nn.relu}
PRECISIONS = {"highest": jax.lax.Precision.HIGHEST, "default": jax.lax.Precision.DEFAULT}
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
TOKENIZER_HINT = ("the `tokenizers` package reads BERT's tokenizer: pip install 'tokenizers>=0.15' "
                  "(or pip install -e \".[text]\")")


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """The fields of a Hugging Face BERT `config.json` the encoder uses (its defaults are
    `bert-base`'s; `vocab_size` has none)."""
    vocab_size: int
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "config") -> "BertConfig":
        """From a Hugging Face config dict; ValueError naming `where` for a model that is not a
        BERT this encoder computes (another `model_type`, relative positions, an activation
        outside `ACTIVATIONS`, heads that do not divide the width)."""
        if d.get("model_type", "bert") != "bert":
            raise ValueError(f"{where}: model_type {d['model_type']!r}, expected 'bert'")
        if d.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{where}: position_embedding_type "
                             f"{d['position_embedding_type']!r}: only 'absolute' is supported")
        if "vocab_size" not in d:
            raise ValueError(f"{where}: missing 'vocab_size'")
        fields = {f.name for f in dataclasses.fields(cls)}
        config = cls(**{k: v for k, v in d.items() if k in fields})
        if config.hidden_act not in ACTIVATIONS:
            raise ValueError(f"{where}: hidden_act {config.hidden_act!r}, expected one of "
                             f"{sorted(ACTIVATIONS)}")
        if config.hidden_size % config.num_attention_heads:
            raise ValueError(f"{where}: hidden_size {config.hidden_size} is not a multiple of "
                             f"num_attention_heads {config.num_attention_heads}")
        return config

    @classmethod
    def from_json(cls, path: str) -> "BertConfig":
        with paths.open_binary(path) as f:
            try:
                d = json.loads(f.read().decode("utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ValueError(f"{path}: not a JSON config ({e})") from None
        if not isinstance(d, dict):
            raise ValueError(f"{path}: not a JSON object")
        return cls.from_dict(d, path)


def resolve_layer(config: BertConfig, layer: int) -> int:
    """`layer` as an index into Hugging Face's `hidden_states` (0: embeddings ... L: last);
    negative counts from the end (-1: the last layer)."""
    n = config.num_hidden_layers
    if not -(n + 1) <= layer <= n:
        raise ValueError(f"layer {layer} out of range for {n} layers (0 = embeddings, "
                         f"{n} or -1 = last)")
    return layer % (n + 1)


class BertLayer(nn.Module):
    """One post-norm transformer layer: x [B, L, H], bias [B, 1, 1, L] (0 or a large negative
    on padded keys) -> [B, L, H]."""
    config: BertConfig
    precision: Any = jax.lax.Precision.HIGHEST

    @nn.compact
    def __call__(self, x: jax.Array, bias: jax.Array) -> jax.Array:
        c = self.config
        dense = lambda n, name: nn.Dense(n, precision=self.precision, name=name)
        norm = lambda name: nn.LayerNorm(epsilon=c.layer_norm_eps, name=name)
        b, length, width = x.shape
        heads = c.num_attention_heads
        split = lambda y: y.reshape(b, length, heads, width // heads)
        q, k, v = (split(dense(width, n)(x)) for n in ("query", "key", "value"))
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k, precision=self.precision)
        probs = jax.nn.softmax(scores / math.sqrt(width // heads) + bias, axis=-1)
        context = jnp.einsum("bhqk,bkhd->bqhd", probs, v, precision=self.precision)
        x = norm("attention_norm")(
            x + dense(width, "attention_output")(context.reshape(b, length, width)))
        h = ACTIVATIONS[c.hidden_act](dense(c.intermediate_size, "intermediate")(x))
        return norm("output_norm")(x + dense(width, "output")(h))


class BertEncoder(nn.Module):
    """ids [B, L] int32, mask [B, L] (1 on subwords, 0 on padding) -> hidden states [B, L, H]
    float32 of `layer` (Hugging Face's `hidden_states[layer]`; -1: `last_hidden_state`)."""
    config: BertConfig
    layer: int = -1
    precision: Any = jax.lax.Precision.HIGHEST

    @nn.compact
    def __call__(self, ids: jax.Array, mask: jax.Array) -> jax.Array:
        c = self.config
        length = ids.shape[1]
        if length > c.max_position_embeddings:
            raise ValueError(f"{length} positions, the model has {c.max_position_embeddings}")
        embed = lambda n, name: nn.Embed(n, c.hidden_size, name=name)
        x = (embed(c.vocab_size, "word")(ids)
             + embed(c.max_position_embeddings, "position")(jnp.arange(length))[None]
             + embed(c.type_vocab_size, "token_type")(jnp.zeros_like(ids)))
        x = nn.LayerNorm(epsilon=c.layer_norm_eps, name="embeddings_norm")(x)
        bias = jnp.where(mask[:, None, None, :] > 0, 0.0, jnp.finfo(jnp.float32).min)
        for i in range(resolve_layer(c, self.layer)):
            x = BertLayer(c, self.precision, name=f"layer_{i}")(x, bias)
        return x


# ----------------------------------------------------------------------------- checkpoints

_EMBEDDINGS = {"word_embeddings": "word", "position_embeddings": "position",
               "token_type_embeddings": "token_type"}
_LAYER_MODULES = {"attention.self.query": "query", "attention.self.key": "key",
                  "attention.self.value": "value", "attention.output.dense": "attention_output",
                  "attention.output.LayerNorm": "attention_norm",
                  "intermediate.dense": "intermediate", "output.dense": "output",
                  "output.LayerNorm": "output_norm"}
# keys of a BERT checkpoint that the encoder has no use for
_IGNORED = re.compile(r"^(pooler\.|cls\.|embeddings\.position_ids$)")
_LAYER_KEY = re.compile(r"^encoder\.layer\.(\d+)\.(.+)\.(weight|bias|gamma|beta)$")


def _target(key: str) -> tuple[tuple[str, ...], bool] | None:
    """(Flax parameter path, transpose) of a Hugging Face key without its `bert.` prefix; None
    for a key the encoder does not have."""
    m = re.fullmatch(r"embeddings\.(\w+)\.weight", key)
    if m and m.group(1) in _EMBEDDINGS:
        return (_EMBEDDINGS[m.group(1)], "embedding"), False
    m = re.fullmatch(r"embeddings\.LayerNorm\.(weight|bias|gamma|beta)", key)
    if m:
        return ("embeddings_norm", "bias" if m.group(1) in ("bias", "beta") else "scale"), False
    m = _LAYER_KEY.fullmatch(key)
    if m and m.group(2) in _LAYER_MODULES:
        module, kind = _LAYER_MODULES[m.group(2)], m.group(3)
        if module.endswith("_norm"):
            return (f"layer_{m.group(1)}", module,
                    "bias" if kind in ("bias", "beta") else "scale"), False
        if kind in ("weight", "bias"):
            return (f"layer_{m.group(1)}", module, "kernel" if kind == "weight" else "bias"), \
                kind == "weight"
    return None


def param_shapes(config: BertConfig) -> dict[tuple[str, ...], tuple[int, ...]]:
    """{Flax parameter path: shape} of every parameter of the full encoder."""
    h, i = config.hidden_size, config.intermediate_size
    out = {("word", "embedding"): (config.vocab_size, h),
           ("position", "embedding"): (config.max_position_embeddings, h),
           ("token_type", "embedding"): (config.type_vocab_size, h),
           ("embeddings_norm", "scale"): (h,), ("embeddings_norm", "bias"): (h,)}
    for n in range(config.num_hidden_layers):
        for module in ("query", "key", "value", "attention_output", "intermediate", "output"):
            fan_out = i if module == "intermediate" else h
            fan_in = i if module == "output" else h
            out[(f"layer_{n}", module, "kernel")] = (fan_in, fan_out)
            out[(f"layer_{n}", module, "bias")] = (fan_out,)
        for module in ("attention_norm", "output_norm"):
            out[(f"layer_{n}", module, "scale")] = (h,)
            out[(f"layer_{n}", module, "bias")] = (h,)
    return out


def flax_params(state: Mapping[str, np.ndarray], config: BertConfig,
                where: str = "checkpoint") -> dict:
    """The Flax parameter tree ({"params": ...}, float32) of a Hugging Face BERT state dict.
    Dense kernels are the transposed `weight`s (torch stores [out, in]). ValueError naming
    `where` and the key for an unknown key, a missing parameter or a wrong shape."""
    shapes = param_shapes(config)
    found: dict[tuple[str, ...], np.ndarray] = {}
    for key, value in state.items():
        short = key.removeprefix("bert.")
        if _IGNORED.match(short):
            continue
        target = _target(short)
        if target is None or target[0] not in shapes:
            raise ValueError(f"{where}: unexpected key {key!r} (not a parameter of a "
                             f"{config.num_hidden_layers}-layer BertModel)")
        name, transpose = target
        if name in found:
            raise ValueError(f"{where}: key {key!r} repeats another key's parameter {name}")
        arr = np.asarray(value, np.float32)
        arr = arr.T if transpose else arr
        if arr.shape != shapes[name]:
            raise ValueError(f"{where}: key {key!r} has shape {np.shape(value)}, expected "
                             f"{shapes[name][::-1] if transpose else shapes[name]}")
        found[name] = arr
    missing = [n for n in shapes if n not in found]
    if missing:
        raise ValueError(f"{where}: missing {len(missing)} parameter(s), first "
                         f"{'/'.join(missing[0])} (Hugging Face names: see ttw_jax.rxr.bert)")
    tree: dict = {}
    for name, arr in found.items():
        node = tree
        for part in name[:-1]:
            node = node.setdefault(part, {})
        node[name[-1]] = arr
    return {"params": tree}


def checkpoint_files(checkpoint: str, config: str = "") -> tuple[str, str]:
    """(weights file, config.json) of a checkpoint: a Hugging Face folder (`model.safetensors`,
    else `pytorch_model.bin`) or a weights file with `config` (default: `config.json` beside
    it). FileNotFoundError naming what is missing."""
    if paths.isdir(checkpoint):
        weights = next((paths.join(checkpoint, n) for n in WEIGHT_FILES
                        if paths.isfile(paths.join(checkpoint, n))), None)
        if weights is None:
            raise FileNotFoundError(f"{checkpoint}: no {' or '.join(WEIGHT_FILES)} (a Hugging "
                                    "Face BERT folder, e.g. bert-base-multilingual-cased)")
        folder = checkpoint
    elif paths.isfile(checkpoint):
        weights, folder = checkpoint, os.path.dirname(checkpoint)
    else:
        raise FileNotFoundError(f"BERT checkpoint not found: {checkpoint}")
    config = config or paths.join(folder, "config.json")
    if not paths.isfile(config):
        raise FileNotFoundError(f"BERT config not found: {config} (the checkpoint's Hugging "
                                "Face config.json)")
    return weights, config


def load_checkpoint(checkpoint: str, config: str = "") -> tuple[BertConfig, dict]:
    """(config, Flax variables) of a BERT checkpoint (`checkpoint_files`): `.safetensors` read
    with numpy, `pytorch_model.bin` / `.pt` / `.pth` with torch's weights-only loader."""
    weights, config_path = checkpoint_files(checkpoint, config)
    cfg = BertConfig.from_json(config_path)
    return cfg, flax_params(read_state_dict(weights, "BERT checkpoint"), cfg, weights)


# ----------------------------------------------------------------------------- tokenizer

@dataclasses.dataclass
class Encoded:
    """One tokenized instruction: `ids` [m] int32 and `tokens` (with [CLS] / [SEP]), and whether
    it was cut to the model's length."""
    ids: np.ndarray
    tokens: list[str]
    truncated: bool


class WordPiece:
    """BERT's tokenizer from a checkpoint folder (module docstring). `lowercase` (vocab.txt
    only): None reads `do_lower_case` from `tokenizer_config.json` (absent: cased)."""

    def __init__(self, folder: str, max_length: int = 512, lowercase: bool | None = None):
        try:
            import tokenizers
            from tokenizers.implementations import BertWordPieceTokenizer
        except ImportError:
            raise ImportError(TOKENIZER_HINT) from None
        if paths.isfile(folder):          # a checkpoint file: its folder
            folder = os.path.dirname(folder)
        spec, vocab = paths.join(folder, "tokenizer.json"), paths.join(folder, "vocab.txt")
        if paths.isfile(spec):
            with paths.open_binary(spec) as f:
                tok = tokenizers.Tokenizer.from_str(f.read().decode("utf-8"))
            self.source = spec
        elif paths.isfile(vocab):
            if lowercase is None:
                lowercase = bool(self._tokenizer_config(folder).get("do_lower_case", False))
            with paths.open_binary(vocab) as f:
                words = f.read().decode("utf-8").splitlines()
            tok = BertWordPieceTokenizer({w: i for i, w in enumerate(words)},
                                         lowercase=lowercase, clean_text=True,
                                         handle_chinese_chars=True, strip_accents=None)
            self.source = vocab
        else:
            raise FileNotFoundError(f"{folder}: no tokenizer.json or vocab.txt (BERT's "
                                    "WordPiece vocabulary, beside the checkpoint)")
        tok.no_padding()
        tok.enable_truncation(max_length)
        self.tokenizer, self.max_length = tok, max_length
        probe = tok.encode("a")
        if len(probe.tokens) < 2 or (probe.tokens[0], probe.tokens[-1]) != ("[CLS]", "[SEP]"):
            raise ValueError(f"{self.source}: the tokenizer does not add [CLS] / [SEP] "
                             f"(got {probe.tokens}); a BERT tokenizer is expected")

    @staticmethod
    def _tokenizer_config(folder: str) -> dict:
        path = paths.join(folder, "tokenizer_config.json")
        if not paths.isfile(path):
            return {}
        with paths.open_binary(path) as f:
            d = json.loads(f.read().decode("utf-8"))
        return d if isinstance(d, dict) else {}

    def __call__(self, texts: Sequence[str]) -> list[Encoded]:
        return [Encoded(np.asarray(e.ids, np.int32), list(e.tokens), bool(e.overflowing))
                for e in self.tokenizer.encode_batch(list(texts))]


# ----------------------------------------------------------------------------- batched encoder

def default_buckets(max_length: int) -> tuple[int, ...]:
    """32, 64, 128, ... up to and including `max_length`."""
    out, n = [], 32
    while n < max_length:
        out.append(n)
        n *= 2
    return tuple(out + [max_length])


@functools.lru_cache(maxsize=8)
def _jitted_encoder(config: BertConfig, layer: int, precision: str):
    """One jitted `BertEncoder.apply` per (config, layer, precision): encoders built again in
    a process (one per command run) reuse its compiled programs."""
    model = BertEncoder(config, layer, PRECISIONS[precision])
    return jax.jit(model.apply)


class Encoder:
    """The jitted encoder over token-id sequences of any length up to the model's: sequences are
    padded to the smallest of `buckets` that holds them and grouped `batch_size` at a time (the
    last batch of a bucket padded with empty rows), so each bucket compiles once. Runs on JAX's
    default device (CPU, GPU or TPU)."""

    def __init__(self, config: BertConfig, variables: Mapping, layer: int = -1,
                 batch_size: int = 32, buckets: Sequence[int] | None = None,
                 precision: str = "highest"):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
        self.config, self.layer = config, resolve_layer(config, layer)
        self.batch_size = int(batch_size)
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        top = config.max_position_embeddings
        self.buckets = tuple(sorted({min(int(b), top) for b in buckets or ()} | {top}))
        keep = {f"layer_{i}" for i in range(self.layer)}
        params = {k: v for k, v in variables["params"].items()
                  if not k.startswith("layer_") or k in keep}
        self.variables = jax.device_put({"params": params})
        self._apply = _jitted_encoder(config, self.layer, precision)

    def bucket(self, length: int) -> int:
        for b in self.buckets:
            if length <= b:
                return b
        raise ValueError(f"{length} subwords, the model holds {self.buckets[-1]}")

    def __call__(self, sequences: Sequence[np.ndarray]) -> list[np.ndarray]:
        """float32 [m_i, H] hidden states of each int sequence [m_i], in order."""
        out: list[np.ndarray | None] = [None] * len(sequences)
        groups: dict[int, list[int]] = {}
        for i, s in enumerate(sequences):
            groups.setdefault(self.bucket(len(s)), []).append(i)
        for length, members in sorted(groups.items()):
            for start in range(0, len(members), self.batch_size):
                rows = members[start:start + self.batch_size]
                ids = np.zeros((self.batch_size, length), np.int32)
                mask = np.zeros((self.batch_size, length), np.int32)
                for r, i in enumerate(rows):
                    ids[r, :len(sequences[i])] = sequences[i]
                    mask[r, :len(sequences[i])] = 1
                hidden = np.asarray(self._apply(self.variables, ids, mask), np.float32)
                for r, i in enumerate(rows):
                    out[i] = hidden[r, :len(sequences[i])].copy()
        return out
