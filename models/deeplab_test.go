package models_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/network"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/gradcheck"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

func buildDeepLab(t testing.TB, cfg models.DeepLabConfig) *onnx.Model {
	t.Helper()
	m, err := models.DeepLabV3Plus(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The network runs at any batch and size, gives [N,K,H,W] logits that
// depend on the image and on the position, and is a pure function of the
// seed.
func TestDeepLabForwardAtTwoSizes(t *testing.T) {
	runtimetest.Require(t)
	cfg := models.DefaultDeepLabConfig()
	m := buildDeepLab(t, cfg)
	s := session(t, m)
	if got := s.Inputs[0]; got.Name != "input" || !slices.Equal(got.Shape, []int64{-1, 3, -1, -1}) {
		t.Fatalf("input %+v, want input [-1 3 -1 -1]", got)
	}
	if got := s.Outputs[0]; got.Name != "logits" || !slices.Equal(got.Shape, []int64{-1, 3, -1, -1}) {
		t.Fatalf("output %+v, want logits [-1 3 -1 -1]", got)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, shape := range [][]int64{{1, 3, 64, 64}, {2, 3, 72, 100}} {
		in := randomFloats(r, numel(shape))
		out, err := s.Run(runtime.NewFloat32(shape, in))
		if err != nil {
			t.Fatalf("%v: %v", shape, err)
		}
		want := []int64{shape[0], int64(cfg.Classes), shape[2], shape[3]}
		if !slices.Equal(out[0].Shape, want) {
			t.Fatalf("input %v: logits %v, want %v", shape, out[0].Shape, want)
		}
		_, std := stats(t, "logits", out[0].Float32)
		if !(std > 1e-3) || std > 100 {
			t.Errorf("input %v: logits standard deviation %.3g; want a live, bounded network", shape, std)
		}
		if shape[0] == 2 {
			half := len(out[0].Float32) / 2
			if slices.Equal(out[0].Float32[:half], out[0].Float32[half:]) {
				t.Error("two different images gave the same logits")
			}
		}
	}
	again := buildDeepLab(t, cfg)
	a, _ := m.Marshal()
	b, _ := again.Marshal()
	if !bytes.Equal(a, b) {
		t.Error("the same config built two different models")
	}
	cfg.Seed++
	c, _ := buildDeepLab(t, cfg).Marshal()
	if bytes.Equal(a, c) {
		t.Error("another seed built the same model")
	}
}

// The model compiles into a training graph whose logits are the inference
// model's, whose loss starts near log K, and whose gradients reach every
// layer in front of a non-zero weight.
func TestDeepLabTrainingGraph(t *testing.T) {
	runtimetest.Require(t)
	cfg := models.DefaultDeepLabConfig()
	m := buildDeepLab(t, cfg)
	train := m.Clone()
	if err := network.SetBatch(train, 2); err != nil {
		t.Fatal(err)
	}
	shape := []int64{2, 3, 64, 64}
	gs, err := grad.Build(train, grad.Config{
		Prober:      ortprobe.Prober{Threads: 2},
		Trainable:   []string{"*.weight", "*.bias"},
		InputShapes: map[string][]int64{"input": shape},
		Loss:        grad.Loss{Kind: grad.LossCrossEntropy},
	})
	if err != nil {
		t.Fatal(err)
	}
	layers, err := network.Layers(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(gs.Params) != 2*len(layers) {
		t.Fatalf("%d trainable parameters for %d conv layers", len(gs.Params), len(layers))
	}
	if cls, err := network.Classifier(m); err != nil || cls.Params[0] != "classifier.weight" {
		t.Fatalf("classifier %v (%v), want classifier.weight", cls.Params, err)
	}

	r := rand.New(rand.NewPCG(3, 4))
	img := randomFloats(r, numel(shape))
	target := make([]int64, 2*64*64)
	for i := range target {
		target[i] = int64(r.IntN(cfg.Classes))
	}
	s := session(t, gs.Training)
	feeds := make([]*runtime.Tensor, len(s.Inputs))
	feeds[s.InputIndex("input")] = runtime.NewFloat32(shape, img)
	feeds[s.InputIndex(grad.TargetName)] = runtime.NewInt64([]int64{2, 64, 64}, target)
	for _, p := range gs.Params {
		v, err := onnx.Float32s(p)
		if err != nil {
			t.Fatal(err)
		}
		feeds[s.InputIndex(p.GetName())] = runtime.NewFloat32(p.GetDims(), v)
	}
	for i, f := range feeds {
		if f == nil {
			t.Fatalf("training graph input %q is not fed", s.Inputs[i].Name)
		}
	}
	outs, err := s.Run(feeds...)
	if err != nil {
		t.Fatal(err)
	}
	loss := float64(outs[s.OutputIndex(grad.LossName)].Float32[0])
	if math.Abs(loss-math.Log(float64(cfg.Classes))) > 1 {
		t.Errorf("initial loss %.4f, want about log %d = %.4f", loss, cfg.Classes, math.Log(float64(cfg.Classes)))
	}

	// The training graph's logits match the inference model's.
	ref, err := session(t, m).Run(runtime.NewFloat32(shape, img))
	if err != nil {
		t.Fatal(err)
	}
	got := outs[s.OutputIndex("logits")].Float32
	var maxDiff float64
	for i, v := range ref[0].Float32 {
		maxDiff = max(maxDiff, math.Abs(float64(v-got[i])))
	}
	if maxDiff > 1e-3 {
		t.Errorf("training-graph logits differ from the model's by %.3g", maxDiff)
	}

	// Residual projections start at zero, so the layers inside residual
	// branches get no gradient at step 0; every other layer must.
	zeroStart := map[string]bool{}
	for _, p := range gs.Params {
		if v, _ := onnx.Float32s(p); strings.HasSuffix(p.GetName(), ".weight") && !slices.ContainsFunc(v, func(x float32) bool { return x != 0 }) {
			zeroStart[strings.TrimSuffix(p.GetName(), ".project.weight")] = true
		}
	}
	if len(zeroStart) == 0 {
		t.Fatal("no residual block")
	}
	var live int
	for _, p := range gs.Params {
		name := p.GetName()
		g := outs[s.OutputIndex(grad.GradPrefix+name)].Float32
		_, std := stats(t, "grad/"+name, g)
		inResidual := false
		for blk := range zeroStart {
			if strings.HasPrefix(name, blk+".expand.") || strings.HasPrefix(name, blk+".depthwise.") {
				inResidual = true
			}
		}
		switch {
		case inResidual:
		case std == 0 && !slices.ContainsFunc(g, func(x float32) bool { return x != 0 }):
			t.Errorf("no gradient reaches %s", name)
		default:
			live++
		}
	}
	t.Logf("initial loss %.4f; %d parameter tensors, %d with a gradient at step 0 (%d residual blocks start as identities); logits match to %.2g",
		loss, len(gs.Params), live, len(zeroStart), maxDiff)
}

func TestDeepLabParameterCounts(t *testing.T) {
	var prev int64
	for _, w := range []float64{0.35, 0.5, 0.75, 1.0} {
		cfg := models.DefaultDeepLabConfig()
		cfg.Width = w
		n := buildDeepLab(t, cfg).Summary().Parameters
		t.Logf("DeepLabV3+ width %.2f: %d parameters (%.2f M)", w, n, float64(n)/1e6)
		if n <= prev {
			t.Errorf("width %v: %d parameters, not more than %d at the smaller width", w, n, prev)
		}
		prev = n
	}
	def := buildDeepLab(t, models.DefaultDeepLabConfig()).Summary().Parameters
	if def < 300_000 || def > 1_000_000 {
		t.Errorf("the default network has %d parameters; want 0.3–1 M so that it trains fast on a CPU", def)
	}
	shallow := models.DefaultDeepLabConfig()
	shallow.Depth = 1
	if n := buildDeepLab(t, shallow).Summary().Parameters; n >= def {
		t.Errorf("depth 1: %d parameters, not fewer than the default's %d", n, def)
	}
}

// Output stride 8 keeps one more stage at full resolution with dilated
// convolutions: same parameters, same output, four times the ASPP area.
func TestDeepLabOutputStride8(t *testing.T) {
	runtimetest.Require(t)
	cfg := models.DefaultDeepLabConfig()
	cfg.OutputStride = 8
	cfg.ASPPRates = nil
	m8 := buildDeepLab(t, cfg)
	m16 := buildDeepLab(t, models.DefaultDeepLabConfig())
	if a, b := m8.Summary().Parameters, m16.Summary().Parameters; a != b {
		t.Errorf("output stride 8: %d parameters, 16: %d", a, b)
	}
	out, err := session(t, m8).Run(runtime.NewFloat32([]int64{1, 3, 48, 80}, randomFloats(rand.New(rand.NewPCG(1, 1)), 3*48*80)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out[0].Shape, []int64{1, 3, 48, 80}) {
		t.Errorf("logits %v", out[0].Shape)
	}
	dil := 0
	for _, n := range m8.Proto.Graph.Node {
		for _, a := range n.Attribute {
			if a.GetName() == "dilations" && a.Ints[0] > 1 && strings.Contains(n.GetName(), "depthwise") {
				dil++
			}
		}
	}
	if dil < 7 {
		t.Errorf("%d dilated depthwise convs at output stride 8; want the last 7 blocks' at least", dil)
	}
}

func TestDeepLabConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		edit func(*models.DeepLabConfig)
		want string
	}{
		{func(c *models.DeepLabConfig) { c.OutputStride = 32 }, "output stride"},
		{func(c *models.DeepLabConfig) { c.Width = -1 }, "width"},
		{func(c *models.DeepLabConfig) { c.Classes = -2 }, "classes"},
		{func(c *models.DeepLabConfig) { c.ASPPRates = []int{2, 0} }, "rate"},
		{func(c *models.DeepLabConfig) { c.Stages = c.Stages[:1] }, "stride 4"},
		{func(c *models.DeepLabConfig) { c.Stages = c.Stages[:3] }, "output stride 16"},
		{func(c *models.DeepLabConfig) { c.Stages[2].Stride = 3 }, "stride 1 or 2"},
	} {
		cfg := models.DefaultDeepLabConfig()
		tc.edit(&cfg)
		if _, err := models.DeepLabV3Plus(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one mentioning %q", cfg, err, tc.want)
		}
	}
	// Zero fields take the defaults.
	a, _ := buildDeepLab(t, models.DeepLabConfig{Seed: 1}).Marshal()
	b, _ := buildDeepLab(t, models.DefaultDeepLabConfig()).Marshal()
	if !bytes.Equal(a, b) {
		t.Error("the zero config (seed 1) differs from DefaultDeepLabConfig")
	}
}

// Finite differences agree with the training graph's gradients for the
// first and the last layers, through every Resize and the whole backbone.
// The differences are taken with every ReLU/ReLU6 frozen on its linear
// piece at θ (gradcheck.Options.FreezeKinks): the network is then affine in
// each weight tensor, so a step as large as the weights is exact up to
// float32 rounding and the bound can be tight — tight enough to reject a
// weight gradient scaled by 1.6, which the former loose bound (0.5)
// accepted.
func TestDeepLabGradientCheck(t *testing.T) {
	runtimetest.Require(t)
	cfg := models.DefaultDeepLabConfig()
	cfg.Width, cfg.Depth = 0.35, 1
	m := buildDeepLab(t, cfg)
	opt := gradcheck.Options{Directions: 3, Seed: 5, Step: 1, FreezeKinks: true, Threads: 2}
	for _, param := range []string{"backbone.stem.weight", "aspp.pool.weight", "classifier.weight"} {
		gs, err := grad.Build(m, grad.Config{
			Prober:    ortprobe.Prober{Threads: 2},
			Trainable: []string{param}, InputShapes: map[string][]int64{"input": {1, 3, 40, 48}},
			Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: []string{"logits"}, ExtraOutputs: []string{"logits"},
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := gradcheck.CheckGraphs(gs, nil, opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range res.Directions {
			if d.RelErr > 1e-3 {
				t.Errorf("%s: analytic %.6g, numeric %.6g: relative error %.3g", param, d.Analytic, d.Numeric, d.RelErr)
			}
		}
		t.Logf("%s: max relative error %.2e (float64 %v)", param, res.MaxRelErr, res.Float64)
		if param != "backbone.stem.weight" {
			continue
		}
		// Negative control: the stem's gradient scaled by 1.6 must fail.
		gradcheck.ScaleGradient(gs, param, 1.6)
		res, err = gradcheck.CheckGraphs(gs, nil, opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range res.Directions {
			if d.RelErr < 0.3 {
				t.Errorf("%s × 1.6 passed: analytic %.6g, numeric %.6g: relative error %.3g", param, d.Analytic, d.Numeric, d.RelErr)
			}
		}
	}
}

func TestWriteNewDeepLab(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.onnx")
	cfg := models.DefaultDeepLabConfig()
	cfg.Classes = 4
	params, sidecar, err := models.WriteNewDeepLab(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Summary().Parameters; got != params || params == 0 {
		t.Fatalf("reported %d parameters, the file has %d", params, got)
	}
	side, err := imageio.LoadSidecar(sidecar)
	if err != nil || sidecar != imageio.SidecarPath(path) {
		t.Fatalf("sidecar %s: %v", sidecar, err)
	}
	if p := side.Preprocess; p == nil || p.ValueScale != 1/127.5 || p.ValueOffset != -1 {
		t.Fatalf("sidecar preprocessing %+v, want inputs scaled to [-1, 1]", side.Preprocess)
	}
}
