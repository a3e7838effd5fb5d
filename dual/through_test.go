package dual

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/segtune/segtune/projection"
)

// TestExactProjectorForward: the projection is Π_C (KKT conditions) and
// dTau has the closed form's shape, on random, all-negative and tied input.
func TestExactProjectorForward(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var p ExactProjector
	for trial := range 200 {
		n := 1 + rng.IntN(30)
		tau := make([]float64, n)
		for i := range tau {
			tau[i] = rng.NormFloat64()
			if trial%5 == 0 {
				tau[i] = -math.Abs(tau[i])
			}
			if trial%7 == 0 {
				tau[i] = math.Round(tau[i] * 2)
			}
		}
		delta := rng.NormFloat64()
		proj, up, g := make([]float64, n), make([]float64, n), make([]float64, n)
		eps, _, err := p.Apply(tau, delta, up, 0, proj, g)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := projection.KKT(delta, tau, eps, proj)
		if err != nil || !rep.OK(projection.DefaultTol[float64](n)) {
			t.Fatalf("trial %d: not the projection: %+v %v", trial, rep, err)
		}
	}
}

// TestExactProjectorVJP checks the vector–Jacobian product against central
// differences of F = c·τ* + d·ō away from kinks.
func TestExactProjectorVJP(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var p ExactProjector
	checked := 0
	for trial := 0; checked < 100 && trial < 1000; trial++ {
		n := 1 + rng.IntN(12)
		tau := make([]float64, n)
		c := make([]float64, n)
		for i := range tau {
			tau[i] = rng.NormFloat64()
			c[i] = rng.NormFloat64()
		}
		delta, d := rng.NormFloat64(), rng.NormFloat64()
		proj, g := make([]float64, n), make([]float64, n)
		o, _, err := p.Apply(tau, delta, c, d, proj, g)
		if err != nil {
			t.Fatal(err)
		}
		// Skip points within h of a kink: FD would straddle two pieces.
		const h = 1e-6
		near := math.Abs(o) < 1e-3 && o != 0
		for _, x := range tau {
			near = near || math.Abs(x-o) < 1e-3
		}
		if o == 0 {
			near = near || math.Abs(rootTheta(delta, tau)) < 1e-3
		}
		if near {
			continue
		}
		checked++
		f := func(tau []float64, delta float64) float64 {
			pr := make([]float64, n)
			o, _, err := p.Apply(tau, delta, make([]float64, n), 0, pr, make([]float64, n))
			if err != nil {
				t.Fatal(err)
			}
			v := d * o
			for i := range pr {
				v += c[i] * pr[i]
			}
			return v
		}
		_, gDelta, _ := p.Apply(tau, delta, c, d, proj, g)
		for i := range tau {
			x := tau[i]
			tau[i] = x + h
			fp := f(tau, delta)
			tau[i] = x - h
			fm := f(tau, delta)
			tau[i] = x
			if fd := (fp - fm) / (2 * h); math.Abs(fd-g[i]) > 1e-6 {
				t.Fatalf("trial %d: dF/dτ_%d = %v, finite difference %v", trial, i, g[i], fd)
			}
		}
		if fd := (f(tau, delta+h) - f(tau, delta-h)) / (2 * h); math.Abs(fd-gDelta) > 1e-6 {
			t.Fatalf("trial %d: dF/dδ = %v, finite difference %v", trial, gDelta, fd)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d points away from kinks", checked)
	}
}

// rootTheta solves θ − δ = Σ max(τ_i − θ, 0) by bisection (the left side
// minus the right side increases in θ), independently of package projection.
func rootTheta(delta float64, tau []float64) float64 {
	lo, hi := delta, delta
	for _, x := range tau {
		hi += math.Max(x-delta, 0)
	}
	for range 200 {
		mid := (lo + hi) / 2
		s := 0.0
		for _, x := range tau {
			s += math.Max(x-mid, 0)
		}
		if mid-delta < s {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// TestThroughGradientFiniteDifferences: the gradient PrimalStep uses under
// the graph schedule is ∂/∂(τ̃, ε̃) of the Lagrangian read at Π_C(τ̃, ε̃),
// checked by central differences of Eval's value, for every family.
func TestThroughGradientFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, cfg := range objectiveConfigs {
		ids, cl := toyData(24, 2, 11)
		r, err := New(cfg, ids, cl)
		if err != nil {
			t.Fatal(err)
		}
		randomizeState(r, rng)
		if err := r.ProjectThrough(exactProjectors(r)); err != nil {
			t.Fatal(err)
		}
		batch := ids[:10]
		scores := make([]float64, len(batch)*r.Heads())
		for i := range scores {
			scores[i] = rng.NormFloat64()
		}
		value := func() float64 {
			for _, tm := range r.terms {
				if err := r.view(tm); err != nil {
					t.Fatal(err)
				}
			}
			v, err := r.Eval(batch, scores, nil)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		value()
		for ti, tm := range r.terms {
			th := tm.through
			clear(th.up)
			for _, k := range tm.touched {
				th.up[k] = tm.gTau[k]
			}
			g := make([]float64, tm.n)
			_, gEps, err := th.proj.Apply(th.raw, th.rawEps, th.up, tm.gEps, make([]float64, tm.n), g)
			if err != nil {
				t.Fatal(err)
			}
			const h = 1e-6
			check := func(name string, x *float64, want float64) {
				old := *x
				*x = old + h
				fp := value()
				*x = old - h
				fm := value()
				*x = old
				value()
				if fd := (fp - fm) / (2 * h); math.Abs(fd-want) > 1e-5*(1+math.Abs(fd)) {
					t.Errorf("%s term %d: ∂L/∂%s = %v, finite difference %v", cfg.Objective, ti, name, want, fd)
				}
			}
			for k := range th.raw {
				check("τ̃", &th.raw[k], g[k])
			}
			check("ε̃", &th.rawEps, gEps)
			value() // restore every term's gradients for the next term
		}
	}
}

// TestThroughStaysFeasible: under the graph schedule the (τ, ε) the
// Lagrangian reads satisfy C after every step, with no ProjectPrimal.
func TestThroughStaysFeasible(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	ids, cl := toyData(40, 2, 13)
	r, err := New(Config{LR: 0.05}, ids, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ProjectThrough(exactProjectors(r)); err != nil {
		t.Fatal(err)
	}
	scores := make([]float64, 8)
	for step := range 300 {
		batch := ids[(step*8)%32 : (step*8)%32+8]
		for i := range scores {
			scores[i] = 2 * rng.NormFloat64()
		}
		if _, err := r.Eval(batch, scores, nil); err != nil {
			t.Fatal(err)
		}
		if err := r.PrimalStep(); err != nil {
			t.Fatal(err)
		}
		for _, tm := range r.terms {
			if tm.Eps < 0 {
				t.Fatalf("step %d: ε = %v < 0", step, tm.Eps)
			}
			for k, x := range tm.Tau {
				if x > tm.Eps {
					t.Fatalf("step %d: τ_%d = %v > ε = %v", step, k, x, tm.Eps)
				}
			}
		}
	}
	if got := r.ThroughProjections(); got != 1+2*300 {
		t.Errorf("%d projections, want %d (one to start, two per step)", got, 1+2*300)
	}
	if r.terms[0].through.rawEps == r.terms[0].Eps && r.terms[0].Eps == 1.0/float64(r.terms[0].n) {
		t.Error("ε never moved")
	}
}

// TestThroughJSONRoundTrip: a checkpoint keeps the free variables, and a
// restored regularizer continues bit for bit after ProjectThrough.
func TestThroughJSONRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	ids, cl := toyData(30, 2, 17)
	r, _ := New(Config{LR: 0.05}, ids, cl)
	if err := r.ProjectThrough(exactProjectors(r)); err != nil {
		t.Fatal(err)
	}
	batch := ids[:10]
	scores := make([]float64, len(batch))
	step := func(r *Regularizer) {
		if _, err := r.Eval(batch, scores, nil); err != nil {
			t.Fatal(err)
		}
		if err := r.PrimalStep(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range scores {
		scores[i] = rng.NormFloat64()
	}
	for range 20 {
		step(r)
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Regularizer
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.ProjectThrough(exactProjectors(&back)); err != nil {
		t.Fatal(err)
	}
	if js2, _ := json.Marshal(&back); string(js2) != string(js) {
		t.Fatal("round trip changed the state")
	}
	for range 10 {
		step(r)
		step(&back)
	}
	a, _ := json.Marshal(r)
	b, _ := json.Marshal(&back)
	if string(a) != string(b) {
		t.Fatal("restored state steps differently")
	}
}
