"""TFDS builders of ttw-jax, installed as the `ttw_datasets` package.

    import ttw_datasets.ttw_localization  # registers 'ttw_localization'
"""
