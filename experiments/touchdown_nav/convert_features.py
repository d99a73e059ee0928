r"""Converts the official Touchdown panorama features (one `<panoid>.npy` per panorama, [H, W, C],
e.g. 100 x 464 x 128 ResNet18 slices; see BUILD.md) for this project's readers:

- the navigation features, in the official column convention (`ttw_jax.touchdown.features`:
  the crop applies the official `navigator.py` roll, so the files are not rotated here),
  written as the `.npz` that `--config.data.features` takes: with --layout=rows (default)
  every graph panorama's map averaged over its image rows, [N, W, C], for
  `model.image_encoder=table`; with --layout=images the maps averaged over their channels,
  [N, H, W, 1], for `model.image_encoder=official` (configs/paper.py); with --layout=rgb the
  RGB bands of `experiments.touchdown_sdr.extract_features --rgb_dir` ([N, 84, 504, 3] uint8,
  column 0 at yaw - 180: the "centred" convention) for `model.image_encoder=rgb`
  (configs/rgb.py, Table 7);
- with --sdr_dir, the SDR builder's feature files: `<sdr_dir>/features/<panoid>.npy` links to
  the official files (the SDR task reads the panoramas as released: its gold locations are
  relative to the stored image).

  python -m experiments.touchdown_nav.convert_features --official_dir=<dir of <panoid>.npy> \
      --graph_dir=../shared/data/touchdown/graph --out=/data/touchdown_nav_features.npz \
      [--layout=images] [--sdr_dir=<the SDR manual dir, beside the record files>]
"""
import os

from absl import app, flags

from ttw_jax.touchdown import features as pano_features
from ttw_jax.touchdown.graph import load_touchdown_graph

flags.DEFINE_string("official_dir", None, "Directory of the official `<panoid>.npy` features.")
flags.DEFINE_string("graph_dir", None, "Touchdown graph directory (nodes.txt, links.txt).")
flags.DEFINE_string("out", None, "Navigation table to write (.npz).")
flags.DEFINE_string("sdr_dir", "", "Also link the files into <sdr_dir>/features/ for SDR.")
flags.DEFINE_enum("layout", "rows", list(pano_features.LAYOUTS),
                  "rows: [N, W, C] row means; images: [N, H, W, 1] channel means; rgb: the "
                  "RGB bands [N, H, W, 3] uint8 as written.")


def convert(official_dir: str, graph_dir: str, out: str, sdr_dir: str = "",
            layout: str = "rows") -> int:
    """Writes the navigation features (and the SDR links); returns the number of panoramas."""
    if layout == "rgb" and sdr_dir:
        raise ValueError("--sdr_dir links feature maps for SDR; RGB bands (--layout=rgb) are "
                         "for navigation only")
    _, nodes = load_touchdown_graph(graph_dir)
    table = pano_features.official_navigation_table(official_dir, nodes.ids, layout=layout)
    convention = "centred" if layout == "rgb" else "official"
    pano_features.write_navigation_table(out, nodes.ids, table, convention)
    if sdr_dir:
        target = os.path.join(sdr_dir, "features")
        os.makedirs(target, exist_ok=True)
        for name in sorted(os.listdir(official_dir)):
            link = os.path.join(target, name)
            if name.endswith(".npy") and not os.path.lexists(link):
                os.symlink(os.path.abspath(os.path.join(official_dir, name)), link)
    return len(nodes.ids)


def main(argv):
    del argv
    n = convert(flags.FLAGS.official_dir, flags.FLAGS.graph_dir, flags.FLAGS.out,
                flags.FLAGS.sdr_dir, flags.FLAGS.layout)
    print(f"wrote {flags.FLAGS.out}: {n} panoramas ({flags.FLAGS.layout})")


if __name__ == "__main__":
    flags.mark_flags_as_required(["official_dir", "graph_dir", "out"])
    app.run(main)
