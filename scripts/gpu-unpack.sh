#!/usr/bin/env bash
# On the lent GPU machine: joins the parts that scripts/gpu-pack.sh made (in
# /tmp/part*), unpacks them into /tmp/g, refills the models' weights from
# PyTorch, and runs scripts/gpu-check.sh with the CUDA build of ONNX Runtime;
# its arguments go to gpu-check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
g=/tmp/g
rm -rf "$g"
mkdir -p "$g"
cat /tmp/part* | xz -d | tar -C "$g" -xf -
export ONNXRUNTIME_SHARED_LIBRARY_PATH=$g/ort/libonnxruntime.so.1
py=${PYTHON:-python3} # the Python with PyTorch (the lent machine's python3)
mkdir -p testdata/generated
for m in mobilenetv2 resnet18; do
  "$py" bench/gpu/weights.py fill "$g/models/deeplabv3plus_$m.onnx" "testdata/generated/deeplabv3plus_$m.onnx" --model "$m"
done
camvid=()
[ -d "$g/camvid" ] && camvid=(--camvid "$g/camvid")
exec scripts/gpu-check.sh --bin "$g/bin" "${camvid[@]}" "$@"
