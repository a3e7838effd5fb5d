package finetune

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// lastWeights are the trainable tensors of a run's last checkpoint.
func lastWeights(t *testing.T, dir string) []checkpoint.Tensor {
	t.Helper()
	ck, err := checkpoint.Load(filepath.Join(dir, checkpoint.LastName))
	if err != nil {
		t.Fatal(err)
	}
	return ck.Weights
}

// --accumulate 4 at batch 2 is the update of batch 8, for SGD and Adam:
// after 3 steps the weights agree within 1e-5. The toy network has no
// batch normalisation (segtune trains it in its inference form anyway),
// and the crop is the whole image at scale 1, so every batch has as many
// labelled pixels and the mean of the parts' mean losses is the whole
// batch's mean.
func TestAccumulateMatchesTheLargerBatch(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	base := toyConfig(t, dir)
	base.Val = DataSpec{}
	base.Height, base.Width = 32, 40
	base.Augment = data.Augment{ScaleMin: 1, ScaleMax: 1}
	base.Epochs, base.MaxSteps = 0, 3
	for _, opt := range []string{"sgd", "adam"} {
		t.Run(opt, func(t *testing.T) {
			large, acc := base, base
			large.Optimizer, acc.Optimizer = opt, opt
			large.Batch = 8
			acc.Batch, acc.Accumulate = 2, 4
			runs := map[string]Config{"large": large, "acc": acc}
			got := map[string][]checkpoint.Tensor{}
			for name, cfg := range runs {
				out := filepath.Join(dir, opt+"-"+name)
				res, err := Train(context.Background(), cfg, out, false, Hooks{})
				if err != nil {
					t.Fatal(err)
				}
				if res.Steps != 3 {
					t.Fatalf("%s: %d optimiser steps, want 3", name, res.Steps)
				}
				got[name] = lastWeights(t, out)
			}
			moved, worst := 0.0, 0.0
			for i, w := range got["large"] {
				a := got["acc"][i]
				if a.Name != w.Name || len(a.Data) != len(w.Data) {
					t.Fatalf("tensor %d: %s and %s", i, w.Name, a.Name)
				}
				for j := range w.Data {
					d := math.Abs(float64(w.Data[j] - a.Data[j]))
					worst = max(worst, d)
					if d > 1e-5 {
						t.Fatalf("%s[%d]: batch 8 %v, batch 2 × 4 %v (differ by %g)", w.Name, j, w.Data[j], a.Data[j], d)
					}
				}
			}
			t.Logf("%s: max |batch 8 − batch 2 × 4| after 3 steps: %.3g", opt, worst)
			// The runs moved the weights: a test of no update would pass too.
			cfg := base
			cfg.Optimizer, cfg.Batch, cfg.MaxSteps = opt, 8, 1
			one := filepath.Join(dir, opt+"-one")
			if _, err := Train(context.Background(), cfg, one, false, Hooks{}); err != nil {
				t.Fatal(err)
			}
			for i, w := range lastWeights(t, one) {
				for j := range w.Data {
					moved = max(moved, math.Abs(float64(w.Data[j]-got["large"][i].Data[j])))
				}
			}
			if moved < 1e-4 {
				t.Errorf("steps 2 and 3 moved the weights by %g at most: too little to tell the runs apart", moved)
			}
		})
	}
}

// Accumulation refuses the resident form and the size regularizer, and
// a run with it resumes with it.
func TestAccumulateRefusals(t *testing.T) {
	var se *setting.Error
	if err := CheckAccumulate(4, "on", nil); !errors.As(err, &se) || se.Setting != "accumulate" {
		t.Errorf("resident on: %v", err)
	}
	if err := CheckAccumulate(4, "auto", &RegularizerConfig{Alpha: 0.1}); err == nil {
		t.Error("with the size regularizer: accepted")
	}
	if err := CheckAccumulate(-1, "off", nil); err == nil {
		t.Error("-1: accepted")
	}
	if err := CheckAccumulate(4, "auto", nil); err != nil {
		t.Errorf("resident auto: %v", err)
	}
	old := Config{Accumulate: 4, Epochs: 2}
	cfg := Config{Accumulate: 2, Epochs: 2, Explicit: []string{"accumulate"}}
	var rc *ResumeConflictError
	if _, _, err := mergeResume(old, cfg); !errors.As(err, &rc) {
		t.Errorf("another --accumulate on resume: %v", err)
	}
}
