package dual

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/projection"
)

// twinStep evaluates a batch on r and takes its primal step, and does the
// same on a FeasNone twin of r, returning the twin: the twin's (ε, τ) is
// r's before the repair.
func twinStep(t *testing.T, r *Regularizer, ids []int64, scores []float64) *Regularizer {
	t.Helper()
	js, _ := json.Marshal(r)
	twin := &Regularizer{}
	if err := json.Unmarshal(js, twin); err != nil {
		t.Fatal(err)
	}
	twin.cfg.Feasibility = FeasNone
	for _, x := range []*Regularizer{r, twin} {
		if _, err := x.Eval(ids, scores, nil); err != nil {
			t.Fatal(err)
		}
		if err := x.PrimalStep(); err != nil {
			t.Fatal(err)
		}
	}
	return twin
}

// The repair after a primal step: "clip" only clips ε; "batch" applies the
// paper's pair rule when the step moved one τ_i and the exact projection of
// the moved coordinates with ε otherwise, leaving the other τ_j alone; in
// every case ε ≥ 0 afterwards. Without a repair ε drifts below 0 (its
// gradient n + #active is always positive).
func TestFeasibilityRepair(t *testing.T) {
	ids, cl := toyData(40, 2, 11)
	var pos, neg []int64
	for i, c := range cl {
		if c == 1 {
			pos = append(pos, ids[i])
		} else {
			neg = append(neg, ids[i])
		}
	}
	rng := rand.New(rand.NewPCG(3, 3))
	for _, feas := range []Feasibility{FeasBatch, FeasClip} {
		for _, onePos := range []bool{true, false} {
			r, err := New(Config{Feasibility: feas, LR: 0.05, LambdaInit: 2}, ids, cl)
			if err != nil {
				t.Fatal(err)
			}
			term := r.terms[0]
			for step := range 60 {
				batch := append([]int64(nil), neg[:3]...)
				if onePos {
					batch = append(batch, pos[step%len(pos)])
				} else {
					batch = append(batch, pos[(2*step)%len(pos)], pos[(2*step+1)%len(pos)], pos[(2*step+7)%len(pos)])
				}
				scores := make([]float64, len(batch))
				for i := range scores {
					scores[i] = rng.NormFloat64()
				}
				twin := twinStep(t, r, batch, scores)
				tw := twin.terms[0]
				if term.Eps < 0 {
					t.Fatalf("%s: step %d: ε = %v < 0", feas, step, term.Eps)
				}
				moved := tw.touched
				wantEps, wantTau := tw.Eps, slices.Clone(tw.Tau)
				switch {
				case feas == FeasClip:
					wantEps = math.Max(0, wantEps)
				case len(moved) == 1:
					wantEps, wantTau[moved[0]] = projection.PairRule(tw.Eps, tw.Tau[moved[0]])
				default:
					g := make([]float64, len(moved))
					for j, k := range moved {
						g[j] = tw.Tau[k]
					}
					if wantEps, err = projection.ProjectPivot(tw.Eps, g, nil); err != nil {
						t.Fatal(err)
					}
					for j, k := range moved {
						wantTau[k] = g[j]
					}
				}
				if term.Eps != wantEps || !slices.Equal(term.Tau, wantTau) {
					t.Fatalf("%s, one positive %v: step %d: (ε, τ) = (%v, %v), want (%v, %v)", feas, onePos, step, term.Eps, term.Tau, wantEps, wantTau)
				}
				if feas == FeasBatch {
					for _, k := range moved {
						if term.Tau[k] > term.Eps {
							t.Fatalf("step %d: moved τ_%d = %v > ε = %v", step, k, term.Tau[k], term.Eps)
						}
					}
				}
			}
		}
	}
	// The control: without a repair ε leaves C.
	r, _ := New(Config{Feasibility: FeasNone, LR: 0.05}, ids, cl)
	for range 60 {
		r.Eval(ids[:4], []float64{0.1, -0.2, 0.3, 0.4}, nil)
		r.PrimalStep()
	}
	if r.terms[0].Eps >= 0 {
		t.Fatalf("without a repair ε = %v after 60 steps; the test cannot tell repairs from no-ops", r.terms[0].Eps)
	}
}

// Adam's first step moves each variable by its step size: LRRel/n for a
// term with n large examples when LR is 0, LR otherwise.
func TestRelativeStep(t *testing.T) {
	ids, cl := toyData(30, 3, 4)
	for i := range cl { // one-vs-rest: three terms, |S+| = 5, 10, 15
		cl[i] = min(2, i/5) % 3
		if i >= 15 {
			cl[i] = 2
		}
	}
	for _, c := range []struct {
		cfg  Config
		want func(n int) float64
	}{
		{Config{Feasibility: FeasNone}, func(n int) float64 { return DefaultLRRel / float64(n) }},
		{Config{Feasibility: FeasNone, LRRel: 0.5}, func(n int) float64 { return 0.5 / float64(n) }},
		{Config{Feasibility: FeasNone, LR: 0.02}, func(int) float64 { return 0.02 }},
	} {
		r, err := New(c.cfg, ids, cl)
		if err != nil {
			t.Fatal(err)
		}
		before := make([]float64, len(r.terms))
		for k, tm := range r.terms {
			before[k] = tm.Eps
		}
		if _, err := r.Eval(ids[:6], make([]float64, 6*r.Heads()), nil); err != nil {
			t.Fatal(err)
		}
		if err := r.PrimalStep(); err != nil {
			t.Fatal(err)
		}
		for k, tm := range r.terms {
			if got, want := before[k]-tm.Eps, c.want(tm.n); math.Abs(got-want) > 1e-5*want {
				t.Errorf("%+v: term %d (n = %d): ε moved %v, want %v", c.cfg, k, tm.n, got, want)
			}
		}
	}
}

func TestLambdaInit(t *testing.T) {
	ids, cl := toyData(20, 2, 1)
	r, err := New(Config{LambdaInit: 0.25}, ids, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range r.terms[0].Lambda {
		if l != 0.25 {
			t.Fatalf("λ = %v, want 0.25", l)
		}
	}
	for _, bad := range []float64{-1, math.Inf(1), math.NaN()} {
		if _, err := New(Config{LambdaInit: bad}, ids, cl); err == nil {
			t.Errorf("initial λ %v accepted", bad)
		}
	}
	if _, err := New(Config{Feasibility: "sometimes"}, ids, cl); err == nil {
		t.Error("unknown feasibility accepted")
	}
	if _, err := New(Config{LR: -1}, ids, cl); err == nil {
		t.Error("negative step accepted")
	}
}

// A dual step with fraction f of epoch e is the dual step of epoch e/f.
func TestDualStepFraction(t *testing.T) {
	ids, cl := toyData(30, 2, 5)
	cfg := Config{Objective: "r@p", Level: 0.6, CLambda: 2, CMu: 3, CRho: 4}
	a, _ := New(cfg, ids, cl)
	b, _ := New(cfg, ids, cl)
	rng := rand.New(rand.NewPCG(1, 2))
	randomizeState(a, rng)
	js, _ := json.Marshal(a)
	if err := json.Unmarshal(js, b); err != nil {
		t.Fatal(err)
	}
	ca, cb := a.NewScoreCache(), b.NewScoreCache()
	scores := make([]float64, len(ids))
	for i := range scores {
		scores[i] = rng.NormFloat64()
	}
	ca.Put(ids, scores)
	cb.Put(ids, scores)
	if err := a.DualStepFraction(2, 0.25, ca); err != nil {
		t.Fatal(err)
	}
	if err := b.DualStep(8, cb); err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatal("DualStepFraction(2, 0.25) differs from DualStep(8)")
	}
	if string(ja) == string(js) {
		t.Fatal("the dual step changed nothing")
	}
	for _, f := range []float64{0, -0.5, 1.5, math.NaN()} {
		if a.DualStepFraction(1, f, ca) == nil {
			t.Errorf("fraction %v accepted", f)
		}
	}
}

// constNet scores every example by a fixed function of its id.
type constNet struct{}

func (constNet) Forward(b *Batch) error {
	for r, id := range b.IDs {
		b.Scores[r] = math.Sin(float64(id))
	}
	return nil
}
func (constNet) Update(*Batch) error { return nil }

// The Loop takes a dual step after every K-th step and at the epoch's end,
// each weighted by the share of the epoch it follows: with fixed scores and
// a state that only the dual step changes, the epoch's λ are those of the
// single steps' chain, and they differ from one end-of-epoch step.
func TestLoopDualEvery(t *testing.T) {
	ids, cl := toyData(40, 2, 9)
	s, _ := NewSampler(ids, cl, 4, 3)
	var batches [][]int64
	for range 10 {
		batches = append(batches, s.Next(nil))
	}
	run := func(k, perEpoch int) (*Regularizer, EpochStats) {
		// LR tiny and no repair: (τ, ε) stay (almost) where they are, so
		// that only λ and μ tell the runs apart.
		reg, _ := New(Config{CLambda: 1, CMu: 1, DualEvery: k, Feasibility: FeasNone, LR: 1e-300}, ids, cl)
		loop, err := NewLoop(reg, reg.NewScoreCache(), LoopConfig{Alpha: 1, StepsPerEpoch: perEpoch, Projection: ProjectionStep})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range batches {
			if _, err := loop.Step(b, constNet{}); err != nil {
				t.Fatal(err)
			}
		}
		st, err := loop.EndEpoch(1)
		if err != nil {
			t.Fatal(err)
		}
		return reg, st
	}
	for _, c := range []struct{ k, perEpoch, duals int }{
		{-1, 10, 1}, {3, 10, 4}, {5, 10, 2}, {10, 10, 1}, {0, 10, 4}, {0, 0, 1}, {4, 0, 3},
	} {
		_, st := run(c.k, c.perEpoch)
		if st.DualSteps != c.duals {
			t.Errorf("K = %d, T = %d: %d dual steps, want %d", c.k, c.perEpoch, st.DualSteps, c.duals)
		}
	}
	// K = 3 of T = 10 by hand: fractions 0.3, 0.3, 0.3 at steps 3, 6, 9 on
	// the scores cached so far, and 0.1 at the end.
	reg, _ := run(3, 10)
	hand, _ := New(Config{CLambda: 1, CMu: 1, DualEvery: 3, Feasibility: FeasNone, LR: 1e-300}, ids, cl)
	cache := hand.NewScoreCache()
	for i, b := range batches {
		sc := make([]float64, len(b))
		constNet{}.Forward(&Batch{IDs: b, Scores: sc})
		hand.Eval(b, sc, nil)
		cache.Put(b, sc)
		hand.PrimalStep()
		hand.ProjectPrimal()
		if (i+1)%3 == 0 {
			hand.DualStepFraction(1, 0.3, cache)
		}
	}
	hand.DualStepFraction(1, 0.1, cache)
	if !slices.Equal(reg.terms[0].Lambda, hand.terms[0].Lambda) || reg.terms[0].Mu != hand.terms[0].Mu {
		t.Fatalf("λ after K = 3 steps\n%v\nwant\n%v", reg.terms[0].Lambda, hand.terms[0].Lambda)
	}
	once, _ := run(-1, 10)
	if slices.Equal(once.terms[0].Lambda, reg.terms[0].Lambda) {
		t.Fatal("dual steps every K steps gave the λ of one step per epoch")
	}
}

// A Loop built in the middle of an epoch (LoopConfig.Epoch, StepInEpoch)
// over a restored state continues exactly like the uninterrupted one, its
// mid-epoch dual steps included.
func TestLoopResumeMidEpoch(t *testing.T) {
	ids, cl := toyData(48, 2, 2)
	cfg := Config{CLambda: 2, CMu: 1, DualEvery: 2}
	const T = 6
	straight, _ := New(cfg, ids, cl)
	sa, _ := NewSampler(ids, cl, 8, 5)
	la, _ := NewLoop(straight, straight.NewScoreCache(), LoopConfig{Alpha: 1, StepsPerEpoch: T})
	net := constNet{}
	var stateMid, cacheMid, samplerMid []byte
	for e := 1; e <= 3; e++ {
		for step := range T {
			if e == 2 && step == 3 {
				stateMid, _ = json.Marshal(straight)
				cacheMid, _ = json.Marshal(la.cache)
				samplerMid, _ = json.Marshal(sa)
			}
			if _, err := la.Step(sa.Next(nil), net); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := la.EndEpoch(e); err != nil {
			t.Fatal(err)
		}
	}
	resumed := &Regularizer{}
	if err := json.Unmarshal(stateMid, resumed); err != nil {
		t.Fatal(err)
	}
	cache, err := resumed.RestoreScoreCache(cacheMid)
	if err != nil {
		t.Fatal(err)
	}
	sb := &Sampler{}
	if err := json.Unmarshal(samplerMid, sb); err != nil {
		t.Fatal(err)
	}
	lb, err := NewLoop(resumed, cache, LoopConfig{Alpha: 1, StepsPerEpoch: T, Epoch: 2, StepInEpoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	for e := 2; e <= 3; e++ {
		from := 0
		if e == 2 {
			from = 3
		}
		for range T - from {
			if _, err := lb.Step(sb.Next(nil), net); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := lb.EndEpoch(e); err != nil {
			t.Fatal(err)
		}
	}
	ja, _ := json.Marshal(straight)
	jb, _ := json.Marshal(resumed)
	if string(ja) != string(jb) {
		t.Fatal("the resumed loop's state differs from the uninterrupted one")
	}
}

// The epoch's statistics describe the state: λ's mean and maximum, Σ τ,
// ε before and after the projection, and the active share of the hinges.
func TestLoopEpochStats(t *testing.T) {
	ids, cl := toyData(30, 2, 8)
	reg, _ := New(Config{Feasibility: FeasNone, LR: 0.05, CLambda: 1, LambdaInit: 0.5, DualEvery: -1}, ids, cl)
	loop, _ := NewLoop(reg, reg.NewScoreCache(), LoopConfig{Alpha: 1})
	s, _ := NewSampler(ids, cl, 6, 1)
	active, negs := 0, 0
	for range 20 {
		b := s.Next(nil)
		// Count the hinges the Regularizer will see, at its ε before the step.
		eps := reg.terms[0].Eps
		for _, id := range b {
			i, _ := reg.Index(id)
			if cl[i] == 0 {
				negs++
				if eps+math.Sin(float64(id)) > 0 {
					active++
				}
			}
		}
		if _, err := loop.Step(b, constNet{}); err != nil {
			t.Fatal(err)
		}
	}
	epsBefore := reg.terms[0].Eps
	st, err := loop.EndEpoch(1)
	if err != nil {
		t.Fatal(err)
	}
	term := reg.terms[0]
	if st.EpsBefore != epsBefore || epsBefore >= 0 || st.EpsAfter != term.Eps || st.EpsAfter < 0 {
		t.Errorf("ε before %v (want %v < 0), after %v (want %v ≥ 0)", st.EpsBefore, epsBefore, st.EpsAfter, term.Eps)
	}
	mean, mx, sum := 0.0, 0.0, 0.0
	for k, l := range term.Lambda {
		mean += l / float64(len(term.Lambda))
		mx = math.Max(mx, l)
		sum += term.Tau[k]
	}
	if math.Abs(st.LambdaMean-mean) > 1e-12 || st.LambdaMax != mx || math.Abs(st.TauSum-sum) > 1e-12 {
		t.Errorf("λ mean %v max %v Στ %v, want %v %v %v", st.LambdaMean, st.LambdaMax, st.TauSum, mean, mx, sum)
	}
	if mean == 0.5 && mx == 0.5 {
		t.Error("the dual step left λ at its start: the test cannot tell")
	}
	if want := float64(active) / float64(negs); st.HingeActive != want || want == 0 || want == 1 {
		t.Errorf("hinge active %v, want %v (not 0 or 1)", st.HingeActive, want)
	}
}

// A version-1 state (before the dynamics of docs/method.md §12) is restored
// with the dynamics it ran under.
func TestStateVersion1(t *testing.T) {
	ids, cl := toyData(12, 2, 1)
	r, _ := New(Config{Normalization: NormSum, LR: 1e-2}, ids, cl)
	js, _ := json.Marshal(r)
	old := strings.Replace(string(js), `"version":2`, `"version":1`, 1)
	for _, f := range []string{`"feasibility":"batch",`, `"lr_rel":0.03,`} {
		old = strings.Replace(old, f, "", 1)
	}
	var back Regularizer
	if err := json.Unmarshal([]byte(old), &back); err != nil {
		t.Fatal(err)
	}
	c := back.Config()
	if c.Feasibility != FeasNone || c.DualEvery >= 0 || c.LR != 1e-2 || c.Normalization != NormSum {
		t.Fatalf("version-1 state restored with %+v", c)
	}
}
