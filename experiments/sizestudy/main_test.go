package main

import (
	"bytes"
	"encoding/json"
	"github.com/segtune/segtune/internal/stats"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPairedDiff(t *testing.T) {
	// Pairs only where both have the seed.
	d := pairedDiff(map[int]float64{1: 0.6, 2: 0.7, 3: 0.9}, map[int]float64{1: 0.5, 2: 0.5})
	if d.N != 2 || math.Abs(d.Mean-0.15) > 1e-12 {
		t.Fatalf("paired %+v, want 2 pairs, mean 0.15", d)
	}
}

func TestEvalScale(t *testing.T) {
	if s, err := evalScale("180x240"); err != nil || s != 0.5 {
		t.Errorf("180x240: %v, %v; want 0.5", s, err)
	}
	for _, bad := range []string{"180x180", "x240", "0x0", "big"} {
		if _, err := evalScale(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestExtraFlag(t *testing.T) {
	var e extraFlag
	if err := e.Set("kitti=/a/img:/a/msk"); err != nil || len(e) != 1 || e[0].Name != "extra_kitti" || e[0].Masks != "/a/msk" {
		t.Fatalf("%v, %v", e, err)
	}
	for _, bad := range []string{"kitti=/a/img:/a/msk", "noequals", "x=/only", "=/a:/b", "a b=/a:/b"} {
		if err := e.Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// fakeSegtune stands in for the segtune binary: finetune writes
// last.ckpt and metrics.jsonl (the training loss 3.5× the baseline's for
// α = 10, a collapse) and records its arguments; eval prints scores that
// depend on the run's α and c_λ (α = 1, c_λ = 1 best) and on the seed.
// FAKE_FAIL, when set, makes a fresh finetune stop after one epoch with
// an error, once; a rerun must resume it.
const fakeSegtune = `#!/bin/bash
log="$FAKE_LOG"
cmd=$1; shift
declare -A a
resume=0
while [ $# -gt 0 ]; do
  case $1 in
    --resume|--json|--balance) [ $1 = --resume ] && resume=1; shift;;
    --*) a[$1]=$2; shift 2;;
    *) shift;;
  esac
done
if [ "$cmd" = finetune ]; then
  out=${a[--out]}
  echo "finetune $out resume=$resume" >> "$log"
  if [ -f "$out/last.ckpt" ] && [ $resume = 0 ]; then echo "would overwrite" >&2; exit 3; fi
  if [ $resume = 1 ] && [ -n "${a[--model]}${a[--alpha]}${a[--size-classes]}" ]; then echo "resume with settings flags" >&2; exit 5; fi
  mkdir -p "$out"
  epochs=${a[--epochs]}
  if [ $resume = 0 ]; then
    alpha=${a[--alpha]:-0}; cl=${a[--c-lambda]:-0}; seed=${a[--seed]}
    echo "$alpha $cl $seed ${a[--projection]:-epoch}" > "$out/args"
  fi
  read alpha cl seed proj < "$out/args"
  loss=0.1; [ "$alpha" = 10 ] && loss=0.35
  start=1
  if [ $resume = 1 ]; then start=$(( $(grep -c epoch "$out/metrics.jsonl") + 1 )); else : > "$out/metrics.jsonl"; fi
  for e in $(seq $start $epochs); do
    echo "{\"kind\":\"epoch\",\"epoch\":$((e-1)),\"step\":$((e*10)),\"loss\":$loss,\"seconds\":2,\"size_f1_train\":0.8,\"reg_lambda_mean\":0.5,\"reg_lambda_max\":2,\"reg_eps_before\":0.01,\"reg_hinge_active\":0.2}" >> "$out/metrics.jsonl"
    touch "$out/last.ckpt"
    if [ -n "$FAKE_FAIL" ] && [ ! -f "$FAKE_FAIL" ]; then touch "$FAKE_FAIL"; echo killed >&2; exit 1; fi
  done
  exit 0
fi
if [ "$cmd" = eval ]; then
  run=$(dirname "${a[--model]}")
  read alpha cl seed proj < "$run/args"
  echo "eval $run ${a[--images]} scale=${a[--scale]}" >> "$log"
  iou=$(awk -v a=$alpha -v c=$cl -v s=$seed 'BEGIN{b=0.5; if(a==1&&c==1)b=0.6; else if(a>0)b=0.52; printf "%.4f", b+0.001*s}')
  small=$(awk -v x=$iou 'BEGIN{printf "%.4f", x-0.05}')
  echo "{\"mean_iou\":0.7,\"classes\":[{\"iou\":0.9},{\"iou\":$iou}],\"groups\":{\"small\":{\"classes\":[{\"iou\":0.9},{\"iou\":$small}]},\"large\":{\"classes\":[{\"iou\":0.9},{\"iou\":$iou}]}},\"images\":3,\"seconds\":0.1}"
  exit 0
fi
exit 4
`

func fakeAssets(t *testing.T, dir string) string {
	t.Helper()
	assets := filepath.Join(dir, "assets")
	touch := func(p string) {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	touch(filepath.Join(assets, "models", "deeplabv3plus_person_dynamic.onnx"))
	for _, f := range []string{"0016E5_001", "0016E5_002", "0016E5_003", "0001TP_001", "0001TP_002", "0006R0_001", "0006R0_002", "0006R0_003"} {
		touch(filepath.Join(assets, "data", "camvid", "images", "train", f+".png"))
		touch(filepath.Join(assets, "data", "camvid", "masks", "train", f+".png"))
	}
	for _, f := range []string{"0016E5_100", "0016E5_101"} {
		touch(filepath.Join(assets, "data", "camvid", "images", "val", f+".png"))
		touch(filepath.Join(assets, "data", "camvid", "masks", "val", f+".png"))
	}
	return assets
}

// The study end to end with a stand-in binary: sequences linked apart,
// every arm and seed trained and scored, the collapsed arm left out of the
// selection, the selected arm's --projection step variant and phase 2
// run, the tables written; an interrupted run resumes, and a rerun trains
// and scores nothing again.
func TestStudyWithFakeSegtune(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "segtune")
	if err := os.WriteFile(bin, []byte(fakeSegtune), 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "calls.log")
	t.Setenv("FAKE_LOG", logPath)
	t.Setenv("FAKE_FAIL", filepath.Join(dir, "failed-once"))
	var stderr bytes.Buffer
	assets := fakeAssets(t, dir)
	// An --extra folder: the val images under another name.
	extraImages, extraMasks := filepath.Join(assets, "data", "camvid", "images", "val"), filepath.Join(assets, "data", "camvid", "masks", "val")
	cfg := config{Out: filepath.Join(dir, "out"), Assets: assets, Bin: bin, Epochs: 3, Seeds1: 2, Seeds2: 3,
		Crop: "18x24", Batch: 2, Alphas: []string{"1", "10"}, CLambdas: []string{"0.1", "1"}, Phase: "all",
		Extra:        []dataSet{{Name: "extra_other", Images: extraImages, Masks: extraMasks}},
		EpochSeconds: 1, EvalSecondsPerImg: 0.1, Log: &stderr}
	if err := run(cfg); err == nil {
		t.Fatal("the first run was killed, yet the study went on")
	}
	if err := run(cfg); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	calls, _ := os.ReadFile(logPath)
	if !strings.Contains(string(calls), "baseline_s1 resume=1") {
		t.Errorf("the interrupted run was not resumed:\n%s", calls)
	}
	// Scored at the training view's scale: 18×24 of 360×480 frames.
	if evals, at := strings.Count(string(calls), "eval "), strings.Count(string(calls), "scale=0.05\n"); evals == 0 || at != evals {
		t.Errorf("%d of %d scorings at the training scale 0.05:\n%s", at, evals, calls)
	}
	// Sequences apart.
	for name, n := range map[string]int{"train_0016E5": 3, "select_0001TP": 2, "report_0006R0": 3, "val": 2} {
		es, err := os.ReadDir(filepath.Join(cfg.Out, "data", name, "images"))
		if err != nil || len(es) != n {
			t.Fatalf("%s: %d images (%v), want %d", name, len(es), err, n)
		}
	}
	raw, err := os.ReadFile(filepath.Join(cfg.Out, "selection.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sel selection
	if err := json.Unmarshal(raw, &sel); err != nil {
		t.Fatal(err)
	}
	if sel.Best != "a1_c1" || len(sel.Collapsed) != 2 {
		t.Fatalf("selection %+v: want a1_c1, with the two α = 10 arms collapsed", sel)
	}
	// 2 seeds × (baseline, paper, 4 grid arms, the step variant) + 3 seeds × 2.
	trains := strings.Count(string(calls), "finetune ")
	if want := 2*7 + 3*2 + 1; trains != want { // + the resumption
		t.Errorf("%d finetune calls, want %d:\n%s", trains, want, calls)
	}
	if _, err := os.Stat(filepath.Join(cfg.Out, "runs", "a1_c1_step_s2", "eval_report_0006R0.json")); err != nil {
		t.Error("the step variant was not run and scored")
	}
	tables, err := os.ReadFile(filepath.Join(cfg.Out, "tables.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Phase 2: the selected arm's person IoU is 0.1 above the baseline's
	// in every seed (0.600 + s/1000 vs 0.500 + s/1000).
	if !strings.Contains(string(tables), "| person IoU | 0.504 ± 0.001 | 0.604 ± 0.001 | +0.100 [+0.100, +0.100] | gain |") {
		t.Errorf("phase 2 table lacks the expected person IoU row:\n%s", tables)
	}
	if !strings.Contains(string(tables), "(selected)") || !strings.Contains(string(tables), "report sequence 0006R0") {
		t.Errorf("tables:\n%s", tables)
	}
	// Every run is scored on the extra folder, and phase 2 reports it.
	runs, _ := os.ReadDir(filepath.Join(cfg.Out, "runs"))
	for _, r := range runs {
		if _, err := os.Stat(filepath.Join(cfg.Out, "runs", r.Name(), "eval_extra_other.json")); err != nil {
			t.Errorf("run %s not scored on the extra folder: %v", r.Name(), err)
		}
	}
	if !strings.Contains(string(calls), "eval "+filepath.Join(cfg.Out, "runs", "baseline_s3")+" "+extraImages+" ") {
		t.Errorf("no scoring of baseline_s3 on %s:\n%s", extraImages, calls)
	}
	if !strings.Contains(string(tables), "extra folder other ("+extraImages+")") {
		t.Errorf("tables lack the extra folder:\n%s", tables)
	}
	for _, f := range []string{"results.json", "curves.png", "paired.png"} {
		if _, err := os.Stat(filepath.Join(cfg.Out, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	// A rerun trains and scores nothing.
	before := len(calls)
	if err := run(cfg); err != nil {
		t.Fatal(err)
	}
	calls, _ = os.ReadFile(logPath)
	if len(calls) != before {
		t.Errorf("the rerun called segtune again:\n%s", calls[before:])
	}
	// The plan counts nothing left.
	st, err := newStudy(config{Out: cfg.Out, Assets: cfg.Assets, Bin: bin, Crop: cfg.Crop, Epochs: 3, Seeds1: 2, Seeds2: 3, Alphas: cfg.Alphas, CLambdas: cfg.CLambdas, EpochSeconds: 1, EvalSecondsPerImg: 0.1, Plan: true})
	if err != nil {
		t.Fatal(err)
	}
	var plan bytes.Buffer
	st.estimate(&plan, st.storedBest())
	if !strings.Contains(plan.String(), "20 runs (0 left)") {
		t.Errorf("plan: %s", plan.String())
	}
}

// A higher training loss or gap is reported as "higher", not as a gain;
// a metric the baseline lacks (the size head's F1) is not paired.
func TestMetricVerdict(t *testing.T) {
	up := stats.TInterval([]float64{0.01, 0.012, 0.011})
	base := map[int]float64{1: 0.02}
	if v := mLoss.verdict(up, base, base); v != "higher" {
		t.Errorf("training loss up: %q", v)
	}
	if v := mIoU.verdict(up, base, base); v != "gain" {
		t.Errorf("IoU up: %q", v)
	}
	if v := mSizeF1.verdict(up, nil, base); v != "baseline has none" {
		t.Errorf("size F1: %q", v)
	}
	if v := mSmall.verdict(stats.TInterval(nil), nil, nil); v != "no values" {
		t.Errorf("no small images: %q", v)
	}
}

// A stored selection is kept only for the grid and the phase 1 seeds it
// was made from: a rerun with more seeds or another grid selects again
// (the reduced study's one-seed selection must not decide the full one).
func TestStoredSelectionMatchesThePhase1(t *testing.T) {
	dir := t.TempDir()
	cfg := config{Out: filepath.Join(dir, "out"), Assets: fakeAssets(t, dir), Crop: "18x24", Epochs: 3, Seeds1: 2, Seeds2: 3,
		Alphas: []string{"1", "3"}, CLambdas: []string{"10"}, Plan: true}
	st, err := newStudy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	write := func(sel selection) {
		js, _ := json.Marshal(sel)
		if err := os.WriteFile(filepath.Join(cfg.Out, "selection.json"), js, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(selection{Best: "a1_c10", Arms: []string{"a1_c10", "a3_c10"}, Seeds: []int{1, 2}})
	if sel, why := st.storedSelection(); sel == nil || sel.Best != "a1_c10" || why != "" {
		t.Errorf("the matching selection was not kept: %v %q", sel, why)
	}
	if a := st.storedBest(); a == nil || a.Key != "a1_c10" {
		t.Errorf("plan's stored arm %v", a)
	}
	for name, sel := range map[string]selection{
		"one seed":        {Best: "a1_c10", Arms: []string{"a1_c10", "a3_c10"}, Seeds: []int{1}},
		"another grid":    {Best: "a1_c10", Arms: []string{"a1_c10"}, Seeds: []int{1, 2}},
		"no record":       {Best: "a1_c10"},
		"arm not in grid": {Best: "a9_c10", Arms: []string{"a1_c10", "a3_c10"}, Seeds: []int{1, 2}},
	} {
		write(sel)
		if got, why := st.storedSelection(); got != nil || !strings.Contains(why, "selecting again") {
			t.Errorf("%s: kept %v (%q)", name, got, why)
		}
		if st.storedBest() != nil {
			t.Errorf("%s: the plan used the stale selection", name)
		}
	}
}
