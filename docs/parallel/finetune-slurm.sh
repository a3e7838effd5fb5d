#!/usr/bin/env bash
# Data-parallel fine-tuning on a Slurm cluster: 8 MPI ranks on 2 nodes, each
# rank with 8 cores and a share of every step's images. Submit with
#
#   sbatch docs/parallel/finetune-slurm.sh
#
# Needs on every node: bin/segtune-mpi (make build-mpi, against the
# cluster's OpenMPI), ONNX Runtime (make ort, or ONNXRUNTIME_SHARED_LIBRARY_PATH),
# the model and the data at the same paths (a shared file system, or
# s3:// / gs:// URLs, which every rank mirrors into its cache). Only rank 0
# writes --out; put it on a shared file system to read it from the login node.
#SBATCH --job-name=segtune-finetune
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --time=04:00:00
#SBATCH --output=%x-%j.log
set -euo pipefail

SEGTUNE=${SEGTUNE:-$PWD/bin/segtune-mpi}
DATA=${DATA:-$PWD/data/camvid}
OUT=${OUT:-$PWD/runs/person-mpi}

# Each rank gets --cpus-per-task cores (Slurm binds them), and segtune gives
# ONNX Runtime as many threads; --threads overrides.
# --batch is per rank: a step trains on 8 × 4 = 32 images, the batches one
# process with --batch 32 would draw (same --seed, same augmentation).
# srun must connect the ranks through PMIx (or pmi2: see `srun --mpi=list`);
# without --mpi every task would start alone, which segtune refuses.
srun --mpi=pmix "$SEGTUNE" finetune \
  --model deeplabv3plus-person-dynamic --data "$DATA" --out "$OUT" \
  --label-map '9,10:1;11:255;*:0' \
  --crop 240x320 --batch 4 --epochs 9 --lr 2e-4 --alpha 0.01

# A job that ran out of time or was cancelled (scancel sends SIGTERM: the
# ranks stop at the same step and rank 0 saves last.ckpt) continues with the
# same number of ranks:
#   srun --mpi=pmix "$SEGTUNE" finetune --out "$OUT" --resume
