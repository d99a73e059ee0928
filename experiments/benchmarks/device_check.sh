#!/usr/bin/env bash
# The accelerator check, prepared for a lent GPU (or TPU) machine: under 8 minutes in all.
#
#   bash experiments/benchmarks/device_check.sh [OUT]      (OUT defaults to $OUT or /tmp/device_check)
#
# 1. `run_all` (every benchmark side by side; on an accelerator its simulator, RCM, MASC and
#    LingUNet rows run at the sizes it names) -> OUT/run_all.json, OUT/run_all.md;
# 2. each launcher's default config (synthetic data) for a bounded number of steps, float32 and
#    bfloat16, with a profile of two steps -> OUT/launchers/<name>_<dtype>/ (metrics.jsonl,
#    profile/); the language pipeline with every stage bounded the same way, one context, one
#    generated-guide T and no baselines -> OUT/launchers/ttw_language_<dtype>/<stage>/;
# 3. OUT/device_check.json: the run_all rows and, per launcher (and language stage) and dtype,
#    the training steps per second and the data wait per step
#    (`experiments.benchmarks.device_summary`).
# Each part has its own time limit (run_all 150 s, each launcher 20 s, the language pipeline 60 s:
# 470 s in all), so a slow or failing one leaves the others' results; a launcher stopped by its
# limit still has its logged steps (every 10).
set -u
OUT=${1:-${OUT:-/tmp/device_check}}
mkdir -p "$OUT/launchers"
cd "$(dirname "$0")/../.."
export TTW_JAX_COMPILATION_CACHE="$OUT/xla_cache"

timeout 150 python -m experiments.benchmarks.run_all --json="$OUT/run_all.json" \
    --out="$OUT/run_all.md" > "$OUT/run_all.log" 2>&1 || echo "run_all: exit $?" >> "$OUT/failures.txt"

STEPS="--config.num_steps=30 --config.eval_every=30 --config.log_every=10 --config.profile_steps=21,22"
for name in ttw_emergent touchdown_nav touchdown_sdr rxr arramon; do
  for dtype in float32 bfloat16; do
    dir="$OUT/launchers/${name}_${dtype}"
    timeout 20 python -m "experiments.${name}.main" --workdir="$dir" $STEPS \
        --config.dtype="$dtype" > "$dir.log" 2>&1 || echo "$name $dtype: exit $?" >> "$OUT/failures.txt"
  done
done

STAGE="num_steps=30 eval_every=30"
LANGUAGE="--config.contexts=1 --config.compare_masc=False --config.generated.Ts=2
  --config.generated.human_trajectories=False --config.pg.T=2 --config.log_every=10
  --config.profile_steps=21,22 --config.full_task.repeats=1 --config.full_task.splits=valid
  --config.eval.num_walks=256 --config.eval.beam_sizes=1"
for stage in tourist guide generated pg; do
  for kv in $STAGE; do LANGUAGE="$LANGUAGE --config.$stage.$kv"; done
done
for dtype in float32 bfloat16; do
  dir="$OUT/launchers/ttw_language_${dtype}"
  timeout 60 python -m experiments.ttw_language.main --workdir="$dir" $LANGUAGE \
      --config.dtype="$dtype" > "$dir.log" 2>&1 || echo "ttw_language $dtype: exit $?" >> "$OUT/failures.txt"
done
python -m experiments.benchmarks.device_summary --out="$OUT" > "$OUT/device_check.json"
cat "$OUT/device_check.json"
