"""Writes `official_lingunet.npz`, the fixture `tests/touchdown/test_sdr_official.py` compares the
project's `OfficialLingUNet` with: the official LingUNet (lil-lab/touchdown `sdr/model.py`), small
and with random weights, its state dict, a few inputs and the log-probabilities it gives them, and
the parameter count of the official model at the paper's sizes.

Run once, with torch (not a dependency of the project or its tests) and the official file:

  python tests/touchdown/data/make_official_lingunet.py --official_model=/path/to/touchdown/sdr/model.py

`sdr/model.py` imports `loader` (the official data loader) and `torchvision`, which the model does
not use: stand-ins are put in their place when they are missing. Its text encoder's mean reads
`torch.cuda.FloatTensor`; on a CPU that is pointed at `torch.FloatTensor` (the same values).
"""
import argparse
import importlib.util
import json
import os
import sys
import types

import numpy as np
import torch

SMALL = dict(vocab=40, embed=12, hidden=6, channels=8, m=2, kernel=5, mlp_hidden=10,
             mlp_layers=1, height=7, width=13, batch=3, tokens=6, lengths=[6, 4, 2])


def load_official(path):
    stubs = ["loader"]
    if importlib.util.find_spec("torchvision") is None:
        stubs += ["torchvision", "torchvision.models", "torchvision.transforms"]
    for name in stubs:
        module = types.ModuleType(name)
        module.Loader = object
        sys.modules[name] = module
    if "torchvision" in stubs:
        sys.modules["torchvision"].models = sys.modules["torchvision.models"]
        sys.modules["torchvision"].transforms = sys.modules["torchvision.transforms"]
    spec = importlib.util.spec_from_file_location("official_sdr_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(official, vocab, embed, hidden, channels, m, kernel, mlp_hidden, mlp_layers):
    rnn_args = {"input_size": vocab, "embed_size": embed, "rnn_hidden_size": hidden,
                "num_rnn_layers": 1, "embed_dropout": 0.1, "bidirectional": True,
                "reduce": "mean"}
    cnn_args = {"kernel_size": kernel, "padding": (kernel - 1) // 2, "deconv_dropout": 0.0}
    out_args = {"linear_hidden_size": mlp_hidden, "num_hidden_layers": mlp_layers}
    return official.LingUNet(rnn_args, cnn_args, out_args, image_channels=channels, m=m)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--official_model", required=True)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__),
                                                      "official_lingunet.npz"))
    args = parser.parse_args()
    official = load_official(args.official_model)
    if not torch.cuda.is_available():
        torch.cuda.FloatTensor = torch.FloatTensor
    paper = build(official, 4000, 300, 300, 128, 2, 5, 128, 1)
    num_params = sum(p.numel() for p in paper.parameters() if p.requires_grad)

    s = SMALL
    torch.manual_seed(0)
    model = build(official, s["vocab"], s["embed"], s["hidden"], s["channels"], s["m"],
                  s["kernel"], s["mlp_hidden"], s["mlp_layers"]).eval()
    rng = np.random.default_rng(0)
    images = rng.normal(size=(s["batch"], s["channels"], s["height"], s["width"])).astype(
        np.float32)
    tokens = np.zeros((s["batch"], s["tokens"]), np.int64)
    for i, n in enumerate(s["lengths"]):
        tokens[i, :n] = rng.integers(1, s["vocab"], n)
    lengths = np.asarray(s["lengths"], np.int64)
    with torch.no_grad():
        out = model(torch.from_numpy(images), torch.from_numpy(tokens),
                    torch.from_numpy(lengths)).numpy()
    state = {f"state/{k}": v.detach().numpy() for k, v in model.state_dict().items()}
    np.savez(args.out, images=images, tokens=tokens, lengths=lengths, log_probs=out,
             sizes=json.dumps(s), paper_num_params=num_params, torch_version=torch.__version__,
             **state)
    print(f"wrote {args.out}: official LingUNet at the paper's sizes has {num_params:,} "
          f"parameters; log-probabilities {out.shape}")


if __name__ == "__main__":
    main()
