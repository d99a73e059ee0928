"""The complete Touchdown task on synthetic routes: GA navigation, then LingUNet SDR at the stop.

Each stage is the corresponding experiment's run: `nav_workdir` / `sdr_workdir` name finished
runs of `experiments.touchdown_nav` / `experiments.touchdown_sdr` (their best parameters are
used); left empty, the stage is trained first with the `nav` / `sdr` sub-config into
`<workdir>/nav` / `<workdir>/sdr` (and resumes like those runs). With `data.views=synthetic`
every test route gets a synthetic SDR scene at its end (`data.scene_seed`, scenes the SDR run
never saw). On the real data use `configs/paper.py` (both stages on the release, and
`data.views=release`: the SDR run's own views of the split), or set `nav.data.tfds_config=
navigation`, `sdr.data.tfds_config=sdr` and `data.views=release` yourself, with the records and
feature files in `data.manual_dir` and `data.graph_dir` / `data.features` for navigation.

`dtype`, `profile_steps` and `num_devices` are the pipeline's, one for both stages (the
sub-configs have none): the stages trained here train and are evaluated in `dtype` on
`num_devices` and trace `profile_steps`; a finished run keeps its own.
"""
import ml_collections

from experiments.touchdown_nav.configs import default as nav_default
from experiments.touchdown_sdr.configs import default as sdr_default

# Keys of both stages set once for the pipeline (the top-level keys of the same names).
SHARED = ("dtype", "profile_steps", "num_devices")
# Config keys of earlier releases ({old: new key, or why it is gone}), as in the other launchers.
RENAMED_IN = "0.1.0"
RENAMED = {f"{stage}.{key}": f"{key} (one for both stages)"
           for stage in ("nav", "sdr") for key in ("dtype", "profile_steps")}


def stage_defaults(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """A stage's config (`nav` or `sdr`) without the keys the pipeline sets (`SHARED`)."""
    for key in SHARED:
        del config[key]
    return config


def get_config():
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.num_seeds = 1   # > 1: seeds seed .. seed + N - 1, in one program where the trainer allows
    c.num_devices = 0  # data-parallel over the first N devices of one process; 0: all devices
    c.nav_workdir = ""             # a finished navigation run; empty: train `nav` first
    c.sdr_workdir = ""             # a finished SDR run; empty: train `sdr` first
    c.nav = stage_defaults(nav_default.get_config())
    c.sdr = stage_defaults(sdr_default.get_config())
    c.dtype = "float32"   # or "bfloat16": both stages trained here (parameters, losses float32)
    c.profile_steps = ""   # "21,22": a jax.profiler trace of steps 21 to 22 of both stages

    c.data = ml_collections.ConfigDict()
    c.data.split = "test"          # a split of both the navigation and the SDR data
    c.data.views = "synthetic"     # synthetic scenes at the routes' ends | release (the SDR run's)
    c.data.scene_seed = 3          # synthetic scenes (synthetic_sdr's own splits use seeds 0-2)
    # Overrides of both stages' data paths where set (e.g. the real data's directories)
    c.data.tfds_dir = ""
    c.data.manual_dir = ""
    c.data.graph_dir = ""
    c.data.features = ""
    # True: synthetic perception (panorama features, data.views=synthetic scenes) with the
    # release's routes runs, its tables saying so (the navigation stage's flag too); False: refused
    c.data.allow_synthetic_perception = False

    c.eval = ml_collections.ConfigDict()
    c.eval.sdr_batch_size = 64
    c.write_plots = True
    c.num_panels = 6               # full_task.png: episodes that stopped where Touchdown is
    return c
