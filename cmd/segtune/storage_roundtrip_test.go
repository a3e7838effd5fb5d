package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/deploy"
	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxtest"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// The toy network (onnx/onnxtest) has two classes: synth's shapes
// against the background.
const toyLabelMap = "1,2:1;*:0"

// toyFinetune fine-tunes the toy network written as kind for two steps
// through the CLI and returns the run's folder and the base model's path.
// Images are fed as values 0..1: on raw 0..255 values the first steps'
// float16 gradients overflow at the starting loss scale and --precision
// fp16 skips both steps.
func toyFinetune(t *testing.T, dir, data string, kind onnxtest.Kind, extra ...string) (run, model string) {
	t.Helper()
	model = filepath.Join(dir, string(kind)+".onnx")
	if err := onnxtest.Build(kind).Save(model); err != nil {
		t.Fatal(err)
	}
	run = filepath.Join(dir, string(kind)+"-run")
	args := append([]string{"finetune", "--model", model, "--data", data, "--out", run, "--label-map", toyLabelMap,
		"--steps", "2", "--batch", "2", "--lr", "0.05", "--value-scale", "0.0039", "--threads", "2"}, extra...)
	if _, err := runCLI(t, args...); err != nil {
		t.Fatalf("finetune %s: %v", strings.Join(extra, " "), err)
	}
	return run, model
}

// runBestMIoU is the best epoch's validation mean IoU in a run's
// metrics.jsonl: the score of the weights model.onnx holds.
func runBestMIoU(t *testing.T, run string) float64 {
	t.Helper()
	recs, err := history.Read(filepath.Join(run, finetune.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	best := math.Inf(-1)
	for _, r := range history.Filter(recs, history.KindEpoch) {
		if v, ok := r.Value("val_miou"); ok && v > best {
			best = v
		}
	}
	if math.IsInf(best, -1) {
		t.Fatalf("%s records no validated epoch", run)
	}
	return best
}

// evalMeanIoU is eval's mean IoU of model on data's validation split, fed
// as the model's sidecar says (the run's settings).
func evalMeanIoU(t *testing.T, model, data string) float64 {
	t.Helper()
	out, err := runCLI(t, "eval", "--model", model, "--data", data, "--label-map", toyLabelMap, "--threads", "2", "--json")
	if err != nil {
		t.Fatalf("eval %s: %v", model, err)
	}
	var r struct {
		MeanIoU *float64 `json:"mean_iou"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.MeanIoU == nil {
		t.Fatalf("eval output %q: %v", out, err)
	}
	return *r.MeanIoU
}

// exportReport runs export with args (plus --json) and returns its report;
// the export must pass.
func exportReport(t *testing.T, args ...string) deploy.Report {
	t.Helper()
	out, err := runCLI(t, append(append([]string{"export"}, args...), "--threads", "2", "--json")...)
	if err != nil {
		t.Fatalf("export %s: %v", strings.Join(args, " "), err)
	}
	var rep deploy.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("export report %q: %v", out, err)
	}
	if !rep.Passed || rep.Check == nil || rep.Check.Images == 0 {
		t.Fatalf("export %s: report %+v, want a passed check", strings.Join(args, " "), rep)
	}
	return rep
}

// weightTypes maps the toy network's weights (w1, b1, w2, b2) in the model
// at path to their storage types, and says which differ from base's.
func weightTypes(t *testing.T, path string, base *onnx.Model) (map[string]onnx.DataType, []string) {
	t.Helper()
	m, err := onnx.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]onnx.DataType{}
	var changed []string
	for _, name := range []string{"w1", "b1", "w2", "b2"} {
		w := m.Initializer(name)
		if w == nil {
			t.Fatalf("%s has no initializer %s", path, name)
		}
		types[name] = onnx.DataType(w.GetDataType())
		a, _ := onnx.Float32s(w)
		b, _ := onnx.Float32s(base.Initializer(name))
		if !slices.Equal(a, b) {
			changed = append(changed, name)
		}
	}
	return types, changed
}

// opCount is the number of op nodes in the model at path.
func opCount(t *testing.T, path, op string) int {
	t.Helper()
	m, err := onnx.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, x := range m.Proto.Graph.GetNode() {
		if x.GetOpType() == op {
			n++
		}
	}
	return n
}

// infoTrainable is the number of tensors info says fine-tuning trains.
func infoTrainable(t *testing.T, model string) int {
	t.Helper()
	out, err := runCLI(t, "info", model, "--json")
	if err != nil {
		t.Fatalf("info %s: %v", model, err)
	}
	var s struct {
		TrainableTensors int `json:"trainable_tensors"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("info output %q: %v", out, err)
	}
	return s.TrainableTensors
}

// checkpointWeights names the tensors a run trained (its last.ckpt's).
func checkpointWeights(t *testing.T, run string) []string {
	t.Helper()
	ck, err := checkpoint.Load(filepath.Join(run, "last.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range ck.Weights {
		names = append(names, w.Name)
	}
	return names
}

// A model stored in float16 (weights behind Casts to float32, or read in
// float16 by a float16 graph) fine-tunes through the CLI, in fp32 and under
// --precision fp16, training every weight info counts as trainable; the
// run's model.onnx stores its trained weights in float16 again and scores
// what the run's validation said; and exports of it at fp16 and fp32 pass
// their agreement checks.
func TestHalfStoredModelFineTunesAndExports(t *testing.T) {
	runtimetest.Require(t)
	isolateModelSearch(t)
	dir := t.TempDir()
	data := synthData(t, dir, 4, 4)
	val := filepath.Join(data, "images", "val")
	for _, tc := range []struct {
		kind      onnxtest.Kind
		precision string
	}{
		{onnxtest.Half, "fp32"},
		{onnxtest.HalfGraph, "fp32"},
		{onnxtest.Half, "fp16"},
		{onnxtest.HalfGraph, "fp16"},
	} {
		t.Run(string(tc.kind)+"-"+tc.precision, func(t *testing.T) {
			dir := filepath.Join(dir, tc.precision)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			run, model := toyFinetune(t, dir, data, tc.kind, "--precision", tc.precision)
			base, err := onnx.Load(model)
			if err != nil {
				t.Fatal(err)
			}
			if info, trained := infoTrainable(t, model), checkpointWeights(t, run); info != len(trained) || len(trained) != 4 {
				t.Errorf("info says %d tensors are trainable; the run trained %v (want w1, b1, w2, b2)", info, trained)
			}
			trained := filepath.Join(run, finetune.ModelFile)
			types, changed := weightTypes(t, trained, base)
			for name, dt := range types {
				if dt != onnx.Float16 {
					t.Errorf("model.onnx stores %s as %v, want float16 as the base model does", name, dt)
				}
			}
			if len(changed) == 0 {
				t.Errorf("model.onnx holds the base model's weights: the run trained nothing")
			}
			// model.onnx holds the best epoch's float32 masters rounded
			// to float16: its score may move by a pixel's rounding, no more.
			if got, want := evalMeanIoU(t, trained, data), runBestMIoU(t, run); math.Abs(got-want) > 0.01 {
				t.Errorf("eval of model.onnx: mean IoU %.4f; the run validated its best epoch at %.4f", got, want)
			}
			for _, prec := range []string{"fp16", "fp32"} {
				out := filepath.Join(dir, string(tc.kind)+"."+prec+".onnx")
				rep := exportReport(t, "--model", trained, "--out", out, "--precision", prec, "--check-images", val)
				if min := map[string]float64{"fp16": 0.99, "fp32": 0.999}[prec]; rep.Check.PixelAgreement < min {
					t.Errorf("%s export: agreement %.4f", prec, rep.Check.PixelAgreement)
				}
				if prec == "fp16" {
					if types, _ := weightTypes(t, out, base); types["w1"] != onnx.Float16 || types["w2"] != onnx.Float16 {
						t.Errorf("fp16 export stores its weights as %v", types)
					}
					// Its weights are read as stored: the input's and the
					// logits' Casts are the only ones.
					if casts := opCount(t, out, "Cast"); casts != 2 {
						t.Errorf("fp16 export has %d Casts, want 2", casts)
					}
				}
			}
		})
	}
}

// A quantized model (ConvInteger, QDQ, QLinearConv) fine-tunes with
// --dequantize into a float model, which export --precision int8 quantizes
// again, passing its agreement check; an int8 export of the quantized
// model itself is refused before any work, naming the cause.
func TestDequantizedFineTuneExportsInt8(t *testing.T) {
	runtimetest.Require(t)
	isolateModelSearch(t)
	dir := t.TempDir()
	data := synthData(t, dir, 8, 4)
	train, val := filepath.Join(data, "images", "train"), filepath.Join(data, "images", "val")
	for _, kind := range []onnxtest.Kind{onnxtest.ConvInteger, onnxtest.QDQ, onnxtest.QLinear} {
		t.Run(string(kind), func(t *testing.T) {
			run, model := toyFinetune(t, dir, data, kind, "--dequantize")
			trained := filepath.Join(run, finetune.ModelFile)
			m, err := onnx.Load(trained)
			if err != nil {
				t.Fatal(err)
			}
			if q := onnx.Quantized(m); len(q) > 0 {
				t.Fatalf("model.onnx of a --dequantize run is quantized: %s", q)
			}
			if got, want := evalMeanIoU(t, trained, data), runBestMIoU(t, run); math.Abs(got-want) > 1e-9 {
				t.Errorf("eval of model.onnx: mean IoU %.6f; the run validated its best epoch at %.6f", got, want)
			}
			// From model.onnx, and from the run's checkpoint (which
			// rebuilds the float form from the quantized base).
			for from, src := range map[string][]string{"model": {"--model", trained}, "checkpoint": {"--checkpoint", filepath.Join(run, "best.ckpt")}} {
				out := filepath.Join(dir, string(kind)+"."+from+".int8.onnx")
				rep := exportReport(t, append(src, "--out", out, "--precision", "int8", "--calibrate", train, "--check-images", val)...)
				if rep.Check.PixelAgreement < 0.95 || rep.Quantization == nil || rep.Quantization.QuantizedNodes["Conv"] != 2 {
					t.Errorf("int8 export from the %s: agreement %.4f, quantization %+v", from, rep.Check.PixelAgreement, rep.Quantization)
				}
				q, err := onnx.Load(out)
				if err != nil || len(onnx.Quantized(q)) == 0 {
					t.Errorf("the int8 export from the %s is not quantized (%v)", from, err)
				}
			}

			// The quantized base itself: refused before its calibration
			// images are screened (blank ones, which would be named).
			blank := filepath.Join(dir, string(kind)+"-blank")
			if err := os.MkdirAll(blank, 0o755); err != nil {
				t.Fatal(err)
			}
			for i := range 8 {
				writeMask(t, filepath.Join(blank, fmt.Sprintf("%d.png", i)), 32, 32, 0)
			}
			again := filepath.Join(dir, string(kind)+".again.onnx")
			_, err = runCLI(t, "export", "--model", model, "--out", again, "--precision", "int8", "--calibrate", blank)
			if err == nil || !strings.Contains(err.Error(), "--precision int8: the model is quantized already") || strings.Contains(err.Error(), "near-constant") {
				t.Errorf("int8 export of the quantized model: %v; want it refused as quantized before calibration", err)
			}
			if _, err := os.Stat(again); err == nil {
				t.Errorf("the refused export wrote %s", again)
			}
		})
	}
}

// An IR-3, opset-7 export (weights listed as graph inputs, Upsample,
// attribute Clip) fine-tunes through the CLI, which says what became of
// the weight inputs; its model.onnx holds the trained weights as
// initializers only, and exports at fp16 and at int8 (raised to opset 13)
// pass their agreement checks.
func TestOldExportFineTunesAndExports(t *testing.T) {
	runtimetest.Require(t)
	isolateModelSearch(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "legacy.onnx")
	legacySegmenter(t, model)
	data := synthData(t, dir, 8, 4)
	train, val := filepath.Join(data, "images", "train"), filepath.Join(data, "images", "val")
	run := filepath.Join(dir, "run")
	stderr, err := runCLIStderr(t, "finetune", "--model", model, "--data", data, "--out", run, "--steps", "2", "--batch", "1",
		"--lr", "0.01", "--value-scale", "0.0039", "--threads", "2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "note: legacy.onnx: the model listed 2 of its initializers as graph inputs too") {
		t.Errorf("finetune does not say what became of the weight inputs:\n%s", stderr)
	}
	trained := filepath.Join(run, finetune.ModelFile)
	m, err := onnx.Load(trained)
	if err != nil {
		t.Fatal(err)
	}
	base, err := onnx.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	if m.WeightInputs != 0 || len(m.Proto.Graph.GetInput()) != 1 {
		t.Errorf("model.onnx lists %d weights among its %d inputs; want the image input alone", m.WeightInputs, len(m.Proto.Graph.GetInput()))
	}
	for _, name := range []string{"w1", "w2"} {
		a, _ := onnx.Float32s(m.Initializer(name))
		b, _ := onnx.Float32s(base.Initializer(name))
		if len(a) == 0 || slices.Equal(a, b) {
			t.Errorf("model.onnx's %s is the base model's: the run did not train it", name)
		}
	}
	exportReport(t, "--model", trained, "--out", filepath.Join(dir, "fp16.onnx"), "--precision", "fp16", "--check-images", val)
	rep := exportReport(t, "--model", trained, "--out", filepath.Join(dir, "int8.onnx"), "--precision", "int8", "--calibrate", train, "--check-images", val)
	if rep.Opset == nil || rep.Opset.To != 13 || rep.Check.PixelAgreement < 0.95 {
		t.Errorf("int8 export: opset %+v, agreement %.4f; want raised to 13 and agreeing", rep.Opset, rep.Check.PixelAgreement)
	}
}
