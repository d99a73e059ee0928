"""ResNet-18 (He et al. 2016) in inference mode, with torchvision's weights and parameter names.

Touchdown's panorama features are a ResNet-18 pretrained on ImageNet cut before its last four
children (`avgpool`, `fc`, `layer4`, `layer3`): the feature map after `layer2`, 128 channels at
1/8 of the input (Chen et al. 2019, section 6 and App. D). `ResNet18(stop_after="layer2")` is that
trunk; batch norm uses the stored running statistics (eps 1e-5, as torch), convolutions pad as
torchvision's (7 x 7 stride 2 pad 3, 3 x 3 max pool stride 2 pad 1, 3 x 3 pad 1, 1 x 1
downsampling), so an H x W input gives floor((H - 1) / 8) + 1 rows, e.g. 800 x 460 -> 100 x 58.

Weights come from a file the user names (`read_torchvision`: `.safetensors`, `.npz`, or a
`.pth` read with torch's weights-only loader; nothing is downloaded or unpickled) with
torchvision's keys (`conv1.weight`, `bn1.running_mean`, `layer2.0.downsample.1.weight`, ...;
timm's ResNet-18 files use the same keys); keys past `stop_after` (`layer3.*`, `fc.*`) are
ignored, and a missing key or a wrong shape is an error naming the key.
"""
from __future__ import annotations

from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ttw_jax.core.state_dict import read_state_dict

STAGES = ("layer1", "layer2", "layer3", "layer4")
STAGE_FEATURES = (64, 128, 256, 512)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def imagenet_normalize(images: jax.Array) -> jax.Array:
    """uint8 RGB [..., 3] (or floats in [0, 255]) -> float32, torchvision's ImageNet
    normalisation ((x / 255 - mean) / std per channel)."""
    x = jnp.asarray(images, jnp.float32) / 255.0
    return (x - jnp.asarray(IMAGENET_MEAN)) / jnp.asarray(IMAGENET_STD)


class BasicBlock(nn.Module):
    """Two 3 x 3 convolutions with batch norm and a residual; a 1 x 1 strided projection of the
    input when the shape changes (torchvision's `downsample`)."""
    features: int
    strides: int = 1
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        conv = lambda k, s, p, name: nn.Conv(self.features, (k, k), (s, s), ((p, p), (p, p)),
                                             use_bias=False, dtype=self.dtype, name=name)
        norm = lambda name: nn.BatchNorm(use_running_average=True, epsilon=1e-5,
                                         dtype=self.dtype, name=name)
        y = nn.relu(norm("bn1")(conv(3, self.strides, 1, "conv1")(x)))
        y = norm("bn2")(conv(3, 1, 1, "conv2")(y))
        if self.strides != 1 or x.shape[-1] != self.features:
            x = norm("downsample_bn")(conv(1, self.strides, 0, "downsample_conv")(x))
        return nn.relu(x + y)


class ResNet18(nn.Module):
    """images [B, H, W, 3] (normalised, `imagenet_normalize`) -> the feature map after
    `stop_after` [B, H', W', C] (layer2: C = 128, H' = floor((H - 1) / 8) + 1)."""
    stop_after: str = "layer2"
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, images: jax.Array) -> jax.Array:
        if self.stop_after not in STAGES:
            raise ValueError(f"stop_after must be one of {STAGES}, got {self.stop_after!r}")
        x = nn.Conv(64, (7, 7), (2, 2), ((3, 3), (3, 3)), use_bias=False, dtype=self.dtype,
                    name="conv1")(images.astype(self.dtype))
        x = nn.relu(nn.BatchNorm(use_running_average=True, epsilon=1e-5, dtype=self.dtype,
                                 name="bn1")(x))
        x = nn.max_pool(x, (3, 3), (2, 2), ((1, 1), (1, 1)))
        for i, (stage, features) in enumerate(zip(STAGES, STAGE_FEATURES)):
            for j in range(2):
                strides = 2 if i > 0 and j == 0 else 1
                x = BasicBlock(features, strides, self.dtype, name=f"{stage}_{j}")(x)
            if stage == self.stop_after:
                break
        return x


def _torch_key(path: tuple[str, ...]) -> str:
    """torchvision's key of a flax variable path, e.g. ('layer2_0', 'downsample_bn', 'mean') ->
    'layer2.0.downsample.1.running_mean'."""
    names = {"downsample_conv": "downsample.0", "downsample_bn": "downsample.1"}
    leaf = {"kernel": "weight", "scale": "weight", "bias": "bias", "mean": "running_mean",
            "var": "running_var"}[path[-1]]
    mods = [names.get(p, p.replace("_", ".")) for p in path[:-1]]
    return ".".join(mods + [leaf])


def import_torchvision(state: Mapping[str, Any], stop_after: str = "layer2",
                       where: str = "state dict") -> dict:
    """Flax variables {'params', 'batch_stats'} of `ResNet18(stop_after)` from a torchvision
    state dict (convolution kernels OIHW -> HWIO). KeyError / ValueError name the key."""
    shapes = jax.eval_shape(ResNet18(stop_after).init, jax.random.key(0),
                            jnp.zeros((1, 32, 32, 3)))
    def convert(path, leaf):
        names = tuple(p.key for p in path[1:])
        key = _torch_key(names)
        if key not in state:
            raise KeyError(f"{where} has no {key!r} (torchvision ResNet-18 parameter names)")
        x = np.asarray(state[key], np.float32)
        if names[-1] == "kernel":
            x = x.transpose(2, 3, 1, 0)
        if x.shape != leaf.shape:
            raise ValueError(f"{where}: {key!r} has shape {x.shape} after conversion, expected "
                             f"{leaf.shape} (a ResNet-18?)")
        return np.ascontiguousarray(x)
    return jax.tree_util.tree_map_with_path(convert, shapes)


def read_torchvision(path: str, stop_after: str = "layer2") -> dict:
    """`import_torchvision` of the weights file `path` (`ttw_jax.core.state_dict` formats)."""
    return import_torchvision(read_state_dict(path, "ResNet-18 weights file"), stop_after, path)
