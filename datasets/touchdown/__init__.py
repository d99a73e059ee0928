"""Touchdown navigation and SDR examples (`touchdown`)."""
from ttw_datasets.touchdown.touchdown_dataset_builder import Builder, load_navigation, load_sdr

__all__ = ["Builder", "load_navigation", "load_sdr"]
