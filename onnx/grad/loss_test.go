package grad_test

import (
	"math"
	"testing"

	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/gradcheck"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

func TestCrossEntropy(t *testing.T) {
	ign := int64(255)
	cases := []struct {
		name    string
		logits  []int64
		target  []int64 // values; shape = logits without axis 1
		loss    grad.Loss
		scale   bool
		extraIn bool
	}{
		{"pixel_ignore", []int64{2, 3, 2, 2}, []int64{0, 1, 255, 2, 2, 2, 0, 255}, grad.Loss{IgnoreIndex: &ign}, false, false},
		{"pixel_weights", []int64{2, 3, 2, 2}, []int64{0, 1, 255, 2, 2, 2, 0, 1}, grad.Loss{ClassWeights: []float64{0.5, 2, 1.5}}, false, false},
		{"pixel_noignore_scale", []int64{1, 2, 3, 2}, []int64{0, 1, 1, 0, 1, 1}, grad.Loss{NoIgnore: true, Scale: true}, true, false},
		{"classifier", []int64{4, 5}, []int64{0, 4, 2, 2}, grad.Loss{}, false, false},
		{"pixel_plus_extra_grad", []int64{2, 3, 2, 2}, []int64{0, 1, 255, 2, 2, 2, 0, 255}, grad.Loss{}, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newOpModel(13)
			m.node("Mul", []string{m.rand("z", tc.logits...), m.floats("k", []int64{1}, 2)}, []string{"logits"})
			m.outs = []string{"logits"}
			tshape := append([]int64{tc.logits[0]}, tc.logits[2:]...)
			feeds := map[string]*runtime.Tensor{grad.TargetName: runtime.NewInt64(tshape, tc.target)}
			if tc.scale {
				feeds[grad.LossScaleName] = runtime.NewFloat64([]int64{1}, []float64{1.7})
			}
			cfg := grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"z"}, Loss: tc.loss}
			if tc.extraIn {
				cfg.GradInputs = []string{"logits"}
			}
			res, err := gradcheck.Check(m.model(), cfg, feeds, gradcheck.Options{Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range res.Directions {
				if !tc.scale && d.RelErr > tol {
					t.Errorf("relative error %.3g > %g (analytic %g numeric %g)", d.RelErr, tol, d.Analytic, d.Numeric)
				}
				// With a loss scale s the analytic gradient is s·∇loss.
				if tc.scale && math.Abs(d.Analytic-1.7*d.Numeric) > tol*math.Abs(d.Analytic) {
					t.Errorf("scaled gradient %g, want 1.7 × %g", d.Analytic, d.Numeric)
				}
			}
			t.Logf("RESULT %s float64=%v max_rel_err=%.2e", t.Name(), res.Float64, res.MaxRelErr)
		})
	}
}

// TestCrossEntropyValue compares the loss value with a direct computation.
func TestCrossEntropyValue(t *testing.T) {
	m := newOpModel(13)
	z := []float32{0.1, -0.3, 0.5, 1.2, -2, 0.7, 0.3, 0.3, 0, 1, 2, 3}
	m.node("Identity", []string{m.floats("z", []int64{2, 3, 2}, z...)}, []string{"logits"})
	m.outs = []string{"logits"}
	target := []int64{2, 255, 0, 1}
	w := []float64{1, 2, 0.5}
	gs, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"z"}, Loss: grad.Loss{ClassWeights: w}})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := gs.Eval.Marshal()
	s, err := runtime.NewSession(data, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	feeds := map[string]*runtime.Tensor{"z": runtime.NewFloat32([]int64{2, 3, 2}, z), grad.TargetName: runtime.NewInt64([]int64{2, 2}, target)}
	var in []*runtime.Tensor
	for _, x := range s.Inputs {
		in = append(in, feeds[x.Name])
	}
	out, err := s.Run(in...)
	if err != nil {
		t.Fatal(err)
	}
	var num, den float64
	for n := 0; n < 2; n++ {
		for p := 0; p < 2; p++ {
			tg := target[n*2+p]
			if tg == 255 {
				continue
			}
			var lse float64
			for c := 0; c < 3; c++ {
				lse += math.Exp(float64(z[n*6+c*2+p]))
			}
			lp := float64(z[n*6+int(tg)*2+p]) - math.Log(lse)
			num -= w[tg] * lp
			den += w[tg]
		}
	}
	if got, want := float64(out[0].Float32[0]), num/den; math.Abs(got-want) > 1e-5 {
		t.Errorf("loss %g, want %g", got, want)
	}
}
