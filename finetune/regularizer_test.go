package finetune

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/internal/testassets"
)

func regularizedToy(t *testing.T, dir, projection string) Config {
	cfg := toyConfig(t, dir)
	cfg.Balanced = true
	cfg.Regularizer = &RegularizerConfig{Alpha: 1e-2, Projection: projection,
		Dual: dual.Config{CLambda: 1, Normalization: dual.NormMean}}
	return cfg
}

func TestRegularizedRunLogsAndExportsWithoutHead(t *testing.T) {
	testassets.RequireORT(t)
	dir := t.TempDir()
	cfg := regularizedToy(t, dir, "epoch")
	out := filepath.Join(dir, "run")
	var last EpochInfo
	if _, err := Train(context.Background(), cfg, out, false, Hooks{OnEpoch: func(e EpochInfo) { last = e }}); err != nil {
		t.Fatal(err)
	}
	recs, err := history.Read(filepath.Join(out, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	epochs := history.Filter(recs, history.KindEpoch)
	for _, key := range []string{"reg_lagrangian", "reg_violation", "reg_projections", "size_f1_train", "size_f1_val", "val_miou_small", "val_miou_large", "val_miou_gap"} {
		if _, ok := epochs[len(epochs)-1].Value(key); !ok {
			t.Errorf("epoch record lacks %s: %+v", key, epochs[len(epochs)-1])
		}
	}
	// Algorithm 1: one projection per epoch.
	if p, _ := epochs[0].Value("reg_projections"); p != 1 {
		t.Errorf("epoch schedule made %v projections in an epoch, want 1", p)
	}
	if len(last.Groups) != 2 {
		t.Errorf("groups %v, want small and large", last.Groups)
	}
	assertExportMatchesTraining(t, filepath.Join(out, "last.ckpt"), cfg)
}

// The full-projections baseline projects after every step.
func TestStepProjectionSchedule(t *testing.T) {
	testassets.RequireORT(t)
	dir := t.TempDir()
	cfg := regularizedToy(t, dir, "step")
	cfg.Epochs = 2
	out := filepath.Join(dir, "run")
	if _, err := Train(context.Background(), cfg, out, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	recs, _ := history.Read(filepath.Join(out, HistoryFile))
	e := history.Filter(recs, history.KindEpoch)[0]
	if p, _ := e.Value("reg_projections"); p != 3 { // 12 examples / batch 4
		t.Errorf("step schedule made %v projections in an epoch of 3 steps", p)
	}
}

// Training through the in-graph projection: two ONNX projections per step
// (one for the gradient, one for the new point) and none at the epoch's end.
func TestGraphProjectionSchedule(t *testing.T) {
	testassets.RequireORT(t)
	dir := t.TempDir()
	cfg := regularizedToy(t, dir, "graph")
	cfg.Epochs = 2
	out := filepath.Join(dir, "run")
	if _, err := Train(context.Background(), cfg, out, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	recs, _ := history.Read(filepath.Join(out, HistoryFile))
	for i, e := range history.Filter(recs, history.KindEpoch) {
		if p, _ := e.Value("reg_projections"); p != 6 { // 12 examples / batch 4, two each
			t.Errorf("epoch %d: graph schedule made %v projections in 3 steps, want 6", i+1, p)
		}
		if v, ok := e.Value("reg_violation"); !ok || v != v {
			t.Errorf("epoch %d: no constraint violation logged", i+1)
		}
	}
	ck, err := checkpoint.Load(filepath.Join(out, "last.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(ck.RegularizerState, []byte(`"raw_tau"`)) {
		t.Error("the checkpoint lacks the free variables τ̃ of the graph schedule")
	}
}

// Resuming restores the regularizer's τ, λ, ε, μ and score cache too, and
// under the graph schedule its free variables.
func TestRegularizedResumeIsExact(t *testing.T) {
	testassets.RequireORT(t)
	for _, schedule := range []string{"epoch", "graph"} {
		t.Run(schedule, func(t *testing.T) {
			dir := t.TempDir()
			assertResumeIsExact(t, dir, regularizedToy(t, dir, schedule))
		})
	}
}

// Balanced batches without the regularizer: the like-for-like baseline.
func TestBalancedBaseline(t *testing.T) {
	testassets.RequireORT(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Balanced, cfg.Epochs = true, 2
	var ids [][]int
	order := balancedOrder([]int{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1}, 3, 4, 3)
	for e := 0; e < 2; e++ {
		o := order(e)
		if len(o) != 12 {
			t.Fatalf("epoch %d: %d ids, want 3 batches of 4", e, len(o))
		}
		for b := 0; b < 3; b++ {
			large := 0
			for _, id := range o[4*b : 4*b+4] {
				if id >= 8 {
					large++
				}
			}
			if large != 2 {
				t.Errorf("epoch %d batch %d has %d large examples, want 2", e, b, large)
			}
		}
		ids = append(ids, o)
	}
	if slices.Equal(ids[0], ids[1]) {
		t.Error("two epochs drew the same order")
	}
	if _, err := Train(context.Background(), cfg, filepath.Join(dir, "run"), false, Hooks{}); err != nil {
		t.Fatal(err)
	}
}
