"""Landmark classification from per-view features (Talk The Walk, App. F)."""
