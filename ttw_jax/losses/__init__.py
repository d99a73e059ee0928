"""Training objectives: `loss_fn(params, batch, rng) -> (loss, metrics)`."""
