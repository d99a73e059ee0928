"""Talk The Walk localization windows (`ttw_localization`)."""
from ttw_datasets.ttw_localization.ttw_localization_dataset_builder import Builder, load_windows

__all__ = ["Builder", "load_windows"]
