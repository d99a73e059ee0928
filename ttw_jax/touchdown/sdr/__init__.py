"""Touchdown spatial description resolution: LingUNet and its baselines, Gaussian/KL training,
accuracy at 40 / 80 / 120 px, synthetic feature-space scenes."""
