package deploy

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/models/synth"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
	"github.com/segtune/segtune/onnx/upgrade"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// legacyModel is a small segmenter written the way keras2onnx, tf2onnx
// and old torch.onnx wrote them: IR version 3 with every initializer also
// a graph input, opset 7, Upsample, and Clip, Pad, Slice and
// BatchNormalization (spatial) in their attribute forms. X [1,3,48,64] →
// logits [1,3,48,64].
func legacyModel(t *testing.T) []byte {
	t.Helper()
	r := rand.New(rand.NewPCG(43, 7))
	rnd := func(n int, s float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = (r.Float32()*2 - 1) * s
		}
		return v
	}
	b := &onnx.Builder{}
	w := func(name string, dims []int64, s float32) string {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		return b.Initializer(onnx.NewFloat32Tensor(name, dims, rnd(int(n), s)))
	}
	pos := func(name string, n int64) string {
		v := rnd(int(n), 0.5)
		for i := range v {
			v[i] += 1
		}
		return b.Initializer(onnx.NewFloat32Tensor(name, []int64{n}, v))
	}
	b.Emit("Conv", "conv1", []string{"X", w("w1", []int64{8, 3, 3, 3}, 0.6), w("b1", []int64{8}, 0.1)}, []string{"c1"},
		onnx.IntsAttr("pads", 1, 1, 1, 1), onnx.IntsAttr("kernel_shape", 3, 3))
	b.Emit("BatchNormalization", "bn1", []string{"c1", pos("bn_scale", 8), w("bn_b", []int64{8}, 0.1), w("bn_mean", []int64{8}, 0.1), pos("bn_var", 8)},
		[]string{"n1"}, onnx.IntAttr("spatial", 1), onnx.FloatAttr("epsilon", 1e-3))
	b.Emit("Clip", "relu6", []string{"n1"}, []string{"a1"}, onnx.FloatAttr("min", 0), onnx.FloatAttr("max", 6))
	b.Emit("Pad", "pad", []string{"a1"}, []string{"p1"}, onnx.IntsAttr("pads", 0, 0, 1, 1, 0, 0, 1, 1))
	b.Emit("Conv", "conv2", []string{"p1", w("w2", []int64{8, 8, 3, 3}, 0.3), w("b2", []int64{8}, 0.1)}, []string{"c2"},
		onnx.IntsAttr("strides", 2, 2))
	b.Emit("Relu", "relu2", []string{"c2"}, []string{"a2"})
	b.Emit("Slice", "slice", []string{"a2"}, []string{"s2"}, onnx.IntsAttr("starts", 0), onnx.IntsAttr("ends", 6), onnx.IntsAttr("axes", 1))
	b.Emit("Conv", "classifier", []string{"s2", w("w3", []int64{3, 6, 1, 1}, 1), w("b3", []int64{3}, 0.2)}, []string{"low"})
	b.Emit("Upsample", "up", []string{"low"}, []string{"logits"}, onnx.FloatsAttr("scales", 1, 1, 2, 2))
	inputs := []*onnxpb.ValueInfoProto{onnx.TensorValueInfo("X", onnxpb.TensorProto_FLOAT, 1, 3, 48, 64)}
	g := b.Graph("legacy", inputs, []*onnxpb.ValueInfoProto{onnx.TensorValueInfo("logits", onnxpb.TensorProto_FLOAT, 1, 3, 48, 64)})
	for _, init := range g.Initializer {
		g.Input = append(g.Input, onnx.TensorValueInfo(init.GetName(), onnxpb.TensorProto_FLOAT, init.GetDims()...))
	}
	m := onnx.NewModel(g, 7)
	ir := int64(3)
	m.Proto.IrVersion = &ir
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// legacyImages writes synthetic 48×64 images: 8 to calibrate on, 6 to
// check on.
func legacyImages(t *testing.T) (calib, checks []string) {
	t.Helper()
	dir := t.TempDir()
	cfg := synth.DefaultConfig()
	cfg.Seed, cfg.Train, cfg.Val, cfg.Height, cfg.Width = 9, 8, 6, 48, 64
	if _, err := synth.Generate(dir, cfg); err != nil {
		t.Fatal(err)
	}
	calib, err := imageio.ListImages(filepath.Join(dir, "images", "train"))
	if err != nil {
		t.Fatal(err)
	}
	checks, err = imageio.ListImages(filepath.Join(dir, "images", "val"))
	if err != nil {
		t.Fatal(err)
	}
	return calib, checks
}

// exportLegacy plans and runs an export of m at precision (and opset,
// 0: the model's own), calibrated and checked on the images, and fails
// the test unless it passes its agreement check.
func exportLegacy(t *testing.T, m *onnx.Model, precision Precision, opset int64, calib, checks []string) *Exported {
	t.Helper()
	ct, err := contract.Read(m, contract.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	opts := runtime.Options{Threads: 2}
	pre := imageio.Preprocess{}
	p := &Prepared{Request: Request{Source: "legacy.onnx", Out: filepath.Join(t.TempDir(), "out.onnx"), Precision: precision, Opset: opset}}
	plan, err := p.Plan(m, imageio.Sidecar{Preprocess: &pre})
	if err != nil {
		t.Fatal(err)
	}
	plan.Convert.Session, plan.Convert.CalibImages = opts, calib
	plan.Check = CheckOptions{Images: checks, Source: "synth val", Session: opts, Ignore: 255}
	plan.MinAgreement = DefaultMinAgreement[precision]
	plan.Contract = ct
	e, err := Export(plan)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Report.Passed {
		t.Fatalf("%s export failed its check: %v", precision, e.Report.Problems)
	}
	if got := e.Model.Proto.Graph.GetInput(); len(got) != 1 {
		t.Errorf("the exported model has %d inputs, want the image alone", len(got))
	}
	var text strings.Builder
	e.Report.WriteText(&text)
	t.Logf("agreement %.4f\n%s", e.Report.Check.PixelAgreement, text.String())
	return e
}

// An IR-3, opset-7 export passes its fp16 and int8 exports' agreement
// checks: its weight inputs are read as weights (fp16 conversion failed on
// them in ONNX Runtime), and int8 raises it to opset 13 (QDQ needs 10),
// said in the report; --opset 21 rewrites each of its old operators.
func TestLegacyExportPassesAtEachPrecision(t *testing.T) {
	runtimetest.Require(t)
	m, err := onnx.Parse(legacyModel(t), "")
	if err != nil {
		t.Fatal(err)
	}
	calib, checks := legacyImages(t)
	for _, c := range []struct {
		precision Precision
		opset     int64
	}{{FP16, 0}, {INT8, 0}, {FP32, upgrade.MaxOpset}} {
		t.Run(string(c.precision), func(t *testing.T) {
			e := exportLegacy(t, m, c.precision, c.opset, calib, checks)
			rep := e.Report
			if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "listed 10 of its initializers as graph inputs") {
				t.Fatalf("notes %q", rep.Notes)
			}
			switch c.precision {
			case FP16:
				if rep.Opset != nil || e.Model.Opset("") != 7 {
					t.Errorf("fp16: opset %d, upgrade %v; want the model's own 7", e.Model.Opset(""), rep.Opset)
				}
			case INT8:
				if rep.Opset == nil || rep.Opset.To != 13 || rep.Opset.Rewritten["Upsample"] != 1 || e.Model.Opset("") != 13 {
					t.Errorf("int8: opset %d, upgrade %v; want 13, Upsample rewritten", e.Model.Opset(""), rep.Opset)
				}
				if !rep.Quantization.PerChannel {
					t.Errorf("int8 at opset 13 quantized per tensor")
				}
			case FP32: // --opset 21
				if rep.Opset == nil || rep.Opset.To != upgrade.MaxOpset || len(rep.Opset.Rewritten) != 5 || e.Model.Opset("") != upgrade.MaxOpset {
					t.Errorf("fp32 --opset %d: opset %d, upgrade %v", upgrade.MaxOpset, e.Model.Opset(""), rep.Opset)
				}
			}
		})
	}
}

// PyTorch's own old exports (scripts/gen_legacy_models.py: opset 7 at IR
// 3, and opset 9, weights listed as inputs) pass fp16, int8 and --opset
// exports.
func TestTorchLegacyExports(t *testing.T) {
	runtimetest.Require(t)
	calib, checks := legacyImages(t)
	for _, name := range []string{"legacy_op7_ir3", "legacy_op9"} {
		m, err := onnx.Load(testassets.Generated(t, "legacy", name+".onnx"))
		if err != nil {
			t.Fatal(err)
		}
		if m.WeightInputs == 0 || m.Opset("") >= 10 {
			t.Fatalf("%s: %d weight inputs at opset %d; want an old export", name, m.WeightInputs, m.Opset(""))
		}
		for _, c := range []struct {
			precision Precision
			opset     int64
		}{{FP16, 0}, {INT8, 0}, {FP32, 17}} {
			t.Run(name+"/"+string(c.precision), func(t *testing.T) {
				e := exportLegacy(t, m, c.precision, c.opset, calib, checks)
				if c.opset != 0 && (e.Report.Opset == nil || e.Report.Opset.Rewritten["Upsample"] != 1) {
					t.Errorf("--opset %d: %v", c.opset, e.Report.Opset)
				}
			})
		}
	}
}

// The opset an export is written at: the model's own, 13 for int8 of a
// model older than QDQ, or the one asked for, which must be one QDQ can be
// written at and no older than the model's.
func TestExportOpset(t *testing.T) {
	for _, c := range []struct {
		have, asked int64
		precision   Precision
		want        int64
		err         string
	}{
		{7, 0, FP32, 7, ""}, {7, 0, FP16, 7, ""}, {7, 0, INT8, 13, ""}, {11, 0, INT8, 11, ""},
		{7, 11, FP32, 11, ""}, {7, 11, INT8, 11, ""},
		{7, 9, INT8, 0, "an int8 export needs opset 10"},
		{12, 11, FP32, 0, "older than the model's opset 12"},
		{7, upgrade.MaxOpset + 1, FP32, 0, "newer than"},
	} {
		got, err := ExportOpset(c.have, c.asked, c.precision)
		if (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) || err == nil && got != c.want {
			t.Errorf("ExportOpset(%d, %d, %s) = %d, %v; want %d, %q", c.have, c.asked, c.precision, got, err, c.want, c.err)
		}
	}
}

// An operator the upgrade has no adapter for is named by Plan, before
// any calibration, as the request's Opset; int8's own raise says why it
// was needed.
func TestPlanNamesAnOperatorItCannotUpgrade(t *testing.T) {
	m, err := onnx.Parse(legacyModel(t), "")
	if err != nil {
		t.Fatal(err)
	}
	g := m.Proto.Graph
	g.Node = append(g.Node, &onnxpb.NodeProto{OpType: strp("Scatter"), Name: strp("scatter"), Input: []string{"logits", "i", "u"}, Output: []string{"unused"}})
	pre := imageio.Preprocess{}
	for _, c := range []struct {
		precision Precision
		opset     int64
		want      string
	}{
		{INT8, 0, "an int8 export needs opset 10 or later, and the model imports opset 7: cannot upgrade the model from opset 7 to 13: no adapter for Scatter"},
		{FP32, 11, "cannot upgrade the model from opset 7 to 11: no adapter for Scatter (1 node, first \"scatter\"); export it at its own opset 7 instead"},
	} {
		p := &Prepared{Request: Request{Source: "legacy.onnx", Out: "o.onnx", Precision: c.precision, Opset: c.opset}}
		var re *RequestError
		if _, err := p.Plan(m, imageio.Sidecar{Preprocess: &pre}); !errors.As(err, &re) || re.Field != "Opset" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s --opset %d: %v; want an Opset RequestError with %q", c.precision, c.opset, err, c.want)
		}
	}
}

func strp(s string) *string { return &s }
