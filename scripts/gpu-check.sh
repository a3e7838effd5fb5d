#!/usr/bin/env bash
# The GPU acceptance of segtune's training path in one command (`make
# gpu-check`): on a machine with one NVIDIA GPU, PyTorch and the CUDA build of
# ONNX Runtime, it times the training step of segtune against PyTorch eager on
# the same DeepLabV3+ models (MobileNetV2 and ResNet-18 from
# scripts/gen_torch_models.py), batches, input size and precision; samples
# the GPU memory of each process; checks the CUDA gradients against the CPU
# and float64; and writes OUT/results.jsonl (one JSON object a run),
# OUT/results.json and OUT/results.md (bench/gpu/report.py).
#
#   scripts/gpu-check.sh [--full] [--device cuda|cpu] [--quick] [--out DIR]
#                        [--bin DIR] [--python PY] [--budget SECONDS]
#                        [--models a,b] [--batches 8,16] [--per-run SECONDS]
#                        [--camvid DIR]
#
# Two modes. Levers (the default, about 6 minutes on an H200): segtune's
# resident step at TF32, batch 8, 512², with and without ConvGrad per
# convolution class (none, all, all but depthwise, then each class alone)
# and with and without CUDA graphs, beside PyTorch eager at fp32, TF32,
# fp16 and bf16; the fastest variant again at batch 16 and in fp16/bf16
# where the budget allows; the profile of the fastest variant; the
# gradient error against float64 at each precision (ConvGrad off and on)
# beside PyTorch's; a fine-tune with --cuda-graph and segment against bare
# ONNX Runtime (with --camvid); the CUDA-vs-CPU gradient test and nodediff.
# --full: the whole precision matrix of the 2026-11-27 run (fp32 and TF32 at
# batches 8 and 16, fp16 and bf16 with the NHWC and heuristic-search
# variants) and the two-epoch fine-tune against PyTorch's.
#
# --device cpu --quick is the dry run that CI makes (tiny sizes, one model,
# fp32): every path of the levers mode runs, so it cannot rot where no GPU
# is (CUDA graphs are then ignored with a line, and --convgrad runs
# ConvGrad's CPU kernel).
# --bin names a folder holding prebuilt trainstep, grad.test, nodediff,
# graderr, segtune and segment (a GPU machine without Go); without it they
# are built into a temp folder.
# Each run has its own time limit, a failed run is recorded and the rest go
# on; --budget (default 180 s levers, 240 s full) stops starting new step
# runs once spent (the profile, the fine-tune and the gradient checks,
# about two minutes, still run), so the whole check fits one call of a lent
# GPU machine.
set -uo pipefail

device=cuda quick="" out=bench/gpu bin="" py=${PYTHON:-python3} budget="" full=""
while [ $# -gt 0 ]; do
  case "$1" in
    --full) full=1; shift ;;
    --device) device=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --out) out=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --python) py=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --models) only_models=$2; shift 2 ;;
    --batches) only_batches=$2; shift 2 ;;
    --per-run) only_per_run=$2; shift 2 ;;
    --camvid) camvid=$2; shift 2 ;;
    *) echo "usage: $0 [--full] [--device cuda|cpu] [--quick] [--out DIR] [--bin DIR] [--python PY] [--budget S] [--models a,b] [--batches 8,16] [--per-run S] [--camvid DIR]" >&2; exit 2 ;;
  esac
done
case "$device" in cuda|cpu) ;; *) echo "gpu-check: --device $device: want cuda or cpu" >&2; exit 2 ;; esac
[ -n "$quick" ] && [ -z "$budget" ] && budget=1000000 # the dry run runs every path
[ -n "$budget" ] || budget=$([ -n "$full" ] && echo 240 || echo 180)
cd "$(dirname "$0")/.."
mkdir -p "$out" || exit 1
jsonl=$out/results.jsonl
: >"$jsonl"
log=$out/gpu-check.log
: >"$log"
start=$SECONDS
say() { echo "gpu-check: $*" | tee -a "$log" >&2; }

if ! "$py" -c 'import torch' 2>/dev/null; then
  say "$py cannot import torch (set --python or PYTHON)"
  exit 1
fi

if [ -z "$bin" ]; then
  bin=$(mktemp -d)
  trap 'rm -rf "$bin"' EXIT
  say "building trainstep, grad.test, runtime.test, inference.test, nodediff, graderr, segtune and segment into $bin"
  go build -o "$bin/trainstep" ./bench/trainstep &&
    go test -c -o "$bin/grad.test" ./onnx/grad &&
    go test -c -o "$bin/runtime.test" ./runtime &&
    go test -c -o "$bin/inference.test" ./inference &&
    go build -o "$bin/nodediff" ./bench/gpu/nodediff &&
    go build -o "$bin/graderr" ./bench/gpu/graderr &&
    go build -o "$bin/segtune" ./cmd/segtune &&
    go build -o "$bin/segment" ./bench/segment || { say "build failed"; exit 1; }
fi
for b in trainstep grad.test runtime.test inference.test nodediff graderr segtune segment; do
  [ -x "$bin/$b" ] || { say "$bin/$b is missing"; exit 1; }
done
bin=$(cd "$bin" && pwd) out=$(cd "$out" && pwd) # the grad test runs in onnx/grad
steps_start=$SECONDS # --budget counts from here, not the build

# The step matrix: models, batches (the first is the levers' batch; the
# others where the budget allows), precisions (the first is the levers'),
# and halfs (mixed precision; PyTorch's marks, and segtune's fastest
# variant in levers mode). PyTorch's fp16 and the tf32 flag have no CPU form.
if [ -n "$quick" ]; then
  models=(mobilenetv2) batches=(2) size=64 steps=2 warmup=1 precisions=(fp32) halfs=() per_run=300
  ft_crop=96x128 ft_batch=4
elif [ -n "$full" ]; then
  models=(mobilenetv2 resnet18) batches=(8 16) size=512 steps=10 warmup=3 precisions=(fp32 tf32) halfs=(fp16 bf16) per_run=90
  ft_crop=240x320 ft_batch=8
else
  models=(mobilenetv2 resnet18) batches=(8 16) size=512 steps=10 warmup=3 precisions=(tf32 fp32) halfs=(fp16 bf16) per_run=60
  ft_crop=240x320 ft_batch=8
fi
# --models a,b / --batches 8,16 / --per-run S narrow the check when the
# lent machine's time is short.
[ -n "${only_models:-}" ] && IFS=, read -r -a models <<<"$only_models"
[ -n "${only_batches:-}" ] && IFS=, read -r -a batches <<<"$only_batches"
[ -n "${only_per_run:-}" ] && per_run=$only_per_run
gen=testdata/generated
for m in "${models[@]}"; do
  [ -s "$gen/deeplabv3plus_$m.onnx" ] || { say "$gen/deeplabv3plus_$m.onnx is missing (make torch-models)"; exit 1; }
done

# GPU memory: the peak of nvidia-smi's memory.used while a run lasts, less
# the reading before it, for segtune and PyTorch alike (the CUDA context
# included on both sides; torch's own max_memory_allocated is in its JSON).
gpu_sampler() {
  command -v nvidia-smi >/dev/null 2>&1 && [ "$device" = cuda ] || return 0
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 50 >"$1" 2>/dev/null &
  echo $!
}
gpu_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -n1; }

# run KIND LABEL CMD...: runs one measurement with a time limit, and appends
# its JSON (its whole output, or the last line of it that starts with "{")
# to the results with the label, the command's status, its wall seconds and
# the GPU memory peak.
run() {
  local kind=$1 label=$2; shift 2
  if [[ $kind = pytorch || $kind = segtune ]] && [ $((SECONDS - steps_start)) -ge "$budget" ]; then
    say "budget of ${budget}s spent: not running $label"
    printf '{"kind":"%s","label":"%s","status":"not run (budget)"}\n' "$kind" "$label" >>"$jsonl"
    return 1
  fi
  local o=$out/.run.out samples=$out/.gpu.samples base="" pid="" rc
  base=$(gpu_used 2>/dev/null || true)
  pid=$(gpu_sampler "$samples")
  local t0=$SECONDS
  timeout "$per_run" "$@" >"$o" 2>>"$log"
  rc=$?
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  local peak=""
  if [ -n "$pid" ] && [ -s "$samples" ] && [ -n "$base" ]; then
    peak=$(sort -n "$samples" | tail -n1)
    peak=$((peak - base))
  fi
  "$py" - "$kind" "$label" "$rc" "${peak:-}" "$((SECONDS - t0))" "$o" >>"$jsonl" <<'EOF'
import json, sys
kind, label, rc, peak, secs, path = sys.argv[1:]
text = open(path).read()
try:  # the whole output (segtune's indented --json), else its last JSON line
    r = json.loads(text)
except ValueError:
    r = {}
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                r = json.loads(line)
            except ValueError:
                pass
            break
if not isinstance(r, dict):
    r = {"output": r}
r.update(kind=kind, label=label, status="ok" if rc == "0" else f"exit {rc}", wall_s=int(secs))
if peak:
    r["gpu_peak_mib_smi"] = int(peak)
print(json.dumps(r))
EOF
  say "$label: $( [ "$rc" = 0 ] && echo ok || echo "exit $rc") in $((SECONDS - t0))s"
  [ "$rc" = 0 ]
}

# ts and tp set cmd to the trainstep or torch_step.py command for model m,
# batch b, precision p (timeout runs programs, not shell functions).
ts() {
  local m=$1 b=$2 p=$3; shift 3
  cmd=("$bin/trainstep" --model "$gen/deeplabv3plus_$m.onnx" --batch "$b" --size "$size" --threads 0
    --steps "$steps" --warmup "$warmup" --device "$device" --optim sgd --precision "$p" --json "$@")
}
tp() {
  cmd=("$py" bench/trainstep/torch_step.py --model "$1" --batch "$2" --size "$size" --steps "$steps"
    --warmup "$warmup" --device "$device" --precision "$3" --optim sgd --json)
}

# variant_args V sets va to trainstep's arguments for segtune variant V:
# resident (the baseline: im2col weight gradients, no graphs), cg-CLASSES
# (--convgrad CLASSES; cg-nodw: every class but depthwise) and +graph
# (--cuda-graph), e.g. cg-all+graph.
variant_args() {
  local v=$1
  va=(--resident)
  if [[ $v == *+graph ]]; then va+=(--cuda-graph); v=${v%+graph}; fi
  case $v in
    resident) ;;
    cg-nodw) va+=(--convgrad dense,pointwise,grouped) ;;
    cg-*) va+=(--convgrad "${v#cg-}") ;;
    *) say "unknown variant $v"; return 1 ;;
  esac
}
# step M B P V: segtune's step of variant V (and its result line).
step() {
  variant_args "$4" && ts "$1" "$2" "$3" "${va[@]}" && run segtune "$1 b$2 $3 $4" "${cmd[@]}"
}
# fastest M B P: the variant of the fastest segtune step of model M, batch
# B, precision P so far (resident when none succeeded).
fastest() {
  "$py" - "$jsonl" "$1 b$2 $3 " <<'EOF'
import json, sys
best = None
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("kind") == "segtune" and r.get("status") == "ok" and r["label"].startswith(sys.argv[2]) and r.get("median_ms"):
        if best is None or r["median_ms"] < best[0]:
            best = (r["median_ms"], r["label"].split()[-1])
print(best[1] if best else "resident")
EOF
}

say "device $device$( [ -n "$quick" ] && echo ' (quick)')$( [ -n "$full" ] && echo ' (full)'), models ${models[*]}, batches ${batches[*]}, ${size}x${size}"
# The device, named once for the report.
if [ "$device" = cuda ]; then
  name=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n1)
else
  name="CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
fi
say "${name:-unknown device}"
"$py" -c 'import json, sys; print(json.dumps({"kind": "device", "label": "device", "status": "ok", "device_name": sys.argv[1]}))' "${name:-unknown}" >>"$jsonl"

m0=${models[0]} b0=${batches[0]} p0=${precisions[0]}
if [ -n "$full" ]; then
  # 1. Training steps, one SGD-with-momentum update included on both sides.
  for m in "${models[@]}"; do
    for p in "${precisions[@]}"; do
      for b in "${batches[@]}"; do
        tp "$m" "$b" "$p" && run pytorch "$m b$b $p pytorch" "${cmd[@]}"
        step "$m" "$b" "$p" resident
      done
    done
    for p in "${halfs[@]}"; do # AMP: segtune's onnx/autocast, fp16 with a loss scale, bf16 at opset 22
      b=${batches[0]}
      tp "$m" "$b" "$p" && run pytorch "$m b$b $p pytorch" "${cmd[@]}"
      step "$m" "$b" "$p" resident
      # cuDNN's half-precision tensor-core kernels want channels last:
      # the CUDA provider's prefer_nhwc runs Conv in NHWC behind its own
      # layout transposes (PyTorch's channels_last is the like of it).
      ts "$m" "$b" "$p" --resident --cuda-opt prefer_nhwc=1 && run segtune "$m b$b $p resident-nhwc" "${cmd[@]}"
      # Where cuDNN's frontend finds no plan for a convolution, the default
      # exhaustive search ran again every step (H200, 2026-11-27: 2970 ms a
      # float16 step against 98 ms with the heuristic search).
      ts "$m" "$b" "$p" --resident --cuda-opt cudnn_conv_algo_search=HEURISTIC && run segtune "$m b$b $p resident-heuristic" "${cmd[@]}"
    done
  done
else
  # 1. The levers, most telling first, since the budget stops what is
  # left: per model, PyTorch's mark and segtune's step with ConvGrad for
  # no class, every class and every class but depthwise (the cuDNN kernel
  # of a depthwise backward-filter is the one most likely to lose to
  # im2col), each with and without CUDA graphs (the JSON's cuda_graph says
  # whether the session captured: ONNX Runtime refuses a graph with a node
  # on the CPU, such as Col2Im, and the step then runs without).
  for m in "${models[@]}"; do
    tp "$m" "$b0" "$p0" && run pytorch "$m b$b0 $p0 pytorch" "${cmd[@]}"
    vs=(resident resident+graph cg-all cg-all+graph cg-nodw cg-nodw+graph)
    [ "$m" = resnet18 ] && vs=("${vs[@]:0:4}") # no depthwise convolution: cg-nodw is cg-all
    [ -n "$quick" ] && vs=(resident cg-all+graph) # the dry run: each path once
    for v in "${vs[@]}"; do
      step "$m" "$b0" "$p0" "$v"
    done
  done
  # PyTorch's marks at the other precisions, on the same card.
  for p in "${precisions[@]:1}" "${halfs[@]}"; do
    for m in "${models[@]}"; do
      tp "$m" "$b0" "$p" && run pytorch "$m b$b0 $p pytorch" "${cmd[@]}"
    done
  done
  # Each class alone (without graphs), where the budget allows: which
  # class's ConvGrad gains or loses. Neither model has a grouped
  # convolution other than depthwise ones.
  for m in "${models[@]}"; do
    cls=(dense pointwise depthwise)
    [ "$m" = resnet18 ] && cls=(dense pointwise)
    [ -n "$quick" ] && cls=(depthwise) # the dry run: the path, once
    for c in "${cls[@]}"; do
      step "$m" "$b0" "$p0" "cg-$c"
    done
  done
  # The fastest variant at the larger batch and in mixed precision.
  for m in "${models[@]}"; do
    best=$(fastest "$m" "$b0" "$p0")
    for b in "${batches[@]:1}"; do
      tp "$m" "$b" "$p0" && run pytorch "$m b$b $p0 pytorch" "${cmd[@]}"
      step "$m" "$b" "$p0" "$best"
    done
    for p in "${halfs[@]}"; do
      step "$m" "$b0" "$p" "$best"
    done
  done
fi

# 2. Where segtune's step spends its time: ONNX Runtime's profile of the
# fastest resident step of the first model (levers mode; its CUDA graphs
# off, since a replayed graph has no nodes to profile) or of the resident
# fp32 step (full mode), kernel time per op type; CUDA_LAUNCH_BLOCKING
# makes the profiler's node times the GPU's. bench/gpu/report.py prints it
# per op type and per role (onnx/grad/roleprofile: forward, data/weight/bias
# gradient by convolution class, loss, optimiser, copies).
if [ -n "$full" ]; then pv=resident pp=fp32; else pv=$(fastest "$m0" "$b0" "$p0") pp=$p0; fi
pv=${pv%+graph}
variant_args "$pv" && ts "$m0" "$b0" "$pp" "${va[@]}" --steps 3 --warmup 2 --profile "$out/.prof" &&
  run profile "$m0 b$b0 $pp $pv profile" env CUDA_LAUNCH_BLOCKING=1 "${cmd[@]}"
rm -f "$out"/.prof*

# 3. Fine-tuning as a user runs it (with --camvid). Full mode: two epochs
# of segtune's CLI (resident state and TF32 by default on a GPU) against
# the PyTorch loop with the same recipe (AdamW 1e-4, weight decay 0.01,
# poly schedule with warm-up, scale 0.5-2, crop, flip, validation each
# epoch), wall time and val mIoU. Levers mode: segtune's two epochs with
# --cuda-graph, finetune's own path to the graphs (gpu-check.log has its
# line where they were not captured).
if [ -n "${camvid:-}" ]; then
  lm='9,10:1;11:255;*:0'
  rm -rf "$out/.ft-segtune" "$out/.ft-pytorch"
  ftv=segtune ftx=()
  [ -z "$full" ] && ftv=segtune-graph ftx=(--cuda-graph)
  run finetune "mobilenetv2 2 epochs $ftv" "$bin/segtune" finetune --model "$gen/deeplabv3plus_mobilenetv2.onnx" \
    --data "$camvid" --out "$out/.ft-segtune" --label-map "$lm" --class-names background,person \
    --value-scale 0.00784313725490196 --value-offset -1 --crop "$ft_crop" --batch "$ft_batch" --epochs 2 \
    --optimizer adamw --lr 1e-4 --weight-decay 0.01 --seed 1 --device "$device" --json "${ftx[@]}"
  if [ -n "$full" ]; then
    run finetune "mobilenetv2 2 epochs pytorch" "$py" bench/epoch/torch_epoch.py --data "$camvid" --out "$out/.ft-pytorch" \
      --model mobilenetv2 --label-map "$lm" --crop "$ft_crop" --batch "$ft_batch" --epochs 2 --lr 1e-4 \
      --weight-decay 0.01 --workers 4 --threads 4 --seed 1 --device "$device" --json
  fi
  rm -rf "$out/.ft-segtune" "$out/.ft-pytorch"
  # segment as a user runs it (decode, infer, write masks) against a bare
  # ONNX Runtime loop on the same prepared tensors (bench/segment).
  run segment "mobilenetv2 segment" "$bin/segment" -model "$gen/deeplabv3plus_mobilenetv2.onnx" \
    -images "$camvid/images/val" -n 32 -batch "$ft_batch" -runs 3 -device "$device" -json
fi

# 4. Gradients: CUDA against the CPU and PyTorch's float64 (onnx/grad's
# test, which logs RESULT lines), PyTorch's own error at the same precision,
# and the node-by-node comparison that locates where CUDA departs.
if [ "$device" = cuda ]; then
  # Where the inference and training graphs' nodes run (segtune doctor
  # reads ORT's profile): a node on the CPU costs two copies a step.
  run doctor "mobilenetv2 doctor placement" "$bin/segtune" doctor --model "$gen/deeplabv3plus_mobilenetv2.onnx" --size 512x512 --json
  run gradcheck "grad test" env SEGTUNE_TORCH_PYTHON="$py" SEGTUNE_REQUIRE_GPU=1 \
    bash -c "cd onnx/grad && '$bin/grad.test' -test.run 'TestTrainingStepCUDAMatchesCPU' -test.v 2>&1 | tee '$out/gradcheck.log' | grep -E '^(---|\s+\S+\.go:[0-9]+: (RESULT|.*relative error))' >&2; st=\${PIPESTATUS[0]}; printf '{\"test_exit\":%s}\n' \$st; exit \$st"
  # ConvGrad's cuDNN kernel against its CPU kernel (the provider's handle,
  # stream and scratch memory; fp32, TF32 off, both searches), and the
  # labels arg-maxed in segment's graph on CUDA against the host's.
  run cudakernels "ConvGrad cuDNN vs CPU kernel" env SEGTUNE_REQUIRE_GPU=1 \
    bash -c "cd runtime && '$bin/runtime.test' -test.run 'TestConvGradCUDA' -test.v 2>&1 | tee '$out/convgrad-cuda.log' | grep -E '^(---|ok|FAIL)' >&2; st=\${PIPESTATUS[0]}; printf '{\"test_exit\":%s}\n' \$st; exit \$st"
  run cudakernels "segment labels in the graph on CUDA" env SEGTUNE_REQUIRE_GPU=1 \
    bash -c "cd inference && '$bin/inference.test' -test.run 'TestGraphLabelsOnCUDA' -test.v 2>&1 | tee '$out/labels-cuda.log' | grep -E '^(---|ok|FAIL)' >&2; st=\${PIPESTATUS[0]}; printf '{\"test_exit\":%s}\n' \$st; exit \$st"
fi
# Per precision, on the same inputs and float64 reference: PyTorch's own
# gradient error and segtune's (bench/gpu/graderr, the graph finetune builds
# for the device; in levers mode also with ConvGrad for every class); the
# tolerance is segtune <= 2x PyTorch.
ref=$out/.grad-ref.npz
cgs=(none)
[ -z "$full" ] && cgs=(none all)
for p in "${precisions[@]}" "${halfs[@]}"; do
  io=(--load-inputs "$ref")
  [ -s "$ref" ] || io=(--save-inputs "$ref")
  run torchgrad "mobilenetv2 torch grad error $p" "$py" bench/gpu/torch_grad_error.py --model mobilenetv2 \
    --batch 2 --size 128 --device "$device" --precision "$p" "${io[@]}"
  for cg in "${cgs[@]}"; do
    [ -s "$ref" ] && run graderr "mobilenetv2 segtune grad error $p convgrad-$cg" "$bin/graderr" \
      --model "$gen/deeplabv3plus_mobilenetv2.onnx" --inputs "$ref" --device "$device" --precision "$p" --convgrad "$cg"
  done
done
rm -f "$ref"
nd=(--model "$gen/deeplabv3plus_mobilenetv2.onnx" --batch 2 --size "$([ -n "$quick" ] && echo 64 || echo 128)" --device "$device" --top 25)
run nodediff "mobilenetv2 nodediff" bash -c "'$bin/nodediff' $(printf "%q " "${nd[@]}") --json '$out/nodediff.json' >'$out/nodediff.txt' 2>&1; st=\$?; tail -n 60 '$out/nodediff.txt' >&2; printf '{\"exit\":%s}\n' \$st; exit \$st"

rm -f "$out/.run.out" "$out/.gpu.samples"
"$py" bench/gpu/report.py "$jsonl" --json "$out/results.json" --md "$out/results.md" || exit 1
say "done in $((SECONDS - start))s: $out/results.md"
cat "$out/results.md"
# Every run is to succeed (a dry run that cannot is a broken check); runs
# that the budget left out are not failures.
failed=$(grep -c '"status": "exit' "$jsonl" || true)
if [ "$failed" -gt 0 ]; then
  say "$failed runs failed (gpu-check.log has their errors)"
  exit 1
fi
