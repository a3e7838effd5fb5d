package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/runtime/runtimetest"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// int8Tensor is an INT8 (or UINT8, unsigned) initializer.
func int8Tensor(name string, dims []int64, unsigned bool, v []int8) *onnxpb.TensorProto {
	dt := int32(onnxpb.TensorProto_INT8)
	if unsigned {
		dt = int32(onnxpb.TensorProto_UINT8)
	}
	raw := make([]byte, len(v))
	for i, x := range v {
		raw[i] = byte(x)
	}
	return &onnxpb.TensorProto{Name: &name, DataType: &dt, Dims: dims, RawData: raw}
}

// quantizedModels writes two small 3-class segmenters (synthData's classes) (X [1,3,32,32] →
// logits) quantized the ways published int8 models are: dynamically, with
// ConvInteger on int8 weights (as onnxruntime's quantize_dynamic writes
// them), and statically as QDQ, int8 weights through DequantizeLinear into
// a float Conv. Both keep a float bias, a parameter a float layer search
// finds. It returns their paths by kind.
func quantizedModels(t *testing.T) map[string]string {
	t.Helper()
	r := rand.New(rand.NewPCG(4, 3))
	w := make([]int8, 3*3*3*3)
	for i := range w {
		w[i] = int8(r.IntN(255) - 127)
	}
	x := []*onnxpb.ValueInfoProto{onnx.TensorValueInfo("X", onnxpb.TensorProto_FLOAT, 1, 3, 32, 32)}
	y := []*onnxpb.ValueInfoProto{onnx.TensorValueInfo("logits", onnxpb.TensorProto_FLOAT, 1, 3, 32, 32)}
	dir := t.TempDir()
	paths := map[string]string{}

	b := &onnx.Builder{}
	b.Initializer(int8Tensor("w_q", []int64{3, 3, 3, 3}, false, w))
	b.Initializer(onnx.NewFloat32Tensor("w_scale", nil, []float32{0.01}))
	b.Initializer(onnx.NewFloat32Tensor("bias", []int64{1, 3, 1, 1}, []float32{0.1, -0.1, 0}))
	b.Emit("DynamicQuantizeLinear", "x_quant", []string{"X"}, []string{"x_q", "x_scale", "x_zp"})
	b.Emit("ConvInteger", "conv", []string{"x_q", "w_q", "x_zp"}, []string{"acc"}, onnx.IntsAttr("pads", 1, 1, 1, 1))
	b.Emit("Cast", "acc_float", []string{"acc"}, []string{"acc_f"}, onnx.IntAttr("to", int64(onnxpb.TensorProto_FLOAT)))
	b.Emit("Mul", "scales", []string{"x_scale", "w_scale"}, []string{"s"})
	b.Emit("Mul", "dequant", []string{"acc_f", "s"}, []string{"c"})
	b.Emit("Add", "add_bias", []string{"c", "bias"}, []string{"logits"})
	paths["ConvInteger"] = filepath.Join(dir, "convinteger.onnx")
	if err := onnx.NewModel(b.Graph("convinteger", x, y), 13).Save(paths["ConvInteger"]); err != nil {
		t.Fatal(err)
	}

	b = &onnx.Builder{}
	b.Initializer(int8Tensor("w_q", []int64{3, 3, 3, 3}, false, w))
	b.Initializer(onnx.NewFloat32Tensor("w_scale", nil, []float32{0.01}))
	b.Initializer(int8Tensor("w_zp", nil, false, []int8{0}))
	b.Initializer(onnx.NewFloat32Tensor("x_scale", nil, []float32{1}))
	b.Initializer(int8Tensor("x_zp", nil, true, []int8{0}))
	b.Initializer(onnx.NewFloat32Tensor("bias", []int64{3}, []float32{0.1, -0.1, 0}))
	b.Emit("QuantizeLinear", "x_q", []string{"X", "x_scale", "x_zp"}, []string{"xq"})
	b.Emit("DequantizeLinear", "x_dq", []string{"xq", "x_scale", "x_zp"}, []string{"xdq"})
	b.Emit("DequantizeLinear", "w_dq", []string{"w_q", "w_scale", "w_zp"}, []string{"wdq"})
	b.Emit("Conv", "conv", []string{"xdq", "wdq", "bias"}, []string{"logits"}, onnx.IntsAttr("pads", 1, 1, 1, 1))
	paths["QDQ"] = filepath.Join(dir, "qdq.onnx")
	if err := onnx.NewModel(b.Graph("qdq", x, y), 13).Save(paths["QDQ"]); err != nil {
		t.Fatal(err)
	}
	return paths
}

// Each command that cannot work on a quantized model names the cause
// first: info's fine-tuning line, finetune and artifacts (which trained
// the QDQ model's float bias alone, or blamed --trainable), and an int8
// export, refused before its calibration images are screened (these are
// blank, which would be named otherwise).
func TestQuantizedModelIsNamedFirst(t *testing.T) {
	runtimetest.Require(t)
	isolateModelSearch(t)
	dir := t.TempDir()
	data := synthData(t, dir, 2, 1)
	blank := filepath.Join(dir, "blank")
	if err := os.MkdirAll(blank, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		writeMask(t, filepath.Join(blank, fmt.Sprintf("%d.png", i)), 32, 32, 0)
	}
	for kind, model := range quantizedModels(t) {
		want := map[string]string{"ConvInteger": "the model is quantized (ConvInteger ×1, DynamicQuantizeLinear ×1)",
			"QDQ": "the model is quantized (DequantizeLinear ×2, QuantizeLinear ×1)"}[kind]
		out, err := runCLI(t, "info", model)
		if err != nil || !strings.Contains(out, "fine-tuning  refused: "+want+": its weights are integers") {
			t.Errorf("%s: info: %v\n%s", kind, err, out)
		}
		for _, args := range [][]string{
			{"finetune", "--model", model, "--data", data, "--out", filepath.Join(dir, kind+"-run"), "--epochs", "1", "--batch", "2"},
			{"artifacts", "--model", model, "--out", filepath.Join(dir, kind+"-art")},
		} {
			_, err := runCLI(t, args...)
			if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "--trainable") {
				t.Errorf("%s: %s: %v; want %q first", kind, args[0], err, want)
			}
		}
		_, err = runCLI(t, "export", "--model", model, "--out", filepath.Join(dir, kind+"-int8.onnx"), "--precision", "int8", "--calibrate", blank)
		if err == nil || !strings.Contains(err.Error(), "--precision int8: the model is quantized already") || strings.Contains(err.Error(), "near-constant") {
			t.Errorf("%s: export --precision int8: %v; want the quantized model refused before calibration", kind, err)
		}
	}
}

// A file that is no ONNX model is named for what it is, with what to do,
// by every command that takes a model.
func TestNotAModelIsNamedByEveryCommand(t *testing.T) {
	runtimetest.Require(t)
	isolateModelSearch(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "model.onnx")
	if err := os.WriteFile(page, []byte("<!DOCTYPE html>\n<html><head><title>model.onnx · Hugging Face</title>"), 0o644); err != nil {
		t.Fatal(err)
	}
	images := filepath.Join(dir, "images")
	if err := os.MkdirAll(images, 0o755); err != nil {
		t.Fatal(err)
	}
	writeImage(t, filepath.Join(images, "a.png"), 32, 32)
	want := page + ": not a valid ONNX protobuf"
	for _, args := range [][]string{
		{"info", page},
		{"segment", "--model", page, "--input", images, "--output", filepath.Join(dir, "masks")},
		{"eval", "--model", page, "--images", images, "--masks", images},
		{"finetune", "--model", page, "--data", images, "--out", filepath.Join(dir, "run")},
		{"artifacts", "--model", page, "--out", filepath.Join(dir, "art")},
		{"export", "--model", page, "--out", filepath.Join(dir, "out.onnx")},
	} {
		_, err := runCLI(t, args...)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "it looks like an HTML page: a web page was saved in place of the file") {
			t.Errorf("%s: %v; want %q and the HTML page named", args[0], err, want)
		}
	}
}

// legacySegmenter writes a 3-class segmenter the way old exporters wrote
// them: IR version 3 with every initializer also a graph input, opset 7,
// attribute-form Clip, Upsample. input [1,3,32,32] → logits [1,3,32,32].
func legacySegmenter(t *testing.T, path string) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 43))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = r.Float32()*2 - 1
		}
		return v
	}
	b := &onnx.Builder{}
	b.Initializer(onnx.NewFloat32Tensor("w1", []int64{6, 3, 3, 3}, rnd(6*27)))
	b.Initializer(onnx.NewFloat32Tensor("w2", []int64{3, 6, 1, 1}, rnd(18)))
	b.Emit("Conv", "conv1", []string{"input", "w1"}, []string{"c1"}, onnx.IntsAttr("pads", 1, 1, 1, 1))
	b.Emit("Clip", "relu6", []string{"c1"}, []string{"a1"}, onnx.FloatAttr("min", 0), onnx.FloatAttr("max", 6))
	b.Emit("MaxPool", "pool", []string{"a1"}, []string{"p1"}, onnx.IntsAttr("kernel_shape", 2, 2), onnx.IntsAttr("strides", 2, 2))
	b.Emit("Conv", "classifier", []string{"p1", "w2"}, []string{"low"})
	b.Emit("Upsample", "up", []string{"low"}, []string{"logits"}, onnx.FloatsAttr("scales", 1, 1, 2, 2))
	in := []*onnxpb.ValueInfoProto{onnx.TensorValueInfo("input", onnxpb.TensorProto_FLOAT, 1, 3, 32, 32)}
	g := b.Graph("legacy", in, []*onnxpb.ValueInfoProto{onnx.TensorValueInfo("logits", onnxpb.TensorProto_FLOAT, 1, 3, 32, 32)})
	for _, init := range g.Initializer {
		g.Input = append(g.Input, onnx.TensorValueInfo(init.GetName(), onnxpb.TensorProto_FLOAT, init.GetDims()...))
	}
	m := onnx.NewModel(g, 7)
	ir := int64(3)
	m.Proto.IrVersion = &ir
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
}

// An IR-3, opset-7 export exports in fp16 (its weight inputs read as
// weights, which the report says) and at --opset 13 (its Clip and
// Upsample rewritten, which the report says), each checked on images; an
// opset segtune cannot write is refused naming --opset; and its training
// graph compiles.
func TestOldExportExportsAndTrains(t *testing.T) {
	runtimetest.Require(t)
	isolateModelSearch(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "legacy.onnx")
	legacySegmenter(t, model)
	data := synthData(t, dir, 2, 4)
	val := filepath.Join(data, "images", "val")
	out, err := runCLI(t, "export", "--model", model, "--out", filepath.Join(dir, "fp16.onnx"), "--precision", "fp16", "--check-images", val)
	if err != nil || !strings.Contains(out, "note          the model listed 2 of its initializers as graph inputs too") {
		t.Errorf("export --precision fp16: %v\n%s", err, out)
	}
	up := filepath.Join(dir, "op13.onnx")
	out, err = runCLI(t, "export", "--model", model, "--out", up, "--opset", "13", "--check-images", val)
	if err != nil || !strings.Contains(out, "opset         opset 7 → 13 (rewrote Clip ×1, Upsample ×1)") {
		t.Fatalf("export --opset 13: %v\n%s", err, out)
	}
	if m, err := onnx.Load(up); err != nil || m.Opset("") != 13 || m.WeightInputs != 0 {
		t.Errorf("%s: opset %d, weight inputs %d, %v", up, m.Opset(""), m.WeightInputs, err)
	}
	_, err = runCLI(t, "export", "--model", model, "--out", filepath.Join(dir, "op5.onnx"), "--opset", "5")
	if err == nil || !strings.Contains(err.Error(), "--opset 5: opset 5 is older than the model's opset 7") {
		t.Errorf("export --opset 5: %v", err)
	}
	if _, err := runCLI(t, "artifacts", "--model", model, "--out", filepath.Join(dir, "art")); err != nil {
		t.Fatalf("artifacts: %v", err)
	}
	params, err := onnx.Load(filepath.Join(dir, "art", "params.onnx"))
	if err != nil || len(params.Proto.Graph.GetInitializer()) != 2 {
		t.Errorf("artifacts' params.onnx: %v; want w1 and w2", err)
	}
}
