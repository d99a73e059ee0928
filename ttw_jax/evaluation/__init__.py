"""Evaluation: Bayes upper bounds and the full Talk The Walk task."""
