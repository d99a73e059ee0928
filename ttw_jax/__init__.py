"""ttw-jax: grounded-navigation agents (Talk The Walk, Touchdown, ArraMon, RxR) in JAX/Flax."""
__version__ = "0.1.0"
