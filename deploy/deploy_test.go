package deploy

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/models/synth"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/quantize"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// synthModel parses the embedded segtune-synth model and looks up its
// registry entry.
func synthModel(t *testing.T) (*onnx.Model, models.Entry) {
	t.Helper()
	m, err := onnx.Parse(models.SynthModel, "")
	if err != nil {
		t.Fatal(err)
	}
	entry, err := models.Lookup(models.SynthName)
	if err != nil {
		t.Fatal(err)
	}
	return m, entry
}

// synthSetup opens the embedded segtune-synth model and writes a small
// synthetic data set: 8 training images to calibrate on, 6 validation
// images with masks to check on.
func synthSetup(t *testing.T) (*onnx.Model, *inference.Segmenter, []string, CheckOptions) {
	t.Helper()
	runtimetest.Require(t)
	m, entry := synthModel(t)
	ct, err := contract.Read(m, contract.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	opts := runtime.Options{Threads: 2}
	ref, err := inference.Open(models.SynthModel, ct, entry.Preprocess, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	dir := t.TempDir()
	cfg := synth.DefaultConfig()
	cfg.Seed, cfg.Train, cfg.Val = 5, 8, 6
	if _, err := synth.Generate(dir, cfg); err != nil {
		t.Fatal(err)
	}
	train, err := imageio.ListImages(filepath.Join(dir, "images", "train"))
	if err != nil {
		t.Fatal(err)
	}
	pairing, err := imageio.PairDataset(filepath.Join(dir, "images", "val"), filepath.Join(dir, "masks", "val"))
	if err != nil || len(pairing.Pairs) != 6 {
		t.Fatalf("val pairs: %v %v", pairing, err)
	}
	co := CheckOptions{Masks: map[string]string{}, Ignore: 255, Names: entry.Classes, Session: opts, Source: "synth val"}
	for _, p := range pairing.Pairs {
		co.Images = append(co.Images, p.Image)
		co.Masks[p.Image] = p.Mask
	}
	return m, ref, train, co
}

func TestInt8SynthEndToEnd(t *testing.T) {
	m, ref, train, co := synthSetup(t)
	for _, method := range quantize.Methods {
		t.Run(string(method), func(t *testing.T) {
			conv, err := Convert(m, ref, Options{Precision: INT8, CalibImages: train, Calib: quantize.CalibOptions{Method: method}, Session: co.Session})
			if err != nil {
				t.Fatal(err)
			}
			if conv.Calibration.Images != 8 || conv.Calibration.Method != string(method) {
				t.Errorf("calibration %+v", conv.Calibration)
			}
			// Every Clip (ReLU6) after a Conv is folded into a range.
			q := conv.Quant
			if q.QuantizedNodes["Conv"] != 61 || q.FusedActivations < 30 || q.Int32Biases == 0 {
				t.Errorf("summary %+v", q)
			}
			for _, n := range conv.Model.Graph().GetNode() {
				if (n.GetOpType() == "QuantizeLinear" || n.GetOpType() == "DequantizeLinear") && n.GetDomain() != "" {
					t.Fatalf("%s in domain %q", n.GetName(), n.GetDomain())
				}
			}
			data, err := conv.Model.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			chk, err := CheckExport(ref, conv.Model, data, contract.Overrides{}, co)
			if err != nil {
				t.Fatal(err)
			}
			// ONNX Runtime runs it with integer kernels, not as float
			// with fake quantization.
			if chk.Kernels.Error != "" || chk.Kernels.Ops["com.microsoft.QLinearConv"]+chk.Kernels.Ops["QLinearConv"] < 50 {
				t.Errorf("ORT kernels %+v", chk.Kernels)
			}
			if chk.PixelAgreement < 0.95 {
				t.Errorf("pixel agreement %.4f", chk.PixelAgreement)
			}
			if chk.MeanIoUDelta == nil || *chk.MeanIoUDelta < -0.05 {
				t.Errorf("mean IoU change %v (float %v, int8 %v)", chk.MeanIoUDelta, chk.Float.MeanIoU, chk.Exported.MeanIoU)
			}
			if chk.Contract.Classes != 3 || chk.Contract.Kind != contract.Logits {
				t.Errorf("contract %+v", chk.Contract)
			}
			t.Logf("%s: agreement %.4f, mean IoU %.4f → %.4f", method, chk.PixelAgreement, *chk.Float.MeanIoU, *chk.Exported.MeanIoU)
		})
	}
}

func TestFloat16SynthEndToEnd(t *testing.T) {
	m, ref, _, co := synthSetup(t)
	conv, err := Convert(m, ref, Options{Precision: FP16})
	if err != nil {
		t.Fatal(err)
	}
	g := conv.Model.Graph()
	in, out := g.GetInput()[0], g.GetOutput()[0]
	if in.GetType().GetTensorType().GetElemType() != int32(onnx.Float32) || out.GetType().GetTensorType().GetElemType() != int32(onnx.Float32) {
		t.Error("the float32 contract at the edges changed")
	}
	if conv.Float16.Float16Nodes["Conv"] != 61 || conv.Float16.Initializers == 0 {
		t.Errorf("summary %+v", conv.Float16)
	}
	data, err := conv.Model.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > len(models.SynthModel)*6/10 {
		t.Errorf("float16 model is %d bytes, float32 %d: weights not halved", len(data), len(models.SynthModel))
	}
	chk, err := CheckExport(ref, conv.Model, data, contract.Overrides{}, co)
	if err != nil {
		t.Fatal(err)
	}
	if chk.PixelAgreement < 0.99 {
		t.Errorf("pixel agreement %.4f, want ≥ 0.99", chk.PixelAgreement)
	}
	t.Logf("fp16: agreement %.5f; ORT inserted %d Casts", chk.PixelAgreement, chk.Kernels.InsertedCasts)
}

// A model whose export changes the contract is refused by the check.
func TestCheckRefusesChangedContract(t *testing.T) {
	m, ref, _, co := synthSetup(t)
	bad := m.Clone()
	bad.Graph().Output[0].Name = ptr("renamed")
	for _, n := range bad.Graph().GetNode() {
		for i, o := range n.Output {
			if o == "logits" {
				n.Output[i] = "renamed"
			}
		}
	}
	data, _ := bad.Marshal()
	if _, err := CheckExport(ref, bad, data, contract.Overrides{}, co); err == nil {
		t.Error("a renamed output passed the contract check")
	}
}

func ptr(s string) *string { return &s }

func TestSample(t *testing.T) {
	paths := []string{"a", "b", "c", "d", "e", "f"}
	if got := Sample(paths, 3); len(got) != 3 || got[0] != "a" || got[1] != "c" || got[2] != "e" {
		t.Errorf("Sample 3 of 6: %v", got)
	}
	if got := Sample(paths, 0); len(got) != 6 {
		t.Errorf("Sample 0: %v", got)
	}
}

// Under a small memory limit the calibration tensors are fetched over
// several runs per image, with the same ranges; under a tiny one the
// error names a tensor.
func TestCalibrationSplitsToFitMemory(t *testing.T) {
	m, ref, train, co := synthSetup(t)
	types, err := ElemTypes(m)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := quantize.NewPlan(m, types, quantize.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ranges := func() (map[string]quantize.Range, *CalibrationInfo, error) {
		cal, _ := quantize.NewCalibrator(quantize.CalibOptions{})
		return Calibrate(m, ref, plan.Calibrate, types, train[:2], cal, co.Session, nil)
	}
	want, info, err := ranges()
	if err != nil || info.Passes != 1 {
		t.Fatalf("default limit: %v, passes %v", err, info)
	}
	defer memlimit.Set(0)
	memlimit.Set(8 << 20) // a quarter: 2 MiB, less than the synth model's tensors of one image
	got, info, err := ranges()
	if err != nil {
		t.Fatal(err)
	}
	if info.Passes < 2 {
		t.Errorf("%d passes under an 8 MiB limit", info.Passes)
	}
	// Exposing other outputs changes which nodes ONNX Runtime fuses, and
	// so the last bits of some values.
	close := func(a, b float32) bool { return math.Abs(float64(a-b)) <= 1e-5*math.Max(1, math.Abs(float64(b))) }
	for name, r := range want {
		if g, ok := got[name]; !ok || !close(g.Min, r.Min) || !close(g.Max, r.Max) {
			t.Errorf("%s: %+v in passes, %+v at once", name, got[name], r)
		}
	}
	memlimit.Set(64 << 10)
	if _, _, err := ranges(); err == nil || !errors.Is(err, memlimit.ErrTooLarge) || !strings.Contains(err.Error(), "tensor") {
		t.Errorf("64 KiB limit: %v", err)
	}
}
