#!/usr/bin/env bash
# Links the first NTRAIN training and NVAL validation images of CamVid (and
# their masks) from SHARED/data/camvid into DIR, and prints the flag that
# gives scripts/gpu-check.sh that folder ("--camvid DIR"); prints nothing
# where the shared assets are missing, so the check skips its fine-tune.
#
#   scripts/camvid-subset.sh SHARED DIR NTRAIN NVAL
set -euo pipefail
src=$1/data/camvid dir=$2 ntrain=$3 nval=$4
[ -d "$src/images/train" ] || exit 0
for split in train val; do
  n=$ntrain
  [ "$split" = val ] && n=$nval
  mkdir -p "$dir/images/$split" "$dir/masks/$split"
  # No "| head": under pipefail, a writer cut off by head's exit (SIGPIPE,
  # status 141) would fail the script now and then.
  mapfile -t files < <(ls "$src/images/$split" | sort)
  for f in "${files[@]:0:n}"; do
    ln -s "$(cd "$src" && pwd)/images/$split/$f" "$dir/images/$split/$f"
    ln -s "$(cd "$src" && pwd)/masks/$split/$f" "$dir/masks/$split/$f"
  done
done
echo "--camvid $dir"
