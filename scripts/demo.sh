#!/usr/bin/env bash
# The README's first command (`make demo`): segments and evaluates real data
# end to end. Until segtune ships its own pretrained default (see the issue
# tracker), it uses the DeepLabV3+ person model and CamVid images in
# ../shared/assets when they are there.
set -euo pipefail
bin=${1:-bin/segtune}
assets=${2:-../shared/assets}
model=$assets/models/deeplabv3plus_person_dynamic.onnx
camvid=$assets/data/camvid
out=out/demo

if [ ! -f "$model" ] || [ ! -d "$camvid" ]; then
  cat >&2 <<MSG
demo: no model and data set found under $assets.
Point SHARED at a folder holding models/deeplabv3plus_person_dynamic.onnx and
data/camvid (make demo SHARED=/path/to/assets), or run segtune on your own:
  $bin segment --model MODEL.onnx --input IMAGES/ --output OUT/ --overlay
MSG
  exit 1
fi

mkdir -p "$out"
echo "== segtune info"
"$bin" info "$model"
# Person = CamVid Pedestrian (9) + Bicyclist (10); 11 is Unlabelled.
# Images are upscaled 2x (to 721x961) because the model was trained on large people.
pre=(--scale 2 --multiple-of 8 --plus-one --value-scale 0.00784313725490196 --value-offset -1)
echo
echo "== segtune segment: 12 CamVid val images -> $out/masks (palette PNGs and overlays)"
mkdir -p "$out/images"
mapfile -t files < <(ls "$camvid/images/val") # no "| head": SIGPIPE under pipefail
for f in "${files[@]:0:12}"; do ln -sf "$(cd "$camvid/images/val" && pwd)/$f" "$out/images/$f"; done
"$bin" segment --model "$model" --input "$out/images" --output "$out/masks" --overlay "${pre[@]}"
echo
echo "== segtune eval: person IoU on CamVid val (101 images)"
"$bin" eval --model "$model" --images "$camvid/images/val" --masks "$camvid/masks/val" \
  --label-map '9,10:1;11:255;*:0' --class-names background,person "${pre[@]}"
