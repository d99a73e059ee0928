#!/usr/bin/env bash
# The accelerator check, prepared for a lent GPU (or TPU) machine: under 8 minutes in all.
#
#   bash experiments/benchmarks/device_check.sh [OUT]      (OUT defaults to $OUT or /tmp/device_check)
#
# 1. `run_all` (every benchmark side by side; on an accelerator its simulator, RCM, MASC and
#    LingUNet rows run at the sizes it names) -> OUT/run_all.json, OUT/run_all.md;
# 2. each launcher's default config (synthetic data) for a bounded number of steps, float32 and
#    bfloat16, with a profile of two steps -> OUT/launchers/<name>_<dtype>/ (metrics.jsonl,
#    profile/);
# 3. OUT/device_check.json: the run_all rows and, per launcher and dtype, the training steps per
#    second and the data wait per step (`experiments.benchmarks.device_summary`).
# Each part has its own time limit (run_all 200 s, each launcher 25 s: 450 s in all), so a slow or
# failing one leaves the others' results; a launcher stopped by its limit still has its logged
# steps (every 10).
set -u
OUT=${1:-${OUT:-/tmp/device_check}}
mkdir -p "$OUT/launchers"
cd "$(dirname "$0")/../.."
export TTW_JAX_COMPILATION_CACHE="$OUT/xla_cache"

timeout 200 python -m experiments.benchmarks.run_all --json="$OUT/run_all.json" \
    --out="$OUT/run_all.md" > "$OUT/run_all.log" 2>&1 || echo "run_all: exit $?" >> "$OUT/failures.txt"

STEPS="--config.num_steps=30 --config.eval_every=30 --config.log_every=10 --config.profile_steps=21,22"
for name in ttw_emergent touchdown_nav touchdown_sdr rxr arramon; do
  for dtype in float32 bfloat16; do
    dir="$OUT/launchers/${name}_${dtype}"
    timeout 25 python -m "experiments.${name}.main" --workdir="$dir" $STEPS \
        --config.dtype="$dtype" > "$dir.log" 2>&1 || echo "$name $dtype: exit $?" >> "$OUT/failures.txt"
  done
done
python -m experiments.benchmarks.device_summary --out="$OUT" > "$OUT/device_check.json"
cat "$OUT/device_check.json"
