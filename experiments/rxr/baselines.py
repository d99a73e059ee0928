"""Moved: the baselines are a mode of the launcher (see `configs/baselines.py`)."""
import sys

if __name__ == "__main__":
    sys.exit("experiments.rxr.baselines is now `python -m experiments.rxr.main "
             "--config=experiments/rxr/configs/baselines.py --config.data.manual_dir=<r2r files> "
             "--config.data.connectivity_dir=<connectivity> --workdir=<dir>`")
