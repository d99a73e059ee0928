#!/usr/bin/env bash
# The accelerator check for a lent GPU (or TPU) machine: `experiments/benchmarks/device_check.py`
# (its docstring lists the parts, their limits and OUT/device_check.json).
#
#   bash experiments/benchmarks/device_check.sh [OUT] [--data_dir=DIR] [--parts=...] [--smoke]
#
# On a machine where JAX sees no accelerator it stops in seconds with the install line.
set -u
if [[ $# -gt 0 && $1 != --* ]]; then OUT=$1; shift; else OUT=${OUT:-/tmp/device_check}; fi
cd "$(dirname "$0")/../.."
exec python -m experiments.benchmarks.device_check --out="$OUT" "$@"
