"""ArraMon navigation + assembly instances (`arramon`)."""
from ttw_datasets.arramon.arramon_dataset_builder import ArramonConfig, Builder, load_arramon

__all__ = ["ArramonConfig", "Builder", "load_arramon"]
