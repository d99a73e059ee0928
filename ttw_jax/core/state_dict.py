"""PyTorch state dicts read without executing code: `.safetensors`, `.npz`, `.pt`, `.pth`, `.bin`.

A state dict maps parameter names (`layer1.0.conv1.weight`) to arrays. `.safetensors` and `.npz`
(arrays named by the keys, or by `state/<key>`) are read with numpy alone. A `.pt`/`.pth` file (or
Hugging Face's `pytorch_model.bin`) is read with `torch.load(weights_only=True)`, which restores
tensors and plain containers only, never arbitrary objects; torch is needed for that format alone
(an optional extra).
"""
from __future__ import annotations

import os

import numpy as np

from ttw_jax.core import paths

FORMATS = (".safetensors", ".npz", ".pt", ".pth", ".bin")


def read_state_dict(path: str, what: str = "state dict") -> dict[str, np.ndarray]:
    """{key: array} from `path` (module docstring); `what` names the file in errors."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in FORMATS:
        raise ValueError(f"{path}: a {what} is a {', '.join(FORMATS)} file, not {suffix!r}")
    if not paths.isfile(path):
        raise FileNotFoundError(f"{what} not found: {path}")
    if suffix == ".npz":
        with paths.load_numpy(path) as z:
            return {k.removeprefix("state/"): z[k] for k in z.files
                    if k.startswith("state/") or "." in k}
    if suffix == ".safetensors":
        from safetensors.numpy import load as load_bytes
        with paths.open_binary(path) as f:
            return load_bytes(f.read())
    try:
        import torch
    except ImportError:
        raise ImportError(f"{path}: reading a PyTorch {what} needs torch (pip install "
                          "torch), or save its state dict as .safetensors / .npz") from None
    with paths.open_binary(path) as f:
        obj = torch.load(f, map_location="cpu", weights_only=True)
    state = obj.get("state_dict", obj) if isinstance(obj, dict) else None
    if not isinstance(state, dict):
        raise ValueError(f"{path}: not a state dict nor a dict holding 'state_dict'")
    return {k: v.float().numpy() if v.dtype.is_floating_point else v.numpy()
            for k, v in state.items()}
