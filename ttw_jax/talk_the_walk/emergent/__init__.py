"""Localization with emergent communication: continuous and discrete tourist/guide pairs."""
