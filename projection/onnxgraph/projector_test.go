package onnxgraph

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/runtime"
)

// TestProjectorMatchesExact: the ONNX Runtime projector and the Go closed
// form (dual.ExactProjector) agree on the projection and on the
// vector–Jacobian product, kinks included (both take the same side), for
// random, tied, all-negative input and n = 1.
func TestProjectorMatchesExact(t *testing.T) {
	initRuntime(t)
	rng := rand.New(rand.NewPCG(21, 22))
	var exact dual.ExactProjector
	for _, n := range []int{1, 2, 7, 64, 1000} {
		p, err := NewProjector(n, runtime.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		for trial := range 30 {
			tau, c := make([]float64, n), make([]float64, n)
			for i := range tau {
				tau[i] = rng.NormFloat64()
				switch trial % 4 {
				case 1:
					tau[i] = math.Round(tau[i]) // ties
				case 2:
					tau[i] = -math.Abs(tau[i]) - 0.1 // all negative: ō = 0
				}
				c[i] = rng.NormFloat64()
			}
			delta, d := rng.NormFloat64(), rng.NormFloat64()
			if trial%4 == 3 {
				delta = 5 + rng.Float64() // nothing active
			}
			gotP, gotG := make([]float64, n), make([]float64, n)
			wantP, wantG := make([]float64, n), make([]float64, n)
			o, gd, err := p.Apply(tau, delta, c, d, gotP, gotG)
			if err != nil {
				t.Fatal(err)
			}
			wo, wgd, err := exact.Apply(tau, delta, c, d, wantP, wantG)
			if err != nil {
				t.Fatal(err)
			}
			tol := 1e-12 * (1 + math.Abs(wo) + math.Abs(delta))
			if math.Abs(o-wo) > tol || math.Abs(gd-wgd) > 1e-9 {
				t.Fatalf("n=%d trial %d: threshold %v vs %v, ∂δ %v vs %v", n, trial, o, wo, gd, wgd)
			}
			for i := range tau {
				if math.Abs(gotP[i]-wantP[i]) > tol || math.Abs(gotG[i]-wantG[i]) > 1e-9 {
					t.Fatalf("n=%d trial %d i=%d: τ* %v vs %v, ∂τ %v vs %v", n, trial, i, gotP[i], wantP[i], gotG[i], wantG[i])
				}
			}
		}
		if _, _, err := p.Apply(make([]float64, n+1), 0, make([]float64, n), 0, make([]float64, n), make([]float64, n)); err == nil {
			t.Error("wrong length accepted")
		}
		p.Close()
	}
}
