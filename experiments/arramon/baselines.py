"""Moved: the random walk is a mode of the launcher (see `configs/baselines.py`)."""
import sys

if __name__ == "__main__":
    sys.exit("experiments.arramon.baselines is now `python -m experiments.arramon.main "
             "--config=experiments/arramon/configs/baselines.py --config.data.manual_dir=<dir> "
             "--workdir=<dir>`")
