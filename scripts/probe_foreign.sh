#!/usr/bin/env bash
# Runs segtune's commands on every model of the foreign-model corpus
# (scripts/gen_foreign_models.py) and prints a pass/fail table with the first
# error line of each failure.
#
#   scripts/probe_foreign.sh [SEGTUNE_BIN] [CORPUS_DIR] [WORK_DIR]
#
# Defaults: bin/segtune, testdata/generated/foreign, a fresh mktemp -d.
# For each model: info --json; segment (4 synthetic images); eval (synthetic
# val; the synth_* models on the full 100-image val, their mIoU compared with
# the manifest's); artifacts --size HxW --batch 1; finetune --steps 2;
# export of its checkpoint. HxW is the model's fixed input size, else 64x64.
# The preprocessing the graph cannot tell (value range, mean/std, BGR) is
# passed as flags from the manifest; layout is not (segtune should read it
# from the graph) unless PROBE_HINTS=1, which also passes --nhwc for NHWC
# inputs. MODELS="a b" probes only those. Logs: WORK_DIR/logs/MODEL.CMD.log;
# the table is also written to WORK_DIR/results.md and results.tsv.
# Needs ONNX Runtime (ONNXRUNTIME_SHARED_LIBRARY_PATH or `make ort`) and jq-free
# python3 for reading the manifest.
set -uo pipefail

BIN=${1:-bin/segtune}
CORPUS=${2:-testdata/generated/foreign}
WORK=${3:-$(mktemp -d /tmp/probe-foreign.XXXXXX)}
TIMEOUT=${PROBE_TIMEOUT:-300}
PY=$(command -v python3)
mkdir -p "$WORK/logs"
[ -x "$BIN" ] || { echo "probe_foreign: no segtune binary at $BIN (make build)" >&2; exit 2; }
[ -f "$CORPUS/manifest.json" ] || { echo "probe_foreign: no $CORPUS/manifest.json (make foreign-models)" >&2; exit 2; }

# Data: a small synthetic set for every model, the default one for the synth_* models' mIoU.
SMALL=$WORK/data-small FULL=$WORK/data-full
[ -d "$SMALL/images/val" ] || "$BIN" -q data synth --out "$SMALL" --seed 1 --train 8 --val 4 >/dev/null || exit 2
[ -d "$FULL/images/val" ] || "$BIN" -q data synth --out "$FULL" --seed 1 >/dev/null || exit 2

# One line per model: name \t file \t preprocessing flags \t HxW \t layout \t expected mIoU
models_tsv() {
  "$PY" - "$CORPUS/manifest.json" "${MODELS:-}" "${PROBE_HINTS:-0}" "$(pwd)/models/segtune-synth.onnx" <<'EOF'
import json, os, sys
man = json.load(open(sys.argv[1]))
m = man["models"]
only = sys.argv[2].split()
if os.path.exists(sys.argv[4]) and (not only or "control_segtune_synth" in only):
    # The original pretrained model, as a control for the synth_* rewrites.
    print("\t".join(["control_segtune_synth", sys.argv[4], "--value-scale 0.00784313725490196 --value-offset -1",
                     "64x64", "NCHW", str(man.get("synth_val_miou_of_base", ""))]))
for name, e in m.items():
    if only and name not in only:
        continue
    inp = e["inputs"][0]
    shp, lay = inp["shape"], inp["layout"]
    h, w = (shp[1], shp[2]) if lay == "NHWC" else (shp[2], shp[3])
    size = f"{h}x{w}" if h and w else "64x64"
    flags = list(e["preprocess"].get("segtune_flags", []))
    if sys.argv[3] == "1" and lay == "NHWC":
        flags.append("--nhwc")
    miou = e.get("pretrained", {}).get("expected_val_miou", "")
    print("\t".join([name, e["file"], " ".join(flags), size, lay, str(miou)]))
EOF
}

first_error() {  # the first line of a log that looks like an error, else its last line
  local l
  l=$(grep -m1 -iE 'error|fail|panic|invalid|cannot|unsupported|not supported|mismatch|want|expected' "$1")
  [ -n "$l" ] || l=$(grep -v '^\s*$' "$1" | tail -n1)
  echo "${l:0:300}" | tr '\t' ' '
}

declare -a ROWS
run() {  # run NAME CMD LOGFILE ARGS...: prints PASS or FAIL: first error line
  local log=$1; shift
  if timeout "$TIMEOUT" nice "$@" >"$log" 2>&1; then
    echo PASS
  else
    echo "FAIL (rc $?): $(first_error "$log")"
  fi
}

printf '| model | info | segment | eval | artifacts | finetune | export |\n|---|---|---|---|---|---|---|\n' >"$WORK/results.md"
: >"$WORK/results.tsv"
while IFS=$'\t' read -r name file flags size layout want; do
  M=$CORPUS/$file
  [[ $file == /* ]] && M=$file
  L=$WORK/logs/$name O=$WORK/out/$name
  rm -rf "$O"; mkdir -p "$O"
  # shellcheck disable=SC2086
  {
    r_info=$(run "$L.info.log" "$BIN" -q info --json "$M")
    r_seg=$(run "$L.segment.log" "$BIN" -q segment --model "$M" --input "$SMALL/images/val" --output "$O/seg" $flags)
    data=$SMALL
    [ -n "$want" ] && data=$FULL
    r_eval=$(run "$L.eval.log" "$BIN" -q eval --model "$M" --images "$data/images/val" --masks "$data/masks/val" --json $flags)
    if [ "$r_eval" = PASS ]; then
      got=$("$PY" -c 'import json,sys; print("%.4f" % json.load(open(sys.argv[1]))["mean_iou"])' "$L.eval.log" 2>/dev/null)
      r_eval="PASS mIoU=$got"
      if [ -n "$want" ] && [ -n "$got" ] && ! "$PY" -c "import sys; sys.exit(abs($got-$want) > 0.0015)"; then
        r_eval="WRONG mIoU=$got (want $want)"
      fi
    fi
    r_art=$(run "$L.artifacts.log" "$BIN" -q artifacts --model "$M" --out "$O/art" --size "$size" --batch 1)
    r_ft=$(run "$L.finetune.log" "$BIN" -q finetune --model "$M" --data "$SMALL" --out "$O/ft" --steps 2 --epochs 1 \
      --batch 1 --crop "$size" --threads 2 $flags)
    if [ "$r_ft" = PASS ]; then  # the first step's loss and the validation mIoU: silent misreadings show here
      r_ft="PASS $("$PY" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steps = [r for r in rows if r.get("kind") == "step"]
ep = [r for r in rows if r.get("kind") == "epoch"]
out = ["loss1=%.3g" % steps[0]["loss"]] if steps else []
if ep and "val_miou" in ep[-1]:
    out.append("val_mIoU=%.4f" % ep[-1]["val_miou"])
print(" ".join(out))' "$O/ft/metrics.jsonl" 2>/dev/null)"
    fi
    ck=$O/ft/last.ckpt
    [ -f "$O/ft/best.ckpt" ] && ck=$O/ft/best.ckpt
    if [ -f "$ck" ]; then
      r_exp=$(run "$L.export.log" "$BIN" -q export --checkpoint "$ck" --out "$O/exported.onnx")
    else
      r_exp="SKIP (no checkpoint)"
    fi
  }
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$r_info" "$r_seg" "$r_eval" "$r_art" "$r_ft" "$r_exp" | tee -a "$WORK/results.md"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$r_info" "$r_seg" "$r_eval" "$r_art" "$r_ft" "$r_exp" >>"$WORK/results.tsv"
done < <(models_tsv)
echo "probe_foreign: logs and results in $WORK" >&2
