package gradcheck_test

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/gradcheck"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime/runtimetest"
)

func randTensor(rng *rand.Rand, name string, dims ...int64) *onnx.TensorProto {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64()) * 0.5
	}
	return onnx.NewFloat32Tensor(name, dims, v)
}

// netModel wraps what b built in an opset-13 model with a float input
// "input" of the given shape and an output "logits".
func netModel(b *onnx.Builder, name string, input ...int64) *onnx.Model {
	return onnx.NewModel(b.Graph(name, []*onnx.ValueInfoProto{onnx.TensorValueInfo("input", onnx.Float32, input...)},
		[]*onnx.ValueInfoProto{{Name: proto.String("logits")}}), 13)
}

// convNet is input [2,3,8,8] → Conv → Relu → MaxPool → Conv → Clip(0, 6)
// → logits: kinks everywhere, linear in each weight between them.
func convNet() *onnx.Model {
	rng := rand.New(rand.NewPCG(1, 2))
	b := &onnx.Builder{}
	w1 := b.Initializer(randTensor(rng, "w1", 6, 3, 3, 3))
	b1 := b.Initializer(randTensor(rng, "b1", 6))
	w2 := b.Initializer(randTensor(rng, "w2", 4, 6, 3, 3))
	b2 := b.Initializer(randTensor(rng, "b2", 4))
	lo, hi := b.ConstFloat("lo", onnx.Float32, nil, 0), b.ConstFloat("hi", onnx.Float32, nil, 6)
	c1 := b.Node("Conv", "c1", []string{"input", w1, b1}, onnx.IntsAttr("pads", 1, 1, 1, 1))
	p1 := b.Node("MaxPool", "p1", []string{b.Node("Relu", "r1", []string{c1})}, onnx.IntsAttr("kernel_shape", 2, 2), onnx.IntsAttr("strides", 2, 2))
	c2 := b.Node("Conv", "c2", []string{p1, w2, b2}, onnx.IntsAttr("pads", 1, 1, 1, 1))
	b.Node("Clip", "logits", []string{c2, lo, hi})
	return netModel(b, "net", 2, 3, 8, 8)
}

// smoothNet is input [4,5] → MatMul → Tanh → MatMul → logits: smooth,
// and every operator has double kernels, so checks run in float64.
func smoothNet() *onnx.Model {
	rng := rand.New(rand.NewPCG(3, 4))
	b := &onnx.Builder{}
	w1 := b.Initializer(randTensor(rng, "w1", 5, 6))
	w2 := b.Initializer(randTensor(rng, "w2", 6, 3))
	h := b.Node("MatMul", "h", []string{"input", w1})
	b.Node("MatMul", "logits", []string{b.Node("Tanh", "a", []string{h}), w2})
	return netModel(b, "smooth", 4, 5)
}

// build compiles m for param with a random upstream gradient on logits.
func build(t *testing.T, m *onnx.Model, param string) *grad.Graphs {
	t.Helper()
	gs, err := grad.Build(m, grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{param}, Loss: grad.Loss{Kind: grad.LossNone},
		GradInputs: []string{"logits"}, ExtraOutputs: []string{"logits"}})
	if err != nil {
		t.Fatal(err)
	}
	return gs
}

// TestCheckRejectsWrongGradients is the checker's negative control: the
// true gradient passes, and one scaled by 1.5 or with the wrong sign fails
// on every direction.
func TestCheckRejectsWrongGradients(t *testing.T) {
	runtimetest.Require(t)
	for _, tc := range []struct {
		name   string
		m      *onnx.Model
		params []string
		opt    gradcheck.Options
	}{
		// Plain differences in float64 on a smooth network.
		{"smooth", smoothNet(), []string{"w1", "w2"}, gradcheck.Options{Seed: 4, Directions: 4}},
		// Frozen kinks in float32 on a ReLU/MaxPool/ReLU6 network.
		{"frozen", convNet(), []string{"w1", "w2"}, gradcheck.Options{Seed: 4, Directions: 4, FreezeKinks: true, Step: 1}},
	} {
		for _, param := range tc.params {
			for _, k := range []float64{1, 1.5, -1} {
				gs := build(t, tc.m, param)
				if k != 1 {
					gradcheck.ScaleGradient(gs, param, k)
				}
				pass := k == 1
				res, err := gradcheck.CheckGraphs(gs, nil, tc.opt)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range res.Directions {
					// 1.5× gives a relative error of 1/3, a flipped sign 2.
					if pass && d.RelErr > 1e-3 || !pass && d.RelErr < 0.3 {
						t.Errorf("%s %s, gradient × %g: analytic %g numeric %g relative error %.3g", tc.name, param, k, d.Analytic, d.Numeric, d.RelErr)
					}
				}
				t.Logf("RESULT %s %s ×%g float64=%v max_rel_err=%.2e", tc.name, param, k, res.Float64, res.MaxRelErr)
			}
		}
	}
}

// TestFreezeKinks: with a step as large as the weights, plain differences
// cross kinks and miss; frozen ones are exact up to float32 rounding.
func TestFreezeKinks(t *testing.T) {
	runtimetest.Require(t)
	gs := build(t, convNet(), "w1")
	plain, err := gradcheck.CheckGraphs(gs, nil, gradcheck.Options{Seed: 4, Float32: true, Step: 1})
	if err != nil {
		t.Fatal(err)
	}
	frozen, err := gradcheck.CheckGraphs(gs, nil, gradcheck.Options{Seed: 4, Float32: true, Step: 1, FreezeKinks: true})
	if err != nil {
		t.Fatal(err)
	}
	if frozen.MaxRelErr > 1e-4 {
		t.Errorf("frozen kinks: max relative error %.3g > 1e-4", frozen.MaxRelErr)
	}
	if plain.MaxRelErr < 1e-2 {
		t.Errorf("plain differences at step 1: max relative error %.3g; the test no longer shows what freezing is for", plain.MaxRelErr)
	}
	t.Logf("RESULT step 1: plain %.2e, frozen %.2e", plain.MaxRelErr, frozen.MaxRelErr)
}
