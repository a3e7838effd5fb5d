package dual

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// blobs returns two seeded Gaussian blobs in d dimensions: nPos examples of
// class 1 around +c·1 and nNeg of class 0 around −c·1, unit variance.
func blobs(seed uint64, nPos, nNeg, d int, c float64) ([][]float64, []int) {
	r := rand.New(rand.NewPCG(seed, 99))
	var x [][]float64
	var y []int
	for i := range nPos + nNeg {
		cl, sign := 1, 1.0
		if i >= nPos {
			cl, sign = 0, -1
		}
		row := make([]float64, d)
		for k := range row {
			row[k] = sign*c + r.NormFloat64()
		}
		x = append(x, row)
		y = append(y, cl)
	}
	return x, y
}

// solveProblem2LP solves the F_β Problem 2 with the box |w_k| ≤ box by
// gonum's simplex method, after converting it to standard form
// min cᵀz s.t. Az = b, z ≥ 0 by hand:
//
//	z = [w⁺ (d), w⁻ (d), ε, τ⁺ (n), τ⁻ (n), φ (m), s1 (n), s2 (n), s3 (m), b1 (d), b2 (d)]
//
// w and τ are free (split into differences of nonnegative parts), φ_j is the
// hinge max(0, ε + w·a_j) as an auxiliary variable with φ ≥ 0 and
// φ ≥ ε + w·a_j, and every inequality gets a slack:
//
//	τ_i − ε + s1_i = 0             (τ_i ≤ ε)
//	τ_i − w·a_i + s2_i = 0         (τ_i ≤ w·a_i), i ∈ S+
//	ε + w·a_j − φ_j + s3_j = 0     (φ_j ≥ ε + w·a_j), j ∈ S−
//	Σ τ_i = 1
//	w_k + b1_k = box,  −w_k + b2_k = box
//
// with objective β²nε + Σ φ_j.
func solveProblem2LP(t *testing.T, x [][]float64, y []int, beta, box float64) (float64, []float64) {
	t.Helper()
	d := len(x[0])
	var pos, neg []int
	for i, c := range y {
		if c == 1 {
			pos = append(pos, i)
		} else {
			neg = append(neg, i)
		}
	}
	n, m := len(pos), len(neg)
	oWp, oWm, oE := 0, d, 2*d
	oTp := oE + 1
	oTm := oTp + n
	oPhi := oTm + n
	oS1 := oPhi + m
	oS2 := oS1 + n
	oS3 := oS2 + n
	oB1 := oS3 + m
	oB2 := oB1 + d
	nv := oB2 + d
	rows := n + n + m + 1 + 2*d
	A := mat.NewDense(rows, nv, nil)
	b := make([]float64, rows)
	c := make([]float64, nv)
	c[oE] = beta * beta * float64(n)
	for j := range m {
		c[oPhi+j] = 1
	}
	r := 0
	for i := range n { // τ_i − ε + s1_i = 0
		A.Set(r, oTp+i, 1)
		A.Set(r, oTm+i, -1)
		A.Set(r, oE, -1)
		A.Set(r, oS1+i, 1)
		r++
	}
	for i, p := range pos { // τ_i − w·a_i + s2_i = 0
		A.Set(r, oTp+i, 1)
		A.Set(r, oTm+i, -1)
		for k, a := range x[p] {
			A.Set(r, oWp+k, -a)
			A.Set(r, oWm+k, a)
		}
		A.Set(r, oS2+i, 1)
		r++
	}
	for j, q := range neg { // ε + w·a_j − φ_j + s3_j = 0
		A.Set(r, oE, 1)
		for k, a := range x[q] {
			A.Set(r, oWp+k, a)
			A.Set(r, oWm+k, -a)
		}
		A.Set(r, oPhi+j, -1)
		A.Set(r, oS3+j, 1)
		r++
	}
	for i := range n { // Σ τ = 1
		A.Set(r, oTp+i, 1)
		A.Set(r, oTm+i, -1)
	}
	b[r] = 1
	r++
	for k := range d { // ±w_k + slack = box
		A.Set(r, oWp+k, 1)
		A.Set(r, oWm+k, -1)
		A.Set(r, oB1+k, 1)
		b[r] = box
		r++
		A.Set(r, oWp+k, -1)
		A.Set(r, oWm+k, 1)
		A.Set(r, oB2+k, 1)
		b[r] = box
		r++
	}
	opt, z, err := lp.Simplex(c, A, b, 1e-10, nil)
	if err != nil {
		t.Fatalf("simplex: %v", err)
	}
	w := make([]float64, d)
	for k := range w {
		w[k] = z[oWp+k] - z[oWm+k]
	}
	return opt, w
}

// The acceptance problem: two 5-D Gaussian blobs, 100 examples each,
// means ±0.5·1 (overlapping, so the optimum is above 1 and w is finite).
// The box |w_k| ≤ 1 is added to both the LP and Algorithm 1; it does not
// bind at the optimum (|w_k| ≈ 0.015) but keeps both problems compact.
const (
	accSeed = 1
	accBox  = 1.0
)

var (
	lpOnce sync.Once
	lpOpt  float64
	lpW    []float64
)

func acceptanceData(t *testing.T) ([][]float64, []int, float64) {
	x, y := blobs(accSeed, 100, 100, 5, 0.5)
	lpOnce.Do(func() { lpOpt, lpW = solveProblem2LP(t, x, y, 1, accBox) })
	if lpW == nil {
		t.Fatal("LP failed")
	}
	return x, y, lpOpt
}

// acceptanceConfig runs Algorithm 1 with the library's defaults of the
// dynamics (mean normalisation, feasibility "batch", λ starting at 0,
// DefaultDualsPerEpoch dual steps per epoch, τ and ε stepped by
// DefaultLRRel/n = 3e-4 at n = 100) and the step constants this small
// problem needs (the head's Adam step LRW, c_λ, c_μ).
func acceptanceConfig(s Projection) LinearConfig {
	return LinearConfig{
		Reg:    Config{Objective: "fbeta", CLambda: 3, CMu: 1},
		Epochs: 4000, Batch: 20, Projection: s, LRPower: 0.5, Box: accBox,
		AverageFrom: 2000, Seed: 1, LRW: 3e-4,
	}
}

func TestLPSolutionMatchesFBetaValue(t *testing.T) {
	x, y, opt := acceptanceData(t)
	l, err := NewLinear(x, y, LinearConfig{Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	v, err := l.ValueAt(lpW)
	if err != nil || math.Abs(v-opt) > 1e-7*opt {
		t.Fatalf("FBetaValue at the LP head = %v, LP optimum %v (%v)", v, opt, err)
	}
	if opt <= 1 {
		t.Fatalf("optimum %v: data unexpectedly separable", opt)
	}
}

func runAcceptance(t *testing.T, s Projection) *Linear {
	x, y, opt := acceptanceData(t)
	l, err := NewLinear(x, y, acceptanceConfig(s))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Run(); err != nil {
		t.Fatal(err)
	}
	v, err := l.ValueAt(l.WAvg)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := l.Value()
	t.Logf("%s: LP optimum %.6f, Algorithm 1 (averaged head) %.6f (%+.2f%%), last iterate %.6f, %d projections",
		s, opt, v, 100*(v/opt-1), last, l.Projections)
	// v ≥ opt up to the bisection tolerance: FBetaValue is the exact value
	// of a feasible point.
	if v < opt*(1-1e-9) {
		t.Errorf("value %v below the LP optimum %v: LP or evaluation is wrong", v, opt)
	}
	if v > 1.02*opt {
		t.Errorf("value %v not within 2%% of the LP optimum %v", v, opt)
	}
	return l
}

// TestAcceptanceAlgorithm1 is the acceptance test: Algorithm 1 (one
// projection per epoch) reaches the LP optimum of Problem 2 within 2 %.
func TestAcceptanceAlgorithm1(t *testing.T) { runAcceptance(t, ProjectionEpoch) }

// TestAcceptanceFullProjections: the "full projections" baseline reaches
// the same optimum.
func TestAcceptanceFullProjections(t *testing.T) { runAcceptance(t, ProjectionStep) }

// TestAcceptanceGraph: training through the projection (the relu form of
// docs/method.md §8, no projection step) reaches the same optimum.
func TestAcceptanceGraph(t *testing.T) { runAcceptance(t, ProjectionGraph) }

// TestProjectionCount: E projections for Algorithm 1, E·T for the baseline,
// 2·E·T for the graph schedule (one for the gradient, one for the new point).

func TestProjectionCount(t *testing.T) {
	x, y := blobs(2, 30, 30, 3, 0.5)
	for _, s := range []Projection{ProjectionEpoch, ProjectionStep, ProjectionGraph} {
		cfg := LinearConfig{Epochs: 7, Batch: 10, Steps: 5, Projection: s, Seed: 3}
		l, err := NewLinear(x, y, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Run(); err != nil {
			t.Fatal(err)
		}
		want := 7
		switch s {
		case ProjectionStep:
			want = 7 * 5
		case ProjectionGraph:
			want = 2 * 7 * 5
		}
		if l.Projections != want {
			t.Errorf("%s: %d projections, want %d", s, l.Projections, want)
		}
	}
}
