"""The trainer library shared by every experiment: data-parallel steps, checkpoints, logging."""
