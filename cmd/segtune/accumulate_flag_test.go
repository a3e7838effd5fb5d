package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/runtime/runtimetest"
)

// --accumulate N takes one optimiser step per N batches (12 images at
// batch 2 × 2: 3 steps an epoch) and is refused with the resident state.
func TestFinetuneAccumulateFlag(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	data := synthData(t, dir, 12, 2)
	model := redModel(t, dir)
	args := []string{"finetune", "--model", model, "--data", data, "--label-map", "1,2:1;*:0", "--crop", "32x32",
		"--batch", "2", "--accumulate", "2", "--epochs", "1", "--lr", "1e-3"}
	_, err := runCLI(t, append(args, "--out", filepath.Join(dir, "bad"), "--resident", "on")...)
	if err == nil || !strings.Contains(err.Error(), "--accumulate 2: ") || !strings.Contains(err.Error(), "resident off or auto") {
		t.Errorf("--accumulate with --resident on: %v", err)
	}
	out := filepath.Join(dir, "run")
	if _, err := runCLI(t, append(args, "--out", out)...); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"kind":"step"`); n != 3 {
		t.Errorf("%d steps in the epoch, want 3 (12 images, 2 batches of 2 a step)", n)
	}
}

// --ema outside (0, 1) is refused, naming the flag, before any work.
func TestFinetuneEMAFlagRange(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	for _, v := range []string{"1", "-0.5"} {
		_, err := runCLI(t, "finetune", "--model", filepath.Join(dir, "none.onnx"), "--data", dir, "--out", filepath.Join(dir, "run"), "--ema", v)
		if err == nil || !strings.Contains(err.Error(), "--ema "+v+": the decay must be in (0, 1)") {
			t.Errorf("--ema %s: %v", v, err)
		}
	}
}

// --sample-by class trains and is recorded; another sampler with it, or
// another value, is refused naming the flag.
func TestFinetuneSampleByClass(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	data := synthData(t, dir, 8, 2)
	model := redModel(t, dir)
	args := []string{"finetune", "--model", model, "--data", data, "--label-map", "1,2:1;*:0", "--crop", "32x32",
		"--batch", "4", "--epochs", "1", "--lr", "1e-3"}
	for _, bad := range [][]string{{"--sample-by", "class", "--balance"}, {"--sample-by", "size"}} {
		if _, err := runCLI(t, append(append(args, "--out", filepath.Join(dir, "bad")), bad...)...); err == nil || !strings.Contains(err.Error(), "--sample-by "+bad[1]+": ") {
			t.Errorf("%v: %v", bad, err)
		}
	}
	out := filepath.Join(dir, "run")
	if _, err := runCLI(t, append(args, "--out", out, "--sample-by", "class", "--repeat-threshold", "0.5")...); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "config.json"))
	if err != nil || !strings.Contains(string(b), `"sample_by": "class"`) || !strings.Contains(string(b), `"repeat_threshold": 0.5`) {
		t.Errorf("config.json %s (%v): want the sampler recorded", b, err)
	}
}
