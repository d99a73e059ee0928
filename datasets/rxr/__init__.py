"""RxR and R2R navigation instructions (`rxr`)."""
from ttw_datasets.rxr.rxr_dataset_builder import Builder, RxrConfig, load_rxr

__all__ = ["Builder", "RxrConfig", "load_rxr"]
