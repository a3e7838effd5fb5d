package grad_test

import (
	"testing"

	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// TestClipMaskForms covers the constant-bound Clip forms (mask read off the
// output) not in TestActivations. (Trainable bounds keep the input-side mask;
// their scalar gradients cannot be fed through runtime.Tensor, so they are
// not checked here.)
func TestClipMaskForms(t *testing.T) {
	t.Run("max_only", func(t *testing.T) {
		m := newOpModel(13)
		m.node("Clip", []string{m.rand("x", 3, 4), "", m.floats("hi", nil, 0.3)}, []string{"y"})
		m.outs = []string{"y"}
		m.check(t)
	})
}

// TestMaskKinks pins the gradient exactly at the kinks, as PyTorch does: 0
// for Relu at 0, for ReLU6 (Clip 0..6, constant bounds) at 0 and 6, and for
// Abs at 0; ReduceMax shares it evenly between tied maxima (amax).
func TestMaskKinks(t *testing.T) {
	xs := []float32{-1, 0, 0.5, 6, 7}
	third := float32(1) / 3
	for _, tc := range []struct {
		op   string
		xs   []float32 // nil: xs
		want []float32
	}{
		{"Relu", nil, []float32{0, 0, 1, 1, 1}},
		{"Clip", nil, []float32{0, 0, 1, 0, 0}},
		{"Abs", nil, []float32{-1, 0, 1, 1, 1}},
		{"ReduceMax", []float32{-1, 2, 2, 0.5, 2}, []float32{0, third, third, 0, third}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			xs := xs
			if tc.xs != nil {
				xs = tc.xs
			}
			m := newOpModel(13)
			ins := []string{m.floats("x", []int64{5}, xs...)}
			if tc.op == "Clip" {
				ins = append(ins, m.floats("lo", nil, 0), m.floats("hi", nil, 6))
			}
			m.node(tc.op, ins, []string{"y"})
			m.outs = []string{"y"}
			gs, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"x"}, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: []string{"y"}})
			if err != nil {
				t.Fatal(err)
			}
			data, err := gs.Training.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			s, err := runtime.NewSession(data, runtime.Options{Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var in []*runtime.Tensor
			for _, x := range s.Inputs {
				switch x.Name {
				case "x":
					in = append(in, runtime.NewFloat32([]int64{5}, xs))
				default: // grad_in/y: ones
					ys := gs.Manifest.GradInputs[0].Shape
					ones := make([]float32, numel(ys))
					for i := range ones {
						ones[i] = 1
					}
					in = append(in, runtime.NewFloat32(ys, ones))
				}
			}
			out, err := s.Run(in...)
			if err != nil {
				t.Fatal(err)
			}
			got := out[s.OutputIndex("grad/x")].Float32
			for i := range xs {
				if got[i] != tc.want[i] {
					t.Fatalf("d%s/dx at %v = %v, want %v", tc.op, xs, got, tc.want)
				}
			}
		})
	}
}
