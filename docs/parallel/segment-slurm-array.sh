#!/usr/bin/env bash
# Sharded segmentation and evaluation as a Slurm job array: task K of the
# array segments and scores the images whose file names hash to shard K;
# a second job, started when every task has ended, merges the scores into
# the report one process would print.
#
#   sbatch docs/parallel/segment-slurm-array.sh
#
# segtune reads its shard from SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_MIN,
# SLURM_ARRAY_TASK_STEP and SLURM_ARRAY_TASK_COUNT (no --shard needed). A
# task that fails can be resubmitted alone (sbatch --array=K ...): it keeps
# the masks that check out and remakes the rest.
#SBATCH --job-name=segtune-segment
#SBATCH --array=0-7
#SBATCH --cpus-per-task=4
#SBATCH --time=02:00:00
#SBATCH --output=%x-%A_%a.log
set -euo pipefail

SEGTUNE=${SEGTUNE:-$PWD/bin/segtune}
MODEL=${MODEL:-deeplabv3plus-person-dynamic}
IMAGES=${IMAGES:-$PWD/data/camvid/images/val}
MASKS=${MASKS:-$PWD/data/camvid/masks/val}
LABEL_MAP=${LABEL_MAP:-9,10:1;11:255;*:0}   # CamVid masks -> person classes
OUT=${OUT:-$PWD/runs/segment}
mkdir -p "$OUT/partials"

"$SEGTUNE" segment --model "$MODEL" --input "$IMAGES" --output "$OUT/masks" --threads "${SLURM_CPUS_PER_TASK:-4}"
"$SEGTUNE" eval --model "$MODEL" --images "$IMAGES" --masks "$MASKS" \
  --label-map "$LABEL_MAP" --threads "${SLURM_CPUS_PER_TASK:-4}" \
  --partial "$OUT/partials/shard-${SLURM_ARRAY_TASK_ID}.json" >/dev/null

# The first task submits the merge, to run after the whole array has ended.
if [ "${SLURM_ARRAY_TASK_ID}" = "${SLURM_ARRAY_TASK_MIN:-0}" ] && [ -n "${SLURM_ARRAY_JOB_ID:-}" ]; then
  sbatch --dependency="afterok:${SLURM_ARRAY_JOB_ID}" --job-name=segtune-merge --output="$OUT/report.log" \
    --wrap "\"$SEGTUNE\" eval merge --json $OUT/partials/shard-*.json > $OUT/report.json"
fi
