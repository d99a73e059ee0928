"""TFDS builders of ttw-jax, installed as the `ttw_datasets` package. Importing it registers
every builder with TFDS:

    import ttw_datasets
    import tensorflow_datasets as tfds
    tfds.builder("touchdown/navigation", data_dir=...)

`ttw_localization` (Talk The Walk maps), `talk_the_walk` (dialogues and maps), `touchdown`
(navigation and SDR), `rxr` (RxR, R2R, synthetic) and `arramon`. Each writes ArrayRecord by
default, so building and reading need no TensorFlow.
"""
from ttw_datasets import arramon, rxr, talk_the_walk, touchdown, ttw_localization

__all__ = ["arramon", "rxr", "talk_the_walk", "touchdown", "ttw_localization"]
