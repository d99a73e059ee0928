"""The trainer library: data-parallel jit steps over a (`data`,) mesh, the training loop with early
stopping, orbax checkpoints, process-0 logging, the run directory and the absl launcher."""
