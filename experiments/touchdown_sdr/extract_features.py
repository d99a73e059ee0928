r"""Touchdown panoramas to the paper's ResNet-18 features (and RGB bands for Table 7's agent).

Reads a folder of equirectangular panoramas (`<panoid>.jpg`), slices each into eight 800 x 460
perspective images, runs an ImageNet ResNet-18 up to `layer2` on device and writes the official
features layout, `<out_dir>/<panoid>.npy` float16 [100, 464, 128] (`ttw_jax.touchdown.extraction`
states the angles). The ResNet-18 weights are a file you name, with torchvision's parameter names
(`.safetensors`, `.npz`, or torchvision's `.pth` read with torch's weights-only loader when torch
is installed; BUILD.md). Rerunning skips the panoramas already written; unreadable images are
listed together at the end (exit status 1) after all others are written.

  python -m experiments.touchdown_sdr.extract_features --panoramas=/data/touchdown/panoramas \
      --weights=/data/resnet18.safetensors --out_dir=/data/touchdown/features \
      [--rgb_dir=/data/touchdown/rgb] [--batch_size=8] [--dtype=bfloat16]

Then: SDR reads `--out_dir` as `<manual_dir>/features` (or link it there with
`experiments.touchdown_nav.convert_features --sdr_dir`), navigation converts it with
`convert_features` (`--layout=images`, configs/paper.py), and the RGB agent converts `--rgb_dir`
with `convert_features --layout=rgb`.
"""
import time

import jax.numpy as jnp
from absl import app, flags

from ttw_jax.touchdown import extraction, projection, resnet

flags.DEFINE_string("panoramas", None, "Folder of equirectangular `<panoid>.jpg` panoramas.")
flags.DEFINE_string("weights", None, "ResNet-18 weights (torchvision names): .safetensors, .npz "
                    "or .pth.")
flags.DEFINE_string("out_dir", None, "Where `<panoid>.npy` features [100, 464, 128] go.")
flags.DEFINE_string("rgb_dir", "", "Also write `<panoid>.npy` RGB bands [84, 504, 3] here.")
flags.DEFINE_integer("batch_size", 8, "Panoramas per device batch.")
flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"], "Convolution precision.")
flags.DEFINE_list("slice_size", [str(s) for s in projection.SLICE_SIZE],
                  "Height, width of the eight perspective slices (the paper's 800, 460).")
flags.DEFINE_bool("progress", True, "Show a progress bar.")


def run(panoramas: str, weights: str, out_dir: str, rgb_dir: str = "", batch_size: int = 8,
        dtype: str = "float32", slice_size=projection.SLICE_SIZE, progress: bool = True) -> dict:
    """Extracts every panorama not yet done; returns `extract_folder`'s counts plus `seconds`
    and `panoramas_per_second` (of the panoramas processed in this call)."""
    variables = resnet.read_torchvision(weights)
    ex = extraction.Extractor(variables, tuple(int(s) for s in slice_size),
                              dtype=jnp.dtype(dtype))
    start = time.perf_counter()
    counts = extraction.extract_folder(ex, panoramas, out_dir, rgb_dir, batch_size, progress)
    seconds = time.perf_counter() - start
    return dict(counts, seconds=seconds,
                panoramas_per_second=counts["done"] / seconds if counts["done"] else 0.0)


def main(argv):
    del argv
    f = flags.FLAGS
    try:
        out = run(f.panoramas, f.weights, f.out_dir, f.rgb_dir, f.batch_size, f.dtype,
                  f.slice_size, f.progress)
    except extraction.UnreadableImages as e:
        raise SystemExit(str(e))
    print(f"{out['done']} panoramas written to {f.out_dir} ({out['skipped']} already done) in "
          f"{out['seconds']:.1f} s: {out['panoramas_per_second']:.2f} panoramas/s "
          "(compilation included)")


if __name__ == "__main__":
    flags.mark_flags_as_required(["panoramas", "weights", "out_dir"])
    app.run(main)
