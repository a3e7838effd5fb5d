#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs on a lent GPU machine that has no Go,
# no registry and takes 64 MiB a call (the working tree included): the CUDA
# build of ONNX Runtime (`make ort-cuda`), the stripped check binaries
# (trainstep, grad.test, nodediff) and the generated models without their
# weights (bench/gpu/weights.py strip; refilled there from PyTorch), as one
# tar split into parts of at most PART bytes under .gpu/ (which
# .git/info/exclude must ignore). Send each part in its own call with
# `carry: [".gpu/partNN"]` and `mv .gpu/partNN /tmp/` there, back to back
# while the machine is warm; the last call runs scripts/gpu-unpack.sh.
#
#   scripts/gpu-pack.sh [PART]     (default 50M)
set -euo pipefail
cd "$(dirname "$0")/.."
part=${1:-50M}
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
ort=$(scripts/install-ort.sh --cuda | tail -n1)
make -s torch-models
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/models" "$stage/ort"
ld=(-trimpath -ldflags=-s\ -w)
go build "${ld[@]}" -o "$stage/bin/trainstep" ./bench/trainstep
go build "${ld[@]}" -o "$stage/bin/nodediff" ./bench/gpu/nodediff
go test -c "${ld[@]}" -o "$stage/bin/grad.test" ./onnx/grad
for m in mobilenetv2 resnet18; do
  /usr/bin/python3 bench/gpu/weights.py strip "testdata/generated/deeplabv3plus_$m.onnx" "$stage/models/deeplabv3plus_$m.onnx" >/dev/null
done
cp "$(dirname "$ort")"/lib*.so* "$stage/ort/"
rm -rf .gpu
mkdir -p .gpu
tar -C "$stage" -cf - bin models ort | xz -T0 -3 | split -b "$part" -d - .gpu/part
ls -l .gpu
