package projection

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// bisectTheta is an independent reference: bisection on the increasing
// function h(θ) = θ − δ − Σ max(γ_i − θ, 0) in float64, on [δ, max(δ, γ)].
func bisectTheta(delta float64, gamma []float64) float64 {
	lo, hi := delta, delta
	for _, g := range gamma {
		hi = math.Max(hi, g)
	}
	h := func(t float64) float64 {
		s := 0.0
		for _, g := range gamma {
			s += math.Max(g-t, 0)
		}
		return t - delta - s
	}
	for range 2000 {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if h(mid) < 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo + (hi-lo)/2
}

// bruteForce enumerates active sets: for a set A (τ_i = ε for i ∈ A) the
// best ε is the mean of δ and γ_A; plus the ε = 0 face. It keeps the
// feasible candidate of least objective. Exponential: small n only.
func bruteForce(delta float64, gamma []float64) (float64, []float64) {
	// Work in units of the largest magnitude so squares cannot overflow.
	sc := maxAbs(delta, gamma)
	if sc == 0 {
		sc = 1
	}
	delta /= sc
	gamma = slices.Clone(gamma)
	for i := range gamma {
		gamma[i] /= sc
	}
	n := len(gamma)
	obj := func(e float64, tau []float64) float64 {
		s := (e - delta) * (e - delta)
		for i := range tau {
			s += (tau[i] - gamma[i]) * (tau[i] - gamma[i])
		}
		return s
	}
	bestE := 0.0
	bestT := make([]float64, n)
	for i, g := range gamma {
		bestT[i] = math.Min(g, 0)
	}
	best := obj(0, bestT)
	tau := make([]float64, n)
	for mask := 0; mask < 1<<n; mask++ {
		sum, k := delta, 1.0
		for i := range n {
			if mask&(1<<i) != 0 {
				sum += gamma[i]
				k++
			}
		}
		e := sum / k
		if e < 0 {
			continue
		}
		feasible := true
		for i := range n {
			if mask&(1<<i) != 0 {
				tau[i] = e
			} else {
				tau[i] = gamma[i]
				if gamma[i] > e {
					feasible = false
				}
			}
		}
		if feasible {
			if v := obj(e, tau); v < best {
				best, bestE = v, e
				copy(bestT, tau)
			}
		}
	}
	for i := range bestT {
		bestT[i] *= sc
	}
	return bestE * sc, bestT
}

type genCase struct {
	name string
	gen  func(r *rand.Rand, n int) (float64, []float64)
}

var generators = []genCase{
	{"normal", func(r *rand.Rand, n int) (float64, []float64) {
		g := make([]float64, n)
		for i := range g {
			g[i] = r.NormFloat64()
		}
		return r.NormFloat64(), g
	}},
	{"ties", func(r *rand.Rand, n int) (float64, []float64) {
		g := make([]float64, n)
		for i := range g {
			g[i] = float64(r.IntN(4)) - 1
		}
		return float64(r.IntN(3)) - 1, g
	}},
	{"allNegative", func(r *rand.Rand, n int) (float64, []float64) {
		g := make([]float64, n)
		for i := range g {
			g[i] = -1 - r.ExpFloat64()
		}
		return -r.ExpFloat64(), g
	}},
	{"allEqual", func(r *rand.Rand, n int) (float64, []float64) {
		g := make([]float64, n)
		v := r.NormFloat64() * 3
		for i := range g {
			g[i] = v
		}
		return r.NormFloat64(), g
	}},
	{"huge1e30", func(r *rand.Rand, n int) (float64, []float64) {
		g := make([]float64, n)
		for i := range g {
			g[i] = r.NormFloat64() * 1e30
		}
		return r.NormFloat64() * 1e30, g
	}},
	{"huge1e305", func(r *rand.Rand, n int) (float64, []float64) {
		g := make([]float64, n)
		for i := range g {
			g[i] = (r.Float64() + 0.5) * 1e305
		}
		return -1e305, g
	}},
	{"ascending", func(r *rand.Rand, n int) (float64, []float64) {
		g := make([]float64, n)
		for i := range g {
			g[i] = float64(i) / float64(n+1)
		}
		return 0, g
	}},
	{"tinyMixed", func(r *rand.Rand, n int) (float64, []float64) {
		g := make([]float64, n)
		for i := range g {
			g[i] = r.NormFloat64() * 1e-200
		}
		return r.NormFloat64() * 1e-200, g
	}},
}

func relErr(a, b, scale float64) float64 { return math.Abs(a-b) / math.Max(scale, 1e-300) }

func maxAbs(delta float64, g []float64) float64 {
	m := math.Abs(delta)
	for _, x := range g {
		m = math.Max(m, math.Abs(x))
	}
	return m
}

// checkAll runs every algorithm on (delta, gamma) in float64 and float32 and
// checks them against bisection and the KKT conditions.
func checkAll(t *testing.T, delta float64, gamma []float64) {
	t.Helper()
	scale := maxAbs(delta, gamma)
	if scale == 0 {
		scale = 1
	}
	want := math.Max(0, bisectTheta(delta, gamma))
	n := len(gamma)

	for name, f := range map[string]func(float64, []float64, []float64) (float64, error){
		"sort":  ProjectSort[float64],
		"pivot": ProjectPivot[float64],
	} {
		tau := slices.Clone(gamma)
		eps, err := f(delta, tau, make([]float64, n))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if e := relErr(eps, want, scale); e > 1e-12*float64(n+1) {
			t.Fatalf("%s float64: eps=%v bisection=%v rel err %g (n=%d)", name, eps, want, e, n)
		}
		r, err := KKT(delta, gamma, eps, tau)
		if err != nil || !r.OK(DefaultTol[float64](n)) {
			t.Fatalf("%s float64: KKT %+v err %v", name, r, err)
		}
	}

	g32 := make([]float32, n)
	g64 := make([]float64, n) // γ as float32 sees it
	for i, x := range gamma {
		g32[i] = float32(x)
		g64[i] = float64(g32[i])
	}
	d32 := float32(delta)
	if math.IsInf(float64(d32), 0) || slices.ContainsFunc(g32, func(x float32) bool { return math.IsInf(float64(x), 0) }) {
		return // beyond float32 range; covered by the error tests
	}
	want32 := math.Max(0, bisectTheta(float64(d32), g64))
	for name, f := range map[string]func(float32, []float32, []float32) (float32, error){
		"sort":  ProjectSort[float32],
		"pivot": ProjectPivot[float32],
	} {
		tau := slices.Clone(g32)
		eps, err := f(d32, tau, nil)
		if err != nil {
			t.Fatalf("%s float32: %v", name, err)
		}
		if e := relErr(float64(eps), want32, scale); e > 1e-6 {
			t.Fatalf("%s float32: eps=%v bisection=%v rel err %g", name, eps, want32, e)
		}
		r, err := KKT(d32, g32, eps, tau)
		if err != nil || !r.OK(DefaultTol[float32](n)) {
			t.Fatalf("%s float32: KKT %+v err %v (tol %g)", name, r, err, DefaultTol[float32](n))
		}
	}
}

func TestProjectVsBisection(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, gc := range generators {
		t.Run(gc.name, func(t *testing.T) {
			for _, n := range []int{0, 1, 2, 3, 7, 50, 1000} {
				for range 20 {
					d, g := gc.gen(r, n)
					checkAll(t, d, g)
				}
			}
		})
	}
}

func TestProjectVsBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, gc := range generators {
		for n := 0; n <= 8; n++ {
			for range 10 {
				d, g := gc.gen(r, n)
				wantE, wantT := bruteForce(d, g)
				scale := math.Max(maxAbs(d, g), 1e-300)
				eps, tau, err := Project(d, g)
				if err != nil {
					t.Fatal(err)
				}
				if relErr(eps, wantE, scale) > 1e-12 {
					t.Fatalf("%s n=%d: eps %v want %v (δ=%v γ=%v)", gc.name, n, eps, wantE, d, g)
				}
				for i := range tau {
					if relErr(tau[i], wantT[i], scale) > 1e-12 {
						t.Fatalf("%s n=%d: tau %v want %v", gc.name, n, tau, wantT)
					}
				}
			}
		}
	}
}

func TestKnownValues(t *testing.T) {
	cases := []struct {
		delta float64
		gamma []float64
		eps   float64
	}{
		{0, nil, 0},
		{-1, nil, 0},
		{2, nil, 2},
		{0, []float64{3}, 1.5},
		{1, []float64{3}, 2},
		{-5, []float64{1}, 0},             // θ* = −2 clipped
		{0, []float64{3, 3, 3}, 2.25},     // (0+9)/4
		{0, []float64{4, 1}, 2},           // 1 ≤ (0+4)/2
		{1, []float64{-1, -2}, 1},         // nothing active
		{0, []float64{6, 2, 2}, 3},        // 2 ≤ (0+6)/2
		{0, []float64{6, 5, 2}, 11.0 / 3}, // 2 ≤ (0+6+5)/3
	}
	for _, c := range cases {
		for _, f := range []func(float64, []float64, []float64) (float64, error){ThresholdSort[float64], ThresholdPivot[float64]} {
			got, err := f(c.delta, c.gamma, nil)
			if err != nil || math.Abs(got-c.eps) > 1e-15 {
				t.Errorf("δ=%v γ=%v: got %v (%v), want %v", c.delta, c.gamma, got, err, c.eps)
			}
		}
	}
}

func TestNonFinite(t *testing.T) {
	bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}
	for _, b := range bad {
		for pos := range 3 {
			g := []float64{1, 2, 0.5}
			d := 0.0
			if pos == 2 {
				d = b
			} else {
				g[pos] = b
			}
			orig := slices.Clone(g)
			for name, f := range map[string]func(float64, []float64, []float64) (float64, error){
				"sort": ProjectSort[float64], "pivot": ProjectPivot[float64],
			} {
				_, err := f(d, g, nil)
				if !errors.Is(err, ErrNonFinite) {
					t.Errorf("%s δ=%v γ=%v: err %v, want ErrNonFinite", name, d, g, err)
				}
				if !slices.Equal(g, orig) && !slices.ContainsFunc(g, math.IsNaN) {
					t.Errorf("%s modified gamma on error", name)
				}
			}
			if _, err := estimateThreshold(d, g, 2, rand.New(rand.NewPCG(1, 1)), nil); pos == 2 && !errors.Is(err, ErrNonFinite) {
				t.Errorf("estimateThreshold: δ=%v: err %v", d, err)
			}
		}
	}
	// float32 too.
	if _, err := ThresholdPivot(float32(0), []float32{1, float32(math.NaN())}, nil); !errors.Is(err, ErrNonFinite) {
		t.Errorf("float32 NaN: %v", err)
	}
}

func TestSortAndPivotAgreeOnAdversarialOrders(t *testing.T) {
	// Ascending input makes every element a filter candidate; descending
	// makes the filter exact immediately; both must agree with sort.
	n := 5000
	asc := make([]float64, n)
	for i := range asc {
		asc[i] = float64(i)
	}
	desc := slices.Clone(asc)
	slices.Reverse(desc)
	for _, g := range [][]float64{asc, desc} {
		a, _ := ThresholdSort(-3.0, g, nil)
		b, _ := ThresholdPivot(-3.0, g, nil)
		if math.Abs(a-b) > 1e-9*float64(n) {
			t.Fatalf("sort %v pivot %v", a, b)
		}
	}
}

func TestClampIsRelu(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	g := make([]float64, 300)
	for i := range g {
		g[i] = r.NormFloat64()
	}
	o, err := ThresholdPivot(0.1, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, tau, _ := Project(0.1, g)
	dst := make([]float64, len(g))
	ClampTo(dst, o, g)
	relu := make([]float64, len(g))
	for i, x := range g {
		relu[i] = -math.Max(-o, -x) // −max(−ō, −τ)
	}
	if !slices.Equal(dst, tau) || !slices.Equal(relu, tau) {
		t.Fatal("relu form differs from the projection")
	}
	Clamp(o, g)
	if !slices.Equal(g, tau) {
		t.Fatal("Clamp differs from ClampTo")
	}
}

func TestNoAllocation(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	g := make([]float32, 10000)
	for i := range g {
		g[i] = float32(r.NormFloat64())
	}
	work := slices.Clone(g)
	scratch := make([]float32, len(g))
	for name, f := range map[string]func(float32, []float32, []float32) (float32, error){
		"sort": ProjectSort[float32], "pivot": ProjectPivot[float32],
	} {
		allocs := testing.AllocsPerRun(5, func() {
			copy(work, g)
			if _, err := f(0.5, work, scratch); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per run, want 0", name, allocs)
		}
	}
}

func TestPairRules(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 2000 {
		d, g := r.NormFloat64(), r.NormFloat64()
		e, tau := ProjectPair(d, g)
		want, wantT, _ := Project(d, []float64{g})
		if e != want || tau != wantT[0] {
			t.Fatalf("ProjectPair(%v,%v) = (%v,%v), want (%v,%v)", d, g, e, tau, want, wantT[0])
		}
		pe, pt := PairRule(d, g)
		if pt > pe || pe < 0 {
			t.Fatalf("PairRule(%v,%v) = (%v,%v) infeasible", d, g, pe, pt)
		}
		// Exact whenever ε ≥ 0 after the step, or τ ≤ 0.
		if (d >= 0 || g <= 0) && (math.Abs(pe-e) > 1e-15 || math.Abs(pt-tau) > 1e-15) {
			t.Fatalf("PairRule(%v,%v) = (%v,%v), exact (%v,%v)", d, g, pe, pt, e, tau)
		}
	}
	// The documented discrepancy: ε < 0 < τ.
	pe, _ := PairRule(-1.0, 3.0)
	e, _ := ProjectPair(-1.0, 3.0)
	if pe != 1.5 || e != 1 {
		t.Fatalf("PairRule(-1,3)=%v ProjectPair=%v, want 1.5 and 1", pe, e)
	}
}

func TestKKTDetectsWrongAnswers(t *testing.T) {
	g := []float64{3, 1, -2}
	eps, tau, _ := Project(0.0, g)
	if r, _ := KKT(0.0, g, eps, tau); !r.OK(1e-12) {
		t.Fatalf("exact projection rejected: %+v", r)
	}
	perturbed := []struct {
		name string
		eps  float64
		tau  []float64
		bad  func(KKTReport) float64
	}{
		{"infeasible", eps, []float64{eps + 0.5, 1, -2}, func(r KKTReport) float64 { return r.Primal }},
		{"negative eps", -0.1, []float64{-0.1, -0.1, -2}, func(r KKTReport) float64 { return r.Primal }},
		{"tau above gamma", eps, []float64{eps, 1, -1}, func(r KKTReport) float64 { return r.Dual }},
		{"eps too big", eps + 0.3, []float64{eps + 0.3, 1, -2}, func(r KKTReport) float64 { return r.Complementarity }},
		{"eps too small", eps - 0.3, []float64{eps - 0.3, 1, -2}, func(r KKTReport) float64 { return r.Dual }},
		{"inactive clamp", eps, []float64{eps, 0.9, -2}, func(r KKTReport) float64 { return r.Complementarity }},
	}
	for _, p := range perturbed {
		r, err := KKT(0.0, g, p.eps, p.tau)
		if err != nil || p.bad(r) < 1e-3 || r.OK(1e-6) {
			t.Errorf("%s: not detected: %+v", p.name, r)
		}
	}
	if _, err := KKT(0.0, g, eps, tau[:2]); err == nil {
		t.Error("length mismatch accepted")
	}
}
