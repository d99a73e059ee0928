"""Flax models (linen, pure `init`/`apply`)."""
