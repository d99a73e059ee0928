"""Writes `resnet18_features.npz`, the fixture `tests/touchdown/test_extraction.py` compares the
project's ResNet-18 and panorama features with: torchvision's `resnet18` cut before its last
four children (`nn.Sequential(*list(model.children())[:-4])`, the Touchdown trunk) with random
weights and batch-norm statistics (rounded to float16 and stored as such, keys as torchvision
names them, up to `layer2`), a few normalised images and their `layer2` maps, and two synthetic
panoramas with their features computed independently of the project: each slice's rays built as
3-D vectors, rotated about the vertical axis by a rotation matrix, converted to longitude and
latitude, read with a per-pixel bilinear loop, normalised and run through the torch trunk, the
slices concatenated left to right.

Run once, with torch and torchvision (neither is a dependency of the project or its tests):

  python tests/touchdown/data/make_resnet_fixture.py
"""
import os

import numpy as np
import torch
import torch.library

# torchvision's compiled operators (nms, ...) are not needed for a ResNet; a torchvision build for
# another torch fails to register their meta functions at import time, so skip that.
torch.library.register_fake = lambda *a, **k: (lambda f: f)
import torchvision  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resnet18_features.npz")
KEEP = ("conv1.", "bn1.", "layer1.", "layer2.")
MEAN, STD = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
SLICES, SLICE = 8, (40, 24)


def random_state(model, rng):
    state = {}
    for key, value in model.state_dict().items():
        if not key.startswith(KEEP):
            continue
        shape = tuple(value.shape)
        if key.endswith("num_batches_tracked"):
            state[key] = np.array(7, np.int64)
        elif key.endswith("running_var"):
            state[key] = rng.uniform(0.5, 2.0, shape)
        elif key.endswith("running_mean") or key.endswith("bias"):
            state[key] = rng.normal(0, 0.1, shape)
        elif value.ndim == 1:            # batch-norm scale
            state[key] = rng.uniform(0.5, 1.5, shape)
        else:                            # convolution, He-scaled
            state[key] = rng.normal(0, np.sqrt(2.0 / np.prod(shape[1:])), shape)
        if state[key].dtype != np.int64:
            state[key] = state[key].astype(np.float16)
    return state


def slice_rays(height, width, hfov_deg, yaw_deg):
    """Unit rays [h, w, 3] (x right, y up, z forward) of a pinhole image turned by yaw."""
    f = (width / 2) / np.tan(np.radians(hfov_deg) / 2)
    u = np.arange(width) + 0.5 - width / 2
    v = height / 2 - (np.arange(height) + 0.5)
    rays = np.stack(np.broadcast_arrays(u[None, :], v[:, None], np.full((1, 1), f)), -1)
    rays = rays / np.linalg.norm(rays, axis=-1, keepdims=True)
    a = np.radians(yaw_deg)              # turning right = towards +x
    rot = np.array([[np.cos(a), 0, np.sin(a)], [0, 1, 0], [-np.sin(a), 0, np.cos(a)]])
    return rays @ rot.T


def bilinear_equirect(pano, rays):
    h, w, _ = pano.shape
    lon = np.degrees(np.arctan2(rays[..., 0], rays[..., 2]))        # 0 = the image centre
    lat = np.degrees(np.arcsin(np.clip(rays[..., 1], -1, 1)))
    out = np.zeros(rays.shape[:2] + (3,))
    for i in range(rays.shape[0]):
        for j in range(rays.shape[1]):
            x = (lon[i, j] + 180.0) / 360.0 * w - 0.5
            y = (90.0 - lat[i, j]) / 180.0 * h - 0.5
            x0, y0 = int(np.floor(x)), int(np.floor(y))
            ax, ay = x - x0, y - y0
            acc = 0.0
            for dy, wy in ((0, 1 - ay), (1, ay)):
                for dx, wx in ((0, 1 - ax), (1, ax)):
                    yy = min(max(y0 + dy, 0), h - 1)
                    acc = acc + wy * wx * pano[yy, (x0 + dx) % w].astype(np.float64)
            out[i, j] = acc
    return out


def main():
    rng = np.random.default_rng(41)
    model = torchvision.models.resnet18(weights=None)
    state = random_state(model, rng)
    result = model.load_state_dict({k: torch.from_numpy(v.astype(np.float32) if v.dtype ==
                                                        np.float16 else v)
                                    for k, v in state.items()}, strict=False)
    assert not result.unexpected_keys
    assert all(not k.startswith(KEEP) for k in result.missing_keys), result.missing_keys
    trunk = torch.nn.Sequential(*list(model.children())[:-4]).eval()

    def run(images):                     # [B, H, W, 3] normalised -> [B, h, w, 128]
        with torch.no_grad():
            x = torch.from_numpy(images.transpose(0, 3, 1, 2).astype(np.float32))
            return trunk(x).numpy().transpose(0, 2, 3, 1)

    images = rng.normal(0, 1, (2, 37, 29, 3)).astype(np.float32)
    layer2 = run(images)

    h, w = 32, 64                        # smooth colours, a few edges, and noise
    yy, xx = np.mgrid[0:h, 0:w]
    panoramas = np.stack([
        np.stack([128 + 100 * np.sin(2 * np.pi * xx / w + s), 128 + 90 * np.cos(np.pi * yy / h),
                  np.where((xx // 8 + yy // 8 + s) % 2 == 0, 220, 30)], -1)
        + rng.normal(0, 8, (h, w, 3)) for s in (0, 1)])
    panoramas = np.clip(np.round(panoramas), 0, 255).astype(np.uint8)
    features = []
    for pano in panoramas:
        slices = np.stack([bilinear_equirect(pano, slice_rays(*SLICE, 360 / SLICES, 360 / SLICES * k))
                           for k in range(SLICES)])
        maps = run(((slices / 255.0 - MEAN) / STD).astype(np.float32))   # [8, h', w', 128]
        features.append(np.concatenate(list(maps), axis=1))
    np.savez_compressed(OUT, **{f"state/{k}": v for k, v in state.items()}, images=images,
                        layer2=layer2, panoramas=panoramas, slice_size=np.array(SLICE),
                        features=np.stack(features).astype(np.float32))
    print(f"wrote {OUT}: {len(state)} tensors, layer2 {layer2.shape}, features "
          f"{np.stack(features).shape}")


if __name__ == "__main__":
    main()
