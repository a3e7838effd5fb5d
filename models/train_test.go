package models_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/synth"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// The default DeepLabV3+ learns the synthetic set through finetune.Train:
// the training loss falls within a few dozen steps.
func TestDeepLabTrainsOnSynth(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "synth")
	sc := synth.DefaultConfig()
	sc.Train, sc.Val = 64, 16
	if _, err := synth.Generate(root, sc); err != nil {
		t.Fatal(err)
	}
	m, err := models.DeepLabV3Plus(models.DefaultDeepLabConfig())
	if err != nil {
		t.Fatal(err)
	}
	modelPath := filepath.Join(dir, "deeplab.onnx")
	if err := m.Save(modelPath); err != nil {
		t.Fatal(err)
	}
	steps := int64(40)
	if v, err := strconv.Atoi(os.Getenv("SEGTUNE_SYNTH_STEPS")); err == nil && v > 0 {
		steps = int64(v)
	}
	entry, err := models.Lookup(models.SynthName)
	if err != nil {
		t.Fatal(err)
	}
	cfg := finetune.Config{
		Network:    finetune.NetworkSpec{BaseModel: modelPath},
		Train:      finetune.DataSpec{Data: root, Split: "train"},
		Val:        finetune.DataSpec{Data: root, Split: "val"},
		Ignore:     255,
		ClassNames: synth.ClassNames,
		Trainable:  "all",
		Batch:      8, Height: 64, Width: 64,
		Epochs: 100, MaxSteps: steps,
		Optimizer: "adam", LR: 3e-3, Schedule: "constant", Seed: 1,
		Augment:    data.Augment{Flip: true},
		Preprocess: entry.Preprocess,
		Threads:    2,
	}
	var losses []float64
	var val []float64
	start := time.Now()
	res, err := finetune.Train(context.Background(), cfg, filepath.Join(dir, "run"), false, finetune.Hooks{
		OnStep: func(s finetune.StepInfo) { losses = append(losses, s.Loss) },
		OnEpoch: func(e finetune.EpochInfo) {
			if e.Val != nil && e.Val.MeanIoU != nil {
				val = append(val, *e.Val.MeanIoU)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if int64(len(losses)) != steps || res.Steps != steps {
		t.Fatalf("%d steps logged, %d run; want %d", len(losses), res.Steps, steps)
	}
	mean := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	first, last := mean(losses[:5]), mean(losses[len(losses)-5:])
	t.Logf("%d steps of batch 8 at 64×64 in %.1fs: loss %.3f → %.3f (mean of first/last 5 steps); val mIoU per epoch %.3f",
		steps, took.Seconds(), first, last, val)
	if !(last < 0.7*first) {
		t.Errorf("loss %.3f → %.3f: want it to fall by 30%% at least", first, last)
	}
	if _, err := os.Stat(res.Model); err != nil {
		t.Errorf("no exported model: %v", err)
	}
}
