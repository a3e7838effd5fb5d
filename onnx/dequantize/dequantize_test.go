package dequantize_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/dequantize"
	"github.com/segtune/segtune/onnx/onnxtest"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

func run(t *testing.T, m *onnx.Model, x *runtime.Tensor) []float32 {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := runtime.NewSession(b, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Run(x)
	if err != nil {
		t.Fatal(err)
	}
	return out[0].Float32
}

// TestDequantizeKinds: each quantized form of the test network becomes a
// float model with no quantized operator left, whose logits are the
// quantized model's up to its activations' rounding and close to the float
// network it was quantized from.
func TestDequantizeKinds(t *testing.T) {
	runtimetest.Require(t)
	x := runtime.NewRandomNormal(rand.New(rand.NewPCG(1, 2)), 1, 3, 12, 16)
	for i := range x.Float32 {
		x.Float32[i] = max(-1, min(1, x.Float32[i]/2)) // the quantizers' input range
	}
	ref := run(t, onnxtest.Build(onnxtest.Float), x)
	for _, kind := range []onnxtest.Kind{onnxtest.ConvInteger, onnxtest.QDQ, onnxtest.QLinear} {
		t.Run(string(kind), func(t *testing.T) {
			m := onnxtest.Build(kind)
			quant := run(t, m, x)
			rep, err := dequantize.Apply(m)
			if err != nil {
				t.Fatal(err)
			}
			if q := onnx.Quantized(m); len(q) > 0 {
				t.Fatalf("quantized operators left: %s", q)
			}
			for _, init := range m.Proto.Graph.Initializer {
				if dt := onnx.DataType(init.GetDataType()); dt != onnx.Float32 && dt != onnx.Int64 {
					t.Errorf("initializer %s left as %v", init.GetName(), dt)
				}
			}
			got := run(t, m, x)
			var scale, dq, dr float64
			for i := range got {
				scale = max(scale, math.Abs(float64(ref[i])))
				dq = max(dq, math.Abs(float64(got[i]-quant[i])))
				dr = max(dr, math.Abs(float64(got[i]-ref[i])))
			}
			t.Logf("%s: %s; max |float − quantized| %.3g, |float − original| %.3g, logits up to %.3g", kind, rep, dq, dr, scale)
			if dq > 0.03*scale || dr > 0.03*scale {
				t.Errorf("dequantized logits differ from the quantized model's by %.3g and the original's by %.3g (logits up to %.3g)", dq, dr, scale)
			}
		})
	}
}

// TestDequantizeWeightValues: a weight becomes scale × (q − zero point),
// per output channel where the scales are.
func TestDequantizeWeightValues(t *testing.T) {
	m := onnxtest.Build(onnxtest.QDQ)
	q, _ := onnx.Int64s(m.Initializer("w1_quantized"))
	s, _ := onnx.Float32s(m.Initializer("w1_scale"))
	if _, err := dequantize.Apply(m); err != nil {
		t.Fatal(err)
	}
	w := m.Initializer("w1")
	if w == nil {
		t.Fatal("no float initializer w1 after the rewrite")
	}
	got, _ := onnx.Float32s(w)
	per := len(q) / len(s)
	for i := range got {
		if want := s[i/per] * float32(q[i]); got[i] != want {
			t.Fatalf("w1[%d] = %g, want %g × %d", i, got[i], s[i/per], q[i])
		}
	}
}

// TestDequantizeRefusesWhatItCannot: a quantized operator without a float
// form here is named, and the model is left as it was.
func TestDequantizeRefusesWhatItCannot(t *testing.T) {
	m := onnxtest.Build(onnxtest.QLinear)
	g := m.Proto.Graph
	for _, n := range g.Node {
		if n.GetName() == "classifier" {
			n.OpType = proto("QLinearAdd")
		}
	}
	before := len(g.Node)
	_, err := dequantize.Apply(m)
	if err == nil || !strings.Contains(err.Error(), "QLinearAdd") {
		t.Fatalf("error %v, want one naming QLinearAdd", err)
	}
	if len(m.Proto.Graph.Node) != before {
		t.Error("a refused model was changed")
	}
}

func proto(s string) *string { return &s }
