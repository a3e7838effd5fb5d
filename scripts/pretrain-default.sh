#!/usr/bin/env bash
# Reproduces models/segtune-synth.onnx, the default model embedded in segtune:
# the small DeepLabV3+ of `segtune model new`, trained from scratch on the
# synthetic data set of `segtune data synth` (seed 1). About 6 minutes on two
# CPU cores. Usage: scripts/pretrain-default.sh [bin/segtune]
set -euo pipefail
bin=${1:-bin/segtune}
work=out/pretrain
rm -rf "$work"
mkdir -p "$work"
"$bin" data synth --out "$work/data" --seed 1 --train 300 --val 100
"$bin" model new --out "$work/init.onnx" --classes 3 --width 0.5 --seed 1
"$bin" finetune --model "$work/init.onnx" --data "$work/data" --out "$work/run" \
  --crop 96x128 --batch 8 --epochs 12 --optimizer adam --lr 3e-3 --schedule poly:0.9 \
  --scale-min 0.75 --scale-max 1.25 --seed 1 --class-names background,disc,square
cp "$work/run/model.onnx" models/segtune-synth.onnx
echo "wrote models/segtune-synth.onnx"
