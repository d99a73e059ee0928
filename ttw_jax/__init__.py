"""ttw-jax: grounded-navigation agents in JAX/Flax.

One package per system over a shared `core`: `talk_the_walk`, `touchdown`, `rxr` (Room-across-Room
and R2R) and `arramon`. A system imports `core` and itself, never another system.
"""
__version__ = "0.1.0"
