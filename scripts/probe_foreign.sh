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
# inputs. "agree" is the pixel accuracy of a rewrite's labels against its
# source's (1.0 expected, except tf2onnx_*, whose Upsample grid differs from
# the source's; scripts/_ortcheck checks raw outputs). MODELS="a b" probes only those. Logs: WORK_DIR/logs/MODEL.CMD.log;
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

# One line per model, fields separated by \x1f (not a tab: read would merge empty fields): name, file,
# preprocessing flags, HxW, layout, expected mIoU, fixed HxW, reference model, its flags (the model the rewrite must agree with, label for label; empty if none)
models_tsv() {
  "$PY" - "$CORPUS/manifest.json" "${MODELS:-}" "${PROBE_HINTS:-0}" "$(pwd)/models/segtune-synth.onnx" <<'EOF'
import json, os, sys
man = json.load(open(sys.argv[1]))
m = man["models"]
only = sys.argv[2].split()
synth, corpus = sys.argv[4], os.path.dirname(os.path.abspath(sys.argv[1]))
synth_flags = "--value-scale 0.00784313725490196 --value-offset -1"
if os.path.exists(synth) and (not only or "control_segtune_synth" in only):
    # The original pretrained model, as a control for the synth_* rewrites.
    print("\x1f".join(["control_segtune_synth", synth, synth_flags, "64x64", "NCHW",
                     str(man.get("synth_val_miou_of_base", "")), "", "", ""]))
for name, e in m.items():
    if only and name not in only:
        continue
    inp = e["inputs"][0]
    shp, lay = inp["shape"], inp["layout"]
    h, w = (shp[1], shp[2]) if lay == "NHWC" else (shp[2], shp[3])
    fixed = f"{h}x{w}" if h and w else ""
    flags = list(e["preprocess"].get("segtune_flags", []))
    if sys.argv[3] == "1" and lay == "NHWC":
        flags.append("--nhwc")
    miou = e.get("pretrained", {}).get("expected_val_miou", "")
    ref = ref_flags = ""
    src = e.get("source_model", "")
    # A rewrite's labels must equal its source's, except where sigmoid decoding changes the labels.
    if src == "models/segtune-synth.onnx":
        ref, ref_flags = synth, synth_flags
    elif src and e["outputs"][0]["kind"] != "sigmoid" and os.path.splitext(src)[0] in m:
        ref = os.path.join(corpus, src)
        ref_flags = " ".join(m[os.path.splitext(src)[0]]["preprocess"].get("segtune_flags", []))
    print("\x1f".join([name, e["file"], " ".join(flags), fixed or "64x64", lay, str(miou), fixed, ref, ref_flags]))
EOF
}

first_error() {  # the first error of a log (with its indented continuation lines), else its last line
  "$PY" - "$1" <<'PYEOF'
import json, re, sys
text = open(sys.argv[1], errors="replace").read()
try:  # --json output: the first per-image failure
    j, _ = json.JSONDecoder().raw_decode(text.lstrip())
    if j.get("failures"):
        print(("%d of %d images failed; first: %s" % (j.get("failed", 0), j.get("images", 0),
               j["failures"][0].get("error", "")))[:400])
        sys.exit()
except ValueError:
    pass
lines = [l for l in text.splitlines() if l.strip() and not l.startswith("\x1b[")]  # ORT's own log lines
pick = next((i for i, l in enumerate(lines) if l.startswith("segtune")), None)
if pick is None:
    pick = next((i for i, l in enumerate(lines) if re.search(r"error|fail|panic|invalid", l, re.I)), len(lines) - 1)
msg = lines[pick] if lines else "(no output)"
for l in lines[pick + 1:pick + 4]:
    if l.startswith(" "):
        msg += " /" + l.rstrip()
print(msg[:400].replace("\t", " "))
PYEOF
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

printf '| model | info | segment | eval | agree | artifacts | finetune | export |\n|---|---|---|---|---|---|---|---|\n' >"$WORK/results.md"
: >"$WORK/results.tsv"
while IFS=$'\x1f' read -r name file flags size layout want fixed ref ref_flags; do
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
    # agree: pixel agreement of this model's labels with its source's (segment of the source, at the
    # rewrite's fixed size if it has one, scored as ground truth by eval)
    r_agree=-
    if [ -n "$ref" ]; then
      sz=()
      [ -n "$fixed" ] && sz=(--size "$fixed")
      r_ref=$(run "$L.ref.log" "$BIN" -q segment --model "$ref" --input "$data/images/val" --output "$O/ref" "${sz[@]}" $ref_flags)
      if [ "$r_ref" = PASS ]; then
        r_agree=$(run "$L.agree.log" "$BIN" -q eval --model "$M" --images "$data/images/val" --masks "$O/ref" --json $flags)
        [ "$r_agree" = PASS ] && r_agree="PASS pixel_acc=$("$PY" -c 'import json,sys; print("%.4f" % json.load(open(sys.argv[1]))["pixel_accuracy"])' "$L.agree.log" 2>/dev/null)"
      else
        r_agree="(reference failed: $(first_error "$L.ref.log"))"
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
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$r_info" "$r_seg" "$r_eval" "$r_agree" "$r_art" "$r_ft" "$r_exp" | tee -a "$WORK/results.md"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$r_info" "$r_seg" "$r_eval" "$r_agree" "$r_art" "$r_ft" "$r_exp" >>"$WORK/results.tsv"
done < <(models_tsv)
echo "probe_foreign: logs and results in $WORK" >&2
