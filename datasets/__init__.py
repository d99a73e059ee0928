"""TFDS builders of ttw-jax, installed as the `ttw_datasets` package.

    import ttw_datasets.ttw_localization  # registers 'ttw_localization'
    import ttw_datasets.touchdown         # registers 'touchdown'
    import ttw_datasets.rxr               # registers 'rxr' (RxR, R2R, synthetic)
    import ttw_datasets.arramon           # registers 'arramon'
    import ttw_datasets.talk_the_walk     # registers 'talk_the_walk' (dialogues and maps)
"""
