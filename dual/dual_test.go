package dual

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// toyData returns ids (sparse, to exercise the id → slot map) and classes.
func toyData(n, p int, seed uint64) ([]int64, []int) {
	r := rand.New(rand.NewPCG(seed, 1))
	ids := make([]int64, n)
	cl := make([]int, n)
	for i := range ids {
		ids[i] = int64(1000 + 7*i)
		cl[i] = i % p
	}
	r.Shuffle(n, func(i, j int) { cl[i], cl[j] = cl[j], cl[i] })
	return ids, cl
}

var objectiveConfigs = []Config{
	{Objective: "fbeta", Beta: 1},
	{Objective: "fbeta", Beta: 0.5, Normalization: NormMean},
	{Objective: "p@r", Level: 0.8},
	{Objective: "r@p", Level: 0.7},
	{Objective: "auc-roc", Grid: []float64{0.1, 0.3, 0.5}},
	{Objective: "auc-pr", Grid: []float64{0.6, 0.8}, Normalization: NormMean},
}

// randomizeState gives every term non-trivial τ, λ, ε, μ, ρ.
func randomizeState(r *Regularizer, rng *rand.Rand) {
	for _, t := range r.terms {
		for k := range t.Tau {
			t.Tau[k] = rng.NormFloat64()
			t.Lambda[k] = rng.ExpFloat64()
		}
		t.Eps = 0.3 + rng.Float64()
		t.Mu = rng.NormFloat64()
		if t.Family.HasRho() {
			t.Rho = rng.ExpFloat64()
		}
	}
}

// TestGradientsFiniteDifferences checks ∂L̂/∂scores, ∂L̂/∂τ and ∂L̂/∂ε of
// Eval against central differences of Eval's value, for every family,
// binary and p = 3, with repeated ids in the batch.
func TestGradientsFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, p := range []int{2, 3} {
		for _, cfg := range objectiveConfigs {
			ids, cl := toyData(40, p, 2)
			r, err := New(cfg, ids, cl)
			if err != nil {
				t.Fatal(err)
			}
			randomizeState(r, rng)
			H := r.Heads()
			batch := append(slices.Clone(ids[:12]), ids[3]) // a repeat
			scores := make([]float64, len(batch)*H)
			for i := range scores {
				scores[i] = rng.NormFloat64()
			}
			dS := make([]float64, len(scores))
			if _, err := r.Eval(batch, scores, dS); err != nil {
				t.Fatal(err)
			}
			gEps := make([]float64, len(r.terms))
			gTau := make([][]float64, len(r.terms))
			for k, tm := range r.terms {
				gEps[k] = tm.gEps
				gTau[k] = slices.Clone(tm.gTau)
			}
			val := func() float64 {
				v, err := r.Eval(batch, scores, nil)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			const h = 1e-6
			check := func(what string, x *float64, want float64) {
				old := *x
				*x = old + h
				vp := val()
				*x = old - h
				vm := val()
				*x = old
				fd := (vp - vm) / (2 * h)
				if math.Abs(fd-want) > 1e-6*math.Max(1, math.Abs(want)) {
					t.Errorf("%s p=%d %s: analytic %v, finite difference %v", cfg.Objective, p, what, want, fd)
				}
			}
			for i := range scores {
				check("score", &scores[i], dS[i])
			}
			for k, tm := range r.terms {
				check("eps", &tm.Eps, gEps[k])
				for s := range tm.Tau {
					check("tau", &tm.Tau[s], gTau[k][s])
				}
			}
		}
	}
}

// TestFullBatchIsExactLagrangian: with every example in the batch the
// Horvitz–Thompson weights are 1 and Eval is the paper's L exactly.
func TestFullBatchIsExactLagrangian(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	ids, cl := toyData(30, 2, 3)
	r, _ := New(Config{Normalization: NormSum}, ids, cl)
	randomizeState(r, rng)
	scores := make([]float64, len(ids))
	for i := range scores {
		scores[i] = rng.NormFloat64()
	}
	got, err := r.Eval(ids, scores, nil)
	if err != nil {
		t.Fatal(err)
	}
	tm := r.terms[0]
	n := 0
	want := 0.0
	sumTau := 0.0
	for i, c := range cl {
		if c == 1 {
			k := r.slot[i]
			want += tm.Lambda[k] * (tm.Tau[k] - scores[i])
			sumTau += tm.Tau[k]
			n++
		} else {
			want += math.Max(0, tm.Eps+scores[i])
		}
	}
	want += float64(n)*tm.Eps + tm.Mu*(sumTau-1)
	if math.Abs(got-want) > 1e-12*math.Abs(want) {
		t.Fatalf("full-batch Eval %v, L %v", got, want)
	}
	// Mean normalisation divides by N.
	r.cfg.Normalization = NormMean
	gotMean, _ := r.Eval(ids, scores, nil)
	if math.Abs(gotMean-want/30) > 1e-12 {
		t.Fatalf("mean normalisation %v, want %v", gotMean, want/30)
	}
}

// TestMinibatchUnbiased: averaging the minibatch estimate over many
// balanced batches approaches the full-batch value (the sets are
// unbalanced, 10 vs 50, so unweighted sums would be far off).
func TestMinibatchUnbiased(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	ids := make([]int64, 60)
	cl := make([]int, 60)
	for i := range ids {
		ids[i] = int64(i)
		if i < 10 {
			cl[i] = 1
		}
	}
	r, _ := New(Config{}, ids, cl)
	randomizeState(r, rng)
	scores := make([]float64, len(ids))
	for i := range scores {
		scores[i] = rng.NormFloat64()
	}
	full, _ := r.Eval(ids, scores, nil)
	s, _ := NewSampler(ids, cl, 8, 1)
	var b []int64
	sum := 0.0
	const reps = 20000
	bs := make([]float64, 8)
	for range reps {
		b = s.Next(b)
		for j, id := range b {
			bs[j] = scores[id]
		}
		v, err := r.Eval(b, bs, nil)
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	if mean := sum / reps; math.Abs(mean-full) > 0.01*math.Abs(full) {
		t.Fatalf("mean minibatch estimate %v, full %v", mean, full)
	}
}

func TestDualStep(t *testing.T) {
	ids, cl := toyData(20, 2, 4)
	r, _ := New(Config{Objective: "r@p", Level: 0.5, CLambda: 2, CMu: 3, CRho: 4}, ids, cl)
	tm := r.terms[0]
	c := r.NewScoreCache()
	scores := make([]float64, len(ids))
	for i := range scores {
		scores[i] = float64(i%5) - 2
	}
	if err := c.Put(ids, scores); err != nil {
		t.Fatal(err)
	}
	lam0 := slices.Clone(tm.Lambda)
	for k := range lam0 {
		lam0[k] = 0.1
	}
	copy(tm.Lambda, lam0)
	tau0 := slices.Clone(tm.Tau)
	if err := r.DualStep(2, c); err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for k, i := range r.members[1] {
		want := math.Max(0, lam0[k]+1*(tau0[k]-scores[i])) // η = 2/2
		if tm.Lambda[k] != want || tm.Lambda[k] < 0 {
			t.Fatalf("λ[%d] = %v, want %v", k, tm.Lambda[k], want)
		}
		sum += tau0[k]
	}
	if want := 1.5 * (sum - 1); math.Abs(tm.Mu-want) > 1e-15 {
		t.Fatalf("μ = %v, want %v", tm.Mu, want)
	}
	hinge := 0.0
	for i, c := range cl {
		if c == 0 {
			hinge += math.Max(0, tm.Eps+scores[i])
		}
	}
	if want := math.Max(0, 2*(0.5*hinge-0.5)); math.Abs(tm.Rho-want) > 1e-15 {
		t.Fatalf("ρ = %v, want %v", tm.Rho, want)
	}
	if r.DualStep(0, c) == nil {
		t.Fatal("epoch 0 accepted")
	}
}

func TestProjectPrimalFeasible(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	ids, cl := toyData(50, 3, 5)
	r, _ := New(Config{Objective: "auc-pr", Grid: []float64{0.5, 0.9}}, ids, cl)
	randomizeState(r, rng)
	for _, tm := range r.terms {
		tm.Eps = -0.5
	}
	k, err := r.ProjectPrimal()
	if err != nil || k != len(r.terms) || k != 6 {
		t.Fatalf("ProjectPrimal: %d, %v", k, err)
	}
	for _, tm := range r.terms {
		if tm.Eps < 0 || slices.Max(tm.Tau) > tm.Eps {
			t.Fatalf("infeasible after projection: ε=%v max τ=%v", tm.Eps, slices.Max(tm.Tau))
		}
	}
}

func TestSamplerBalancedDeterministicResumable(t *testing.T) {
	ids, cl := toyData(103, 2, 9)
	s1, _ := NewSampler(ids, cl, 10, 42)
	s2, _ := NewSampler(ids, cl, 10, 42)
	var a, b []int64
	seen := map[int64]int{}
	classOf := map[int64]int{}
	for i, id := range ids {
		classOf[id] = cl[i]
	}
	for step := range 30 {
		a = s1.Next(a)
		b = s2.Next(b)
		if !slices.Equal(a, b) {
			t.Fatal("same seed, different batches")
		}
		if len(a) != 10 {
			t.Fatalf("batch of %d", len(a))
		}
		pos := 0
		for _, id := range a {
			pos += classOf[id]
			seen[id]++
		}
		if pos != 5 {
			t.Fatalf("step %d: %d positives of 10", step, pos)
		}
	}
	if len(seen) != len(ids) {
		t.Fatalf("30 balanced batches of 10 saw %d of %d examples", len(seen), len(ids))
	}
	// Resume: serialise mid-stream, continue both.
	js, err := json.Marshal(s1)
	if err != nil {
		t.Fatal(err)
	}
	var s3 Sampler
	if err := json.Unmarshal(js, &s3); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		a = s1.Next(a)
		b = s3.Next(b)
		if !slices.Equal(a, b) {
			t.Fatal("restored sampler diverged")
		}
	}
	// Odd batch over 3 classes: the remainder rotates.
	ids3, cl3 := toyData(90, 3, 1)
	s4, _ := NewSampler(ids3, cl3, 4, 1)
	counts := make([]int, 3)
	for range 30 {
		a = s4.Next(a)
		for _, id := range a {
			counts[cl3[(id-1000)/7]]++
		}
	}
	if counts[0] != 40 || counts[1] != 40 || counts[2] != 40 {
		t.Fatalf("class counts %v, want 40 each", counts)
	}
}

func TestRegularizerJSONRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	for _, cfg := range objectiveConfigs {
		ids, cl := toyData(25, 3, 7)
		r, err := New(cfg, ids, cl)
		if err != nil {
			t.Fatal(err)
		}
		randomizeState(r, rng)
		batch := ids[:9]
		scores := make([]float64, len(batch)*r.Heads())
		for i := range scores {
			scores[i] = rng.NormFloat64()
		}
		r.Eval(batch, scores, nil)
		r.PrimalStep()
		js, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Regularizer
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatal(err)
		}
		js2, _ := json.Marshal(&back)
		if string(js) != string(js2) {
			t.Fatalf("%s: round trip changed the state", cfg.Objective)
		}
		// Both continue identically.
		r.Eval(batch, scores, nil)
		r.PrimalStep()
		back.Eval(batch, scores, nil)
		back.PrimalStep()
		js, _ = json.Marshal(r)
		js2, _ = json.Marshal(&back)
		if string(js) != string(js2) {
			t.Fatalf("%s: restored state steps differently", cfg.Objective)
		}
	}
	var bad Regularizer
	if bad.UnmarshalJSON([]byte(`{"version":99}`)) == nil {
		t.Fatal("wrong version accepted")
	}
}

// TestLinearResumeIdentical: checkpoint mid-epoch-sequence, restore, and
// the continued run is bit-identical to the uninterrupted one.
func TestLinearResumeIdentical(t *testing.T) {
	x, y := blobs(3, 40, 60, 4, 0.5)
	for _, s := range []Projection{ProjectionEpoch, ProjectionGraph} {
		cfg := LinearConfig{Reg: Config{LR: 1e-3, CLambda: 1, CMu: 1}, Epochs: 30, Batch: 10, LRPower: 0.5, AverageFrom: 10, Seed: 9, Projection: s}
		full, _ := NewLinear(x, y, cfg)
		if err := full.Run(); err != nil {
			t.Fatal(err)
		}
		part, _ := NewLinear(x, y, cfg)
		for range 17 {
			if err := part.RunEpoch(); err != nil {
				t.Fatal(err)
			}
		}
		ck, err := json.Marshal(part)
		if err != nil {
			t.Fatal(err)
		}
		resumed, err := restoreLinear(x, y, ck)
		if err != nil {
			t.Fatal(err)
		}
		if err := resumed.Run(); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(full)
		b, _ := json.Marshal(resumed)
		if string(a) != string(b) {
			t.Fatalf("%s: resumed run differs from the uninterrupted one", s)
		}
		if !slices.Equal(full.W, resumed.W) || full.Epoch != 30 {
			t.Fatalf("%s: heads differ", s)
		}
	}
}

// TestOneVsRestLinear: p = 3 size values, one head each; Algorithm 1
// approaches the sum of the per-head LP optima (one-vs-rest decouples).
func TestOneVsRestLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	var x [][]float64
	var y []int
	for i := range 150 {
		c := i % 3
		row := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		row[c] += 2
		x = append(x, row)
		y = append(y, c)
	}
	l, err := NewLinear(x, y, LinearConfig{Reg: Config{LR: 3e-4, CLambda: 100, CMu: 1}, Epochs: 3000, Batch: 15, LRPower: 0.5, Box: 1, AverageFrom: 1500, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if l.Reg.Heads() != 3 || len(l.Reg.Terms()) != 3 {
		t.Fatalf("heads %d terms %d", l.Reg.Heads(), len(l.Reg.Terms()))
	}
	if err := l.Run(); err != nil {
		t.Fatal(err)
	}
	v, err := l.ValueAt(l.WAvg)
	if err != nil {
		t.Fatal(err)
	}
	// One-vs-rest decouples: the optimum is the sum of the per-head LPs.
	opt := 0.0
	for j := range 3 {
		yj := make([]int, len(y))
		for i, c := range y {
			if c == j {
				yj[i] = 1
			}
		}
		o, _ := solveProblem2LP(t, x, yj, 1, 1)
		opt += o
	}
	t.Logf("one-vs-rest: value %.5f, sum of per-head LP optima %.5f", v, opt)
	// 5 %: a plumbing check of the multi-head path (each head sees only
	// B/3 positives per batch), looser than the binary acceptance test.
	if v < opt*(1-1e-9) || v > 1.05*opt {
		t.Fatalf("one-vs-rest value %v, optimum %v", v, opt)
	}
	// The λ_ij live on the examples of S^j only.
	for j, tm := range l.Reg.Terms() {
		if tm.Class != j || tm.Head != j || len(tm.Lambda) != 50 {
			t.Fatalf("term %d: class %d head %d |λ| %d", j, tm.Class, tm.Head, len(tm.Lambda))
		}
	}
}

func TestConfigErrors(t *testing.T) {
	ids, cl := toyData(10, 2, 1)
	for _, c := range []Config{
		{Objective: "fbeta", Beta: 1.5},
		{Objective: "p@r", Level: 1.2},
		{Objective: "auc-roc"},
		{Objective: "nope"},
		{Normalization: "median"},
	} {
		if _, err := New(c, ids, cl); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if _, err := New(Config{}, []int64{1, 1}, []int{0, 1}); err == nil {
		t.Error("duplicate ids accepted")
	}
	if _, err := New(Config{}, []int64{1, 2}, []int{0, 0}); err == nil {
		t.Error("no positives accepted")
	}
	r, _ := New(Config{}, ids, cl)
	if _, err := r.Eval([]int64{5}, []float64{0}, nil); err == nil {
		t.Error("unknown id accepted")
	}
	if _, err := r.Eval(ids[:1], []float64{math.NaN()}, nil); err == nil {
		t.Error("NaN score accepted")
	}
}

func TestFBetaValue(t *testing.T) {
	// Separable with margin: ε* = 1/n, value = β²·n·(1/n) = β².
	pos := []float64{1, 2, 3, 4}
	neg := []float64{-5, -6}
	if v := FBetaValue(pos, neg, 0.5); math.Abs(v-0.25) > 1e-12 {
		t.Fatalf("separable: %v, want 0.25", v)
	}
	// Σ pos < 1: infeasible.
	if v := FBetaValue([]float64{0.2, 0.3}, nil, 1); !math.IsInf(v, 1) {
		t.Fatalf("infeasible: %v", v)
	}
	// One positive at 0.5, one at 2: ε solves min(ε,.5)+min(ε,2)=1 → ε=0.5;
	// value = 2·0.5 + max(0, 0.5+0) = 1.5.
	if v := FBetaValue([]float64{0.5, 2}, []float64{0}, 1); math.Abs(v-1.5) > 1e-12 {
		t.Fatalf("got %v, want 1.5", v)
	}
}
