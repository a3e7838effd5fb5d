#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs on a lent GPU machine that has no Go,
# no registry and takes 64 MiB a call (the working tree included): the CUDA
# build of ONNX Runtime (`make ort-cuda`), the stripped check binaries
# (trainstep, grad.test, runtime.test, inference.test, nodediff, graderr, segtune, segment), the generated models without
# their weights (bench/gpu/weights.py strip; refilled there from PyTorch) and
# a CamVid subset for the two-epoch fine-tune (SHARED/data/camvid: the first
# 96 training and 32 validation images as JPEG, their masks as they are), as
# one tar split into equal parts of at most PART bytes under .gpu/ (which
# git's info/exclude must ignore): 52M makes four parts of about 54 MB,
# which with the 10.5 MB working tree stay under a call's 64 MiB. Send each part in its own call with
# `carry: [".gpu/partNN"]` and `mv .gpu/partNN /tmp/` there, back to back
# while the machine is warm; the last call runs scripts/gpu-unpack.sh.
#
#   scripts/gpu-pack.sh [PART [SHARED]]     (default 52M, ../shared/assets)
set -euo pipefail
cd "$(dirname "$0")/.."
part=${1:-52M}
shared=${2:-../shared/assets}
exclude=$(git rev-parse --git-path info/exclude) # .git is a file in a worktree
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
ort=$(scripts/install-ort.sh --cuda | tail -n1)
make -s torch-models
stage=$(mktemp -d) packed=$(mktemp)
trap 'rm -rf "$stage" "$packed"' EXIT
mkdir -p "$stage/bin" "$stage/models" "$stage/ort"
ld=(-trimpath -ldflags=-s\ -w)
go build "${ld[@]}" -o "$stage/bin/trainstep" ./bench/trainstep
go build "${ld[@]}" -o "$stage/bin/nodediff" ./bench/gpu/nodediff
go build "${ld[@]}" -o "$stage/bin/graderr" ./bench/gpu/graderr
go test -c "${ld[@]}" -o "$stage/bin/grad.test" ./onnx/grad
go test -c "${ld[@]}" -o "$stage/bin/runtime.test" ./runtime
go test -c "${ld[@]}" -o "$stage/bin/inference.test" ./inference
go build "${ld[@]}" -o "$stage/bin/segtune" ./cmd/segtune
go build "${ld[@]}" -o "$stage/bin/segment" ./bench/segment
if [ -d "$shared/data/camvid/images/train" ]; then
  /usr/bin/python3 - "$shared/data/camvid" "$stage/camvid" <<'EOF'
import os, shutil, sys
from PIL import Image
src, dst = sys.argv[1:]
for split, n in (("train", 96), ("val", 32)):
    os.makedirs(f"{dst}/images/{split}"); os.makedirs(f"{dst}/masks/{split}")
    for name in sorted(os.listdir(f"{src}/images/{split}"))[:n]:
        stem = os.path.splitext(name)[0]
        Image.open(f"{src}/images/{split}/{name}").convert("RGB").save(f"{dst}/images/{split}/{stem}.jpg", quality=90)
        shutil.copy(f"{src}/masks/{split}/{name}", f"{dst}/masks/{split}/{stem}.png")
EOF
else
  echo "gpu-pack: no CamVid under $shared/data/camvid: the check will skip the fine-tune" >&2
fi
for m in mobilenetv2 resnet18; do
  /usr/bin/python3 bench/gpu/weights.py strip "testdata/generated/deeplabv3plus_$m.onnx" "$stage/models/deeplabv3plus_$m.onnx" >/dev/null
done
cp "$(dirname "$ort")"/lib*.so* "$stage/ort/"
rm -rf .gpu
mkdir -p .gpu
tar -C "$stage" -cf - $(cd "$stage" && ls) | xz -T0 -3 >"$packed"
# As few parts as PART allows, of equal size (split -b would leave the
# last one small and the others at the limit).
max=$(numfmt --from=iec "$part") size=$(stat -c %s "$packed")
split -n $(((size + max - 1) / max)) -d "$packed" .gpu/part
ls -l .gpu
