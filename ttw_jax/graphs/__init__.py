"""Panorama graphs compiled to padded device arrays (Touchdown Street View, Matterport3D)."""
