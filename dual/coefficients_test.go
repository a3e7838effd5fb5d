package dual

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The graph form pos·s + neg·relu(eps+s) must have Eval's gradient, for
// every objective family and for one-vs-rest heads.
func TestCoefficientsMatchEvalGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, tc := range []struct {
		cfg     Config
		classes int
	}{
		{Config{Objective: "fbeta", Beta: 0.5}, 2},
		{Config{Objective: "p@r", Level: 0.7}, 2},
		{Config{Objective: "auc-roc", Grid: []float64{0.1, 0.3, 0.5}, Normalization: NormMean}, 2},
		{Config{Objective: "fbeta"}, 3},
	} {
		n := 40
		ids := make([]int64, n)
		cls := make([]int, n)
		for i := range ids {
			ids[i] = int64(100 + i)
			cls[i] = i % tc.classes
		}
		r, err := New(tc.cfg, ids, cls)
		if err != nil {
			t.Fatal(err)
		}
		for _, term := range r.Terms() {
			for k := range term.Lambda {
				term.Lambda[k] = rng.Float64()
			}
			term.Eps = rng.Float64() - 0.5
			term.Rho = rng.Float64()
		}
		batch := []int64{100, 101, 102, 105, 110, 111, 107}
		H, T := r.Heads(), len(r.Terms())
		scores := make([]float64, len(batch)*H)
		for i := range scores {
			scores[i] = rng.NormFloat64()
		}
		want := make([]float64, len(scores))
		if _, err := r.Eval(batch, scores, want); err != nil {
			t.Fatal(err)
		}
		pos, neg, eps := make([]float64, len(batch)*T), make([]float64, len(batch)*T), make([]float64, T)
		if err := r.Coefficients(batch, pos, neg, eps); err != nil {
			t.Fatal(err)
		}
		got := make([]float64, len(scores))
		for b := range batch {
			for ti, term := range r.Terms() {
				s := scores[b*H+term.Head]
				g := pos[b*T+ti]
				if eps[ti]+s > 0 {
					g += neg[b*T+ti]
				}
				got[b*H+term.Head] += g
			}
		}
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12*(1+math.Abs(want[i])) {
				t.Fatalf("%+v: dScores[%d] = %v from coefficients, %v from Eval", tc.cfg, i, got[i], want[i])
			}
		}
	}
	r, _ := New(Config{}, []int64{1, 2}, []int{0, 1})
	if err := r.Coefficients([]int64{1}, make([]float64, 3), make([]float64, 1), make([]float64, 1)); err == nil {
		t.Error("wrong lengths accepted")
	}
}
