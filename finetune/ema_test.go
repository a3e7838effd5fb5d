package finetune

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/export"
	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// The average starts at the parameters and moves by (1 − decay) of the
// way to them each update; a checkpoint's tensors take the averages'
// place in what is exported.
func TestEMAUpdate(t *testing.T) {
	p := &optim.Param{Name: "w", Shape: []int64{2}, Data: []float32{1, 2}}
	e := newEMA(0.75, []*optim.Param{p})
	p.Data[0], p.Data[1] = 5, -2
	e.update([]*optim.Param{p})
	if want := []float32{2, 1}; !slices.Equal(e.avg[0], want) {
		t.Errorf("average %v, want %v", e.avg[0], want)
	}
	ws := append([]checkpoint.Tensor{{Name: "w", Data: p.Data}, {Name: "b", Data: []float32{3}}}, e.tensors([]*optim.Param{p})...)
	got := checkpoint.WithEMA(ws)
	if len(got) != 2 || !slices.Equal(got[0].Data, []float32{2, 1}) || got[1].Name != "b" {
		t.Errorf("WithEMA = %+v", got)
	}
	for _, bad := range []float64{-0.1, 1, 1.5, math.NaN()} {
		if err := CheckEMA(bad); err == nil {
			t.Errorf("decay %v accepted", bad)
		}
	}
}

// A run with EMA interrupted mid-epoch and resumed ends with the
// uninterrupted run's averages and weights bit for bit; its checkpoints
// keep both, it validates and exports the averages.
func TestEMAResumesExactly(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Epochs, cfg.EMA = 2, 0.8 // 3 steps an epoch
	full := filepath.Join(dir, "full")
	var log strings.Builder
	if _, err := Train(context.Background(), cfg, full, false, Hooks{Log: &log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "(the moving average of the weights)") {
		t.Errorf("the export does not say it holds the average: %s", log.String())
	}
	out := filepath.Join(dir, "resumed")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hooks := Hooks{OnStep: func(s StepInfo) {
		if s.Epoch == 1 && s.StepInEpoch == 1 {
			cancel()
		}
	}}
	if _, err := Train(ctx, cfg, out, false, hooks); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("interrupted run: %v", err)
	}
	if _, err := Train(context.Background(), cfg, out, true, Hooks{}); err != nil {
		t.Fatal(err)
	}
	want, got := lastWeights(t, full), lastWeights(t, out)
	var averages int
	for i, w := range want {
		if got[i].Name != w.Name || !slices.Equal(got[i].Data, w.Data) {
			t.Errorf("%s: resumed and uninterrupted runs differ", w.Name)
		}
		if strings.HasPrefix(w.Name, EMAPrefix) {
			averages++
			raw := want[i-len(want)/2]
			if raw.Name != strings.TrimPrefix(w.Name, EMAPrefix) || slices.Equal(raw.Data, w.Data) {
				t.Errorf("%s: the average is %s's weights, or misplaced", w.Name, raw.Name)
			}
		}
	}
	if averages == 0 || averages*2 != len(want) {
		t.Fatalf("%d averages among %d tensors: want one for each trained tensor", averages, len(want))
	}
	// model.onnx holds best.ckpt's averages.
	best, err := checkpoint.Load(filepath.Join(full, checkpoint.BestName))
	if err != nil {
		t.Fatal(err)
	}
	m, err := export.InferenceModel(best, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range checkpoint.WithEMA(best.Weights) {
		got, err := onnx.Float32s(m.Initializer(w.Name))
		if err != nil || !slices.Equal(got, w.Data) {
			t.Errorf("exported %s is not the checkpoint's average (%v)", w.Name, err)
		}
	}
}

// Validation scores the averages: with a decay so close to 1 that they
// stay at the base model's weights, every epoch scores as the base model,
// while the weights themselves learn.
func TestEMAValidatesTheAverage(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Epochs = 3
	mious := func(cfg Config, out string) []float64 {
		var v []float64
		if _, err := Train(context.Background(), cfg, filepath.Join(dir, out), false, Hooks{OnEpoch: func(e EpochInfo) {
			v = append(v, *e.Val.MeanIoU)
		}}); err != nil {
			t.Fatal(err)
		}
		return v
	}
	plain := mious(cfg, "plain")
	cfg.EMA = 1 - 1e-7
	avg := mious(cfg, "ema")
	if slices.Min(avg) != slices.Max(avg) {
		t.Errorf("val mIoU of the averages %v: want the base model's every epoch", avg)
	}
	if slices.Min(plain) == slices.Max(plain) {
		t.Errorf("val mIoU without EMA %v: the weights did not learn, the test tells nothing", plain)
	}
}

// With the training state resident on the device the average follows the
// weights read back every step: it ends where the host run's does.
func TestEMAResidentMatchesHost(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Epochs, cfg.EMA = 2, 0.8
	got := map[string][]checkpoint.Tensor{}
	for _, form := range []string{"off", "on"} {
		c := cfg
		c.Resident = form
		if _, err := Train(context.Background(), c, filepath.Join(dir, form), false, Hooks{}); err != nil {
			t.Fatal(err)
		}
		got[form] = lastWeights(t, filepath.Join(dir, form))
	}
	host, dev := got["off"], got["on"]
	if len(host) != len(dev) || !strings.HasPrefix(dev[len(dev)-1].Name, EMAPrefix) {
		t.Fatalf("%d and %d tensors, the last %s", len(host), len(dev), dev[len(dev)-1].Name)
	}
	for i, w := range host {
		for j := range w.Data {
			if d := math.Abs(float64(w.Data[j] - dev[i].Data[j])); d > 1e-5 || math.IsNaN(d) {
				t.Fatalf("%s[%d]: host %v, resident %v", w.Name, j, w.Data[j], dev[i].Data[j])
			}
		}
	}
}
