package finetune

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxtest"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// TestExporterFormsFineTune: the toy network written the ways exporters
// write it trains every stored weight, the loss falls, and the exported
// model runs and keeps each weight's storage type: weights behind
// Transpose/Reshape/Unsqueeze (torch.onnx without constant folding),
// float16 storage behind Casts (trained as float32, written back in
// float16), and, with Dequantize, the three quantized forms (exported as
// the float model).
func TestExporterFormsFineTune(t *testing.T) {
	runtimetest.Require(t)
	for _, tc := range []struct {
		kind    onnxtest.Kind
		trained []string
		storage onnx.DataType
	}{
		{onnxtest.NoFold, []string{"b1", "b2", "w1", "w2_t8x2"}, onnx.Float32},
		{onnxtest.Half, []string{"b1", "b2", "w1", "w2"}, onnx.Float16},
		{onnxtest.ConvInteger, []string{"classifier.bias", "classifier.weight", "conv1.bias", "conv1.weight"}, onnx.Float32},
		{onnxtest.QDQ, []string{"b1", "b2", "w1", "w2"}, onnx.Float32},
		{onnxtest.QLinear, []string{"classifier.bias", "classifier.weight", "conv1.bias", "conv1.weight"}, onnx.Float32},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			dir := t.TempDir()
			cfg := toyConfig(t, dir)
			cfg.Network.BaseModel = filepath.Join(dir, string(tc.kind)+".onnx")
			if err := onnxtest.Build(tc.kind).Save(cfg.Network.BaseModel); err != nil {
				t.Fatal(err)
			}
			base, err := cfg.Network.LoadNetwork("")
			if err != nil {
				t.Fatal(err)
			}
			quantized := len(onnx.Quantized(base)) > 0
			cfg.Network.Dequantize = quantized
			cfg.Epochs = 3
			out := filepath.Join(dir, "run")
			if _, err := Train(context.Background(), cfg, out, false, Hooks{}); err != nil {
				t.Fatal(err)
			}
			if losses := epochLosses(t, out); len(losses) != 3 || !(losses[2] < losses[0]) {
				t.Errorf("epoch losses %v: want 3 falling", losses)
			}
			ck, err := checkpoint.Load(filepath.Join(out, "last.ckpt"))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, w := range ck.Weights {
				names = append(names, w.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, tc.trained) {
				t.Errorf("trained %v, want every stored weight %v", names, tc.trained)
			}
			exported, err := onnx.Load(filepath.Join(out, ModelFile))
			if err != nil {
				t.Fatal(err)
			}
			if q := onnx.Quantized(exported); len(q) > 0 {
				t.Errorf("the exported model is still quantized: %s", q)
			}
			if quantized {
				base, err = cfg.Network.LoadNetwork("") // the float form it trained from
				if err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range tc.trained {
				before, after := base.Initializer(name), exported.Initializer(name)
				if after == nil {
					t.Fatalf("the exported model has no %s", name)
				}
				if dt := onnx.DataType(after.GetDataType()); dt != tc.storage {
					t.Errorf("%s exported as %v, want %v", name, dt, tc.storage)
				}
				b, _ := onnx.Float32s(before)
				a, _ := onnx.Float32s(after)
				if slices.Equal(a, b) {
					t.Errorf("%s did not change", name)
				}
			}
			if tc.kind != onnxtest.Half { // float16 rounding moves the export off the float32 masters
				assertExportMatchesTraining(t, filepath.Join(out, "last.ckpt"), cfg)
			} else {
				inf := session(t, exported)
				inf.Close()
			}
		})
	}
}

// TestQuantizedModelNeedsDequantize: without Dequantize a quantized model
// is refused before any training, naming its quantized operators and the
// flag.
func TestQuantizedModelNeedsDequantize(t *testing.T) {
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Network.BaseModel = filepath.Join(dir, "qdq.onnx")
	if err := onnxtest.Build(onnxtest.QDQ).Save(cfg.Network.BaseModel); err != nil {
		t.Fatal(err)
	}
	_, err := Train(context.Background(), cfg, filepath.Join(dir, "run"), false, Hooks{})
	// The library names the setting by its key; the CLI calls it --dequantize.
	if err == nil || !strings.Contains(err.Error(), "DequantizeLinear") || !strings.Contains(err.Error(), "with dequantize") {
		t.Fatalf("error %v, want one naming DequantizeLinear and the dequantize setting", err)
	}
}
