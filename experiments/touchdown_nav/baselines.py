"""Moved: the baselines are a mode of the launcher (see `configs/baselines.py`)."""
import sys

if __name__ == "__main__":
    sys.exit("experiments.touchdown_nav.baselines is now `python -m experiments.touchdown_nav.main "
             "--config=experiments/touchdown_nav/configs/baselines.py "
             "--config.data.manual_dir=<records> --config.data.graph_dir=<graph> --workdir=<dir>`")
