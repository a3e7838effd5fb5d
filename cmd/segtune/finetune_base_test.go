package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// blurRedModel writes a model of synth's three classes that labels a pixel
// 1 where the red channel exceeds the green one by 20 on average over its
// 3×3 neighbourhood, 2 where green exceeds red so: its labels near edges
// depend on the scale it runs at.
func blurRedModel(t *testing.T, path string) string {
	t.Helper()
	w := make([]float32, 3*3*9)
	for k := range 9 {
		w[1*27+0*9+k], w[1*27+1*9+k] = 1.0/9, -1.0/9 // class 1: mean red minus mean green
		w[2*27+0*9+k], w[2*27+1*9+k] = -1.0/9, 1.0/9 // class 2: the opposite
	}
	b := &onnx.Builder{}
	wt := b.Initializer(onnx.NewFloat32Tensor("w", []int64{3, 3, 3, 3}, w))
	bias := b.Initializer(onnx.NewFloat32Tensor("b", []int64{3}, []float32{0, -20, -20}))
	b.Emit("Conv", "conv", []string{"input", wt, bias}, []string{"logits"}, onnx.IntsAttr("pads", 1, 1, 1, 1), onnx.IntsAttr("kernel_shape", 3, 3))
	f32 := onnx.Float32
	m := onnx.NewModel(b.Graph("blurred",
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("input", f32, "n", 3, "h", "w")},
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("logits", f32, "n", 3, "h", "w")}), 17)
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// A fine-tune of a model whose contract scales images by 2 trains,
// validates and exports at ×2 without a flag; it validates the base model
// first (epoch 0, with eval's score of the base model at ×2, not at ×1)
// and ends by comparing the best epoch with it.
func TestFinetuneStartsFromTheModelsContract(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	data := synthData(t, dir, 8, 4)
	model := blurRedModel(t, filepath.Join(dir, "m.onnx"))
	side := imageio.Sidecar{Preprocess: &imageio.Preprocess{Resize: imageio.ResizeScale, ScaleFactor: 2}}
	if err := side.Save(imageio.SidecarPath(model)); err != nil {
		t.Fatal(err)
	}
	evalMIoU := func(extra ...string) float64 {
		t.Helper()
		out, err := runCLI(t, append([]string{"eval", "--model", model, "--data", data, "--threads", "1", "--json"}, extra...)...)
		if err != nil {
			t.Fatalf("eval %v: %v\n%s", extra, err, out)
		}
		var r struct {
			MeanIoU *float64 `json:"mean_iou"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || r.MeanIoU == nil {
			t.Fatalf("eval output %q: %v", out, err)
		}
		return *r.MeanIoU
	}
	atContract, atOne := evalMIoU(), evalMIoU("--scale", "1")
	if atContract == atOne {
		t.Fatalf("the base scores %v at ×2 and at ×1: the test data cannot tell the scales apart", atContract)
	}
	run := filepath.Join(dir, "run")
	stdout, err := runCLI(t, "finetune", "--model", model, "--data", data, "--out", run, "--epochs", "1", "--batch", "2",
		"--crop", "32x32", "--lr", "1e-3", "--threads", "1")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := readRunConfig(t, run); cfg.Preprocess.Resize != imageio.ResizeScale || cfg.Preprocess.ScaleFactor != 2 {
		t.Errorf("the run's preprocessing %+v: want the contract's ×2", cfg.Preprocess)
	}
	recs, err := history.Read(filepath.Join(run, finetune.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 || recs[0].Kind != history.KindBase || recs[0].Epoch != -1 || recs[0].Step != 0 {
		t.Fatalf("metrics.jsonl starts with %+v: want the base model's record", recs[:min(len(recs), 1)])
	}
	base, ok := recs[0].Value("val_miou")
	if !ok || math.Abs(base-atContract) > 1e-12 {
		t.Errorf("epoch 0 val mIoU %v; eval of the base model at its ×2 gives %v (at ×1 %v)", base, atContract, atOne)
	}
	if !strings.Contains(stdout, "the base model") || !strings.Contains(stdout, "against the base's") {
		t.Errorf("the run does not end by comparing with the base model:\n%s", stdout)
	}
	exported, found, err := imageio.LoadModelSidecar(filepath.Join(run, finetune.ModelFile))
	if err != nil || !found || exported.Preprocess == nil || exported.Preprocess.ScaleFactor != 2 {
		t.Errorf("model.onnx's sidecar %+v (found %v, %v): want the contract's ×2", exported, found, err)
	}
}
