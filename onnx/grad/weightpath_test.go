package grad_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/gradcheck"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// weightPathCases are layers whose weights reach them through the ops
// exporters put in front (torch.onnx without constant folding, fp16
// storage): the default "*" pattern must select the stored tensors (the
// parameter rule looks through the path), and their gradients, through
// Transpose, Reshape, Unsqueeze, Squeeze, Identity and Cast, must match
// finite differences.
func weightPathCases() []opCase {
	return []opCase{
		{"Linear/MatMul_Transpose_Add", 0, func(m *opModel) {
			m.node("Transpose", []string{m.rand("W", 5, 4)}, []string{"Wt"})
			m.node("MatMul", []string{m.floats("x", []int64{2, 3, 4}, seq(24)...), "Wt"}, []string{"mm"})
			m.node("Add", []string{m.rand("b", 5), "mm"}, []string{"y"})
		}},
		{"Conv/Reshape_weight_Unsqueeze_bias", 0, func(m *opModel) {
			m.node("Reshape", []string{m.rand("W", 3, 8), m.ints("ws", []int64{4}, 3, 2, 2, 2)}, []string{"W4"})
			m.node("Conv", []string{m.floats("x", []int64{1, 2, 4, 4}, seq(32)...), "W4"}, []string{"c"})
			m.node("Unsqueeze", []string{m.rand("b", 3), m.ints("axes", []int64{2}, 1, 2)}, []string{"b3"})
			m.node("Add", []string{"c", "b3"}, []string{"y"})
		}},
		{"Gemm/Identity_Squeeze_chain", 0, func(m *opModel) {
			m.node("Identity", []string{m.rand("W", 1, 4, 5)}, []string{"Wi"})
			m.node("Squeeze", []string{"Wi", m.ints("axes", []int64{1}, 0)}, []string{"W2"})
			m.node("Gemm", []string{m.floats("x", []int64{3, 4}, seq(12)...), "W2"}, []string{"y"})
		}},
		{"Mul/Cast_Reshape_scale", 0, func(m *opModel) {
			m.node("MatMul", []string{m.floats("x", []int64{3, 4}, seq(12)...), m.rand("W", 4, 6)}, []string{"mm"})
			m.node("Cast", []string{m.rand("g", 6)}, []string{"gc"}, ai("to", int64(onnx.Float32)))
			m.node("Reshape", []string{"gc", m.ints("gs", []int64{2}, 1, 6)}, []string{"g2"})
			m.node("Mul", []string{"mm", "g2"}, []string{"y"})
		}},
	}
}

// seq returns n values that are neither zero nor symmetric, as inputs.
func seq(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i%7)/7 - 0.4
	}
	return v
}

func TestWeightPathGradients(t *testing.T) {
	runtimetest.Require(t)
	for _, tc := range weightPathCases() {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.model()
			gs, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"*"},
				Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range gs.Params {
				got = append(got, p.GetName())
			}
			if strings.Join(got, ",") != strings.Join(m.params, ",") {
				t.Fatalf(`"*" trains %v, want the stored weights %v`, got, m.params)
			}
			m.check(t)
		})
	}
}

// TestWeightPathGradientRejected: the check that passes above fails when
// the gradient of a weight behind a Transpose is wrong, so the agreement is
// not vacuous.
func TestWeightPathGradientRejected(t *testing.T) {
	runtimetest.Require(t)
	m := weightPathCases()[0].model()
	cfg := grad.Config{Prober: ortprobe.Prober{}, Trainable: m.params, Loss: grad.Loss{Kind: grad.LossNone},
		GradInputs: m.outs, ExtraOutputs: m.outs}
	gs, err := grad.Build(m.model(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	gradcheck.ScaleGradient(gs, "W", 1.01)
	res, err := gradcheck.CheckGraphs(gs, nil, gradcheck.Options{Directions: 3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.MaxRelErr <= tol {
		t.Errorf("a 1%% error in W's gradient passed the check (max relative error %.2e)", res.MaxRelErr)
	}
}

// halfModel is a 1×1 Conv whose weight and bias are stored in float16 and
// cast to float32 before the layer, as fp16-stored exports write them,
// plus a float16 scale that the graph reads in float16 (no Cast after it).
func halfModel(t *testing.T) *opModel {
	m := newOpModel(13)
	half := func(name string, dims ...int64) string {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = 0.3 + float32(i%5)/8
		}
		tp := onnx.NewFloat32Tensor(name, dims, v)
		tp.DataType = proto.Int32(int32(onnx.Float16))
		if err := onnx.SetFloat32s(tp, v); err != nil {
			t.Fatal(err)
		}
		m.params = append(m.params, name)
		return m.b.Initializer(tp)
	}
	m.node("Cast", []string{half("W", 3, 2, 1, 1)}, []string{"W32"}, ai("to", int64(onnx.Float32)))
	m.node("Cast", []string{half("B", 3)}, []string{"B32"}, ai("to", int64(onnx.Float32)))
	m.node("Conv", []string{m.floats("x", []int64{1, 2, 3, 3}, seq(18)...), "W32", "B32"}, []string{"c"})
	m.node("Cast", []string{"c"}, []string{"c16"}, ai("to", int64(onnx.Float16)))
	m.node("Mul", []string{"c16", half("S", 1, 3, 1, 1)}, []string{"y16"})
	m.node("Cast", []string{"y16"}, []string{"y"}, ai("to", int64(onnx.Float32)))
	m.outs = []string{"y"}
	return m
}

// TestHalfParamsTrainAsFloat32: float16-stored weights are trainable; the
// training graph takes float32 masters under their names, the gradient of
// one read through a Cast to float32 matches finite differences, and one
// read in float16 is cast back to float16 before its consumer.
func TestHalfParamsTrainAsFloat32(t *testing.T) {
	runtimetest.Require(t)
	m := halfModel(t)
	cfg := grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"*"}, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs}
	gs, err := grad.Build(m.model(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(gs.Params) != 3 {
		t.Fatalf("%d parameters trainable, want W, B and S", len(gs.Params))
	}
	for _, p := range gs.Params {
		if p.GetDataType() != int32(onnx.Float32) {
			t.Errorf("parameter %s is %v, want a float32 master", p.GetName(), onnx.DataType(p.GetDataType()))
		}
	}
	for _, p := range gs.Manifest.Params {
		if p.Unused {
			t.Errorf("parameter %s gets no gradient", p.Name)
		}
	}
	halfCasts := 0
	for _, n := range gs.Training.Proto.Graph.Node {
		if n.GetOpType() == "Cast" && len(n.Input) == 1 && n.Input[0] == "S" {
			halfCasts++
		}
		if n.GetOpType() == "Cast" && len(n.Input) == 1 && (n.Input[0] == "W" || n.Input[0] == "B") {
			for _, a := range n.Attribute {
				if a.GetName() == "to" && a.GetI() != int64(onnx.Float32) {
					t.Errorf("%s is cast to %v before a Cast to float32: its gradient would round to half", n.Input[0], onnx.DataType(a.GetI()))
				}
			}
		}
	}
	if halfCasts != 1 {
		t.Errorf("S, read in float16, is cast from its master %d times, want 1", halfCasts)
	}
	// The float32 path, checked numerically (S's path rounds to float16,
	// which finite differences cannot resolve).
	m.check(t, "W", "B")
}

// TestSelectsNothingNamesTheTensor: a caller's exact-name pattern that
// selects nothing is reported by the tensor it names, never as the
// "re:…" pattern the user did not write.
func TestSelectsNothingNamesTheTensor(t *testing.T) {
	runtimetest.Require(t)
	m := newOpModel(13)
	m.node("MatMul", []string{m.floats("x", []int64{2, 3}, seq(6)...), m.rand("W", 3, 2)}, []string{"mm"})
	m.node("Add", []string{"mm", m.ints("k", []int64{1}, 1)}, []string{"y"})
	m.outs = []string{"y"}
	for _, tc := range []struct{ pat, want string }{
		{"re:k", `initializer "k" holds INT64 values`},
		{`re:conv_in\.weight`, `no initializer "conv_in.weight"`},
	} {
		_, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{tc.pat}, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs})
		var ue *grad.UnsupportedError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "re:") {
			t.Errorf("Trainable %q: error %v, want an UnsupportedError saying %q without the pattern", tc.pat, err, tc.want)
		}
	}
}
