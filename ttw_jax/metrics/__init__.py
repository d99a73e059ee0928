"""Navigation metrics: sequence primitives, Touchdown (TC, SPD, SED) and R2R/RxR path metrics.

Batched functions are jittable JAX on padded arrays; the `*_np` twins are plain reference
versions for evaluation reports.
"""
from ttw_jax.metrics.r2r import path_metrics, path_metrics_np
from ttw_jax.metrics.sequence import (dedup_consecutive, dedup_consecutive_np, dtw, dtw_np,
                                      levenshtein, levenshtein_np)
from ttw_jax.metrics.touchdown import (hop_distance_np, sed_np, shortest_path_distance,
                                       success_weighted_edit_distance, task_completion,
                                       task_completion_np, touchdown_metrics,
                                       touchdown_metrics_np)

__all__ = [
    "dedup_consecutive", "dedup_consecutive_np", "dtw", "dtw_np", "hop_distance_np",
    "levenshtein", "levenshtein_np", "path_metrics", "path_metrics_np", "sed_np",
    "shortest_path_distance", "success_weighted_edit_distance", "task_completion",
    "task_completion_np", "touchdown_metrics", "touchdown_metrics_np",
]
