package dual

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// fakeNet scores example id on head h as a fixed function of (id, h) and
// checks what the Loop hands it against the Regularizer's own answers.
type fakeNet struct {
	t       *testing.T
	reg     *Regularizer // nil for the baseline
	alpha   float64
	inGraph bool
	step    int
	// what Forward saw, for Update
	pos, neg, eps []float64
	scores        [][]float64 // every step's scores
	updates       int
}

func fakeScore(id int64, h, step int) float64 {
	return math.Sin(float64(id)*0.37+float64(h)) + 0.1*float64(step%5)
}

func (n *fakeNet) Forward(b *Batch) error {
	if n.inGraph && b.DScores != nil {
		n.t.Error("InGraph network was handed a gradient")
	}
	if n.reg != nil && n.inGraph {
		T := len(n.reg.Terms())
		n.pos, n.neg, n.eps = make([]float64, len(b.IDs)*T), make([]float64, len(b.IDs)*T), make([]float64, T)
		if err := n.reg.Coefficients(b.IDs, n.pos, n.neg, n.eps); err != nil {
			return err
		}
		for i := range n.pos {
			if b.Pos[i] != n.alpha*n.pos[i] || b.Neg[i] != n.alpha*n.neg[i] {
				n.t.Fatalf("step %d: coefficient %d = (%v, %v), want α·(%v, %v)", n.step, i, b.Pos[i], b.Neg[i], n.pos[i], n.neg[i])
			}
		}
		if !slices.Equal(b.Eps, n.eps) {
			n.t.Fatalf("step %d: eps %v, want %v", n.step, b.Eps, n.eps)
		}
	} else if b.Pos != nil {
		n.t.Errorf("step %d: coefficients handed to a network that does not take them", n.step)
	}
	H := len(b.Scores) / max(1, len(b.IDs))
	for r, id := range b.IDs {
		for h := range H {
			b.Scores[r*H+h] = fakeScore(id, h, n.step)
		}
	}
	n.scores = append(n.scores, slices.Clone(b.Scores))
	return nil
}

func (n *fakeNet) Update(b *Batch) error {
	n.updates++
	defer func() { n.step++ }()
	if n.reg == nil || n.inGraph {
		if b.DScores != nil {
			n.t.Errorf("step %d: a gradient for a network that does not take one", n.step)
		}
		return nil
	}
	// ∂L̂/∂s = pos + neg·1[eps + s > 0] (Coefficients' documentation).
	T, H := len(n.reg.Terms()), n.reg.Heads()
	pos, neg, eps := make([]float64, len(b.IDs)*T), make([]float64, len(b.IDs)*T), make([]float64, T)
	if err := n.reg.Coefficients(b.IDs, pos, neg, eps); err != nil {
		return err
	}
	want := make([]float64, len(b.Scores))
	for r := range b.IDs {
		for k, term := range n.reg.Terms() {
			g := pos[r*T+k]
			if eps[k]+b.Scores[r*H+term.Head] > 0 {
				g += neg[r*T+k]
			}
			want[r*H+term.Head] += g
		}
	}
	for i := range want {
		if math.Abs(b.DScores[i]-n.alpha*want[i]) > 1e-12*(1+math.Abs(want[i])) {
			n.t.Fatalf("step %d: dScores[%d] = %v, want α·%v", n.step, i, b.DScores[i], want[i])
		}
	}
	return nil
}

// TestLoopFeedsTheNetwork: an InGraph network gets α times the batch's
// coefficients before its forward pass and no gradient; any other gets
// α·∂L̂/∂s before its update; the scores it returns are evaluated and
// cached, and the epoch's statistics count the evaluations.
func TestLoopFeedsTheNetwork(t *testing.T) {
	ids, cl := toyData(40, 3, 5)
	for _, inGraph := range []bool{false, true} {
		reg, err := New(Config{Objective: "auc-pr", Grid: []float64{0.5, 0.8}, CLambda: 1}, ids, cl)
		if err != nil {
			t.Fatal(err)
		}
		randomizeState(reg, rand.New(rand.NewPCG(2, 2))) // λ, ρ > 0: no zero coefficients
		const alpha = 0.25
		loop, err := NewLoop(reg, reg.NewScoreCache(), LoopConfig{Alpha: alpha, InGraph: inGraph, Projection: ProjectionStep})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := NewSampler(ids, cl, 9, 1)
		net := &fakeNet{t: t, reg: reg, alpha: alpha, inGraph: inGraph}
		var sum float64
		var batch []int64
		for range 4 {
			batch = s.Next(batch)
			v, err := loop.Step(batch, net)
			if err != nil {
				t.Fatal(err)
			}
			sum += v
			last := net.scores[len(net.scores)-1]
			for r, id := range batch {
				i, _ := reg.Index(id)
				if got := loop.cache.Scores[i*3 : i*3+3]; !slices.Equal(got, last[r*3:r*3+3]) || !loop.cache.Seen[i] {
					t.Fatalf("id %d: cached %v, network scored %v", id, got, last[r*3:r*3+3])
				}
			}
		}
		st, err := loop.EndEpoch(1)
		if err != nil {
			t.Fatal(err)
		}
		if net.updates != 4 || st.Steps != 4 || st.Evals != 4 || st.Lagrangian != sum/4 || st.Lagrangian == 0 {
			t.Errorf("inGraph %v: %d updates, stats %+v, want 4 steps and the mean of %v", inGraph, net.updates, st, sum)
		}
		// 3 heads × 2 grid points, projected after each of the 4 steps.
		if st.Projections != 4*6 {
			t.Errorf("inGraph %v: %d projections, want 24", inGraph, st.Projections)
		}
	}
}

// TestLoopEndEpoch: the end of an epoch is Π_C (under ProjectionEpoch) and
// then the dual step of that epoch number on the cached scores, exactly as
// the Regularizer's own calls in that order.
func TestLoopEndEpoch(t *testing.T) {
	ids, cl := toyData(30, 2, 3)
	reg, err := New(Config{CLambda: 2, CMu: 0.5}, ids, cl)
	if err != nil {
		t.Fatal(err)
	}
	loop, err := NewLoop(reg, reg.NewScoreCache(), LoopConfig{Alpha: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewSampler(ids, cl, 6, 2)
	net := &fakeNet{t: t, reg: reg, alpha: 1}
	for e := 1; e <= 3; e++ {
		for range 5 {
			ids := s.Next(nil)
			if _, err := loop.Step(ids, net); err != nil {
				t.Fatal(err)
			}
		}
		// The twin takes the end of the epoch by hand.
		b, _ := json.Marshal(reg)
		twin := &Regularizer{}
		if err := json.Unmarshal(b, twin); err != nil {
			t.Fatal(err)
		}
		cb, _ := json.Marshal(loop.cache)
		twinCache, err := twin.RestoreScoreCache(cb)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := twin.ProjectPrimal(); err != nil {
			t.Fatal(err)
		}
		if err := twin.DualStep(e, twinCache); err != nil {
			t.Fatal(err)
		}
		st, err := loop.EndEpoch(e)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(reg)
		want, _ := json.Marshal(twin)
		if string(got) != string(want) {
			t.Fatalf("epoch %d: EndEpoch's state differs from ProjectPrimal then DualStep(%d)", e, e)
		}
		if st.Projections != 1 || st.Steps != 5 {
			t.Errorf("epoch %d: stats %+v, want 5 steps and 1 projection", e, st)
		}
		for _, term := range reg.Terms() {
			for _, tau := range term.Tau {
				if tau > term.Eps || term.Eps < 0 {
					t.Fatalf("epoch %d: τ = %v > ε = %v after the projection", e, tau, term.Eps)
				}
			}
		}
	}
}

// TestLoopGraphSchedule: training through the projection counts the
// Projector's two applications per term and step, and none at the end.
func TestLoopGraphSchedule(t *testing.T) {
	ids, cl := toyData(24, 2, 8)
	reg, _ := New(Config{Objective: "auc-roc", Grid: []float64{0.2, 0.4}}, ids, cl)
	if err := reg.ProjectThrough(exactProjectors(reg)); err != nil {
		t.Fatal(err)
	}
	loop, err := NewLoop(reg, reg.NewScoreCache(), LoopConfig{Projection: ProjectionGraph, Alpha: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := NewSampler(ids, cl, 4, 1)
	for e := 1; e <= 2; e++ {
		st, err := loop.RunEpoch(e, 3, s, &fakeNet{t: t, reg: reg, alpha: 1})
		if err != nil {
			t.Fatal(err)
		}
		if st.Projections != 2*2*3 {
			t.Errorf("epoch %d: %d projections, want 12 (2 terms, 3 steps, 2 each)", e, st.Projections)
		}
	}
}

// TestLoopBaseline: without a Regularizer the Loop steps the network and
// records its scores; FreshCache forgets them when the next epoch starts,
// not before (the epoch's statistics read them after EndEpoch).
func TestLoopBaseline(t *testing.T) {
	ids, cl := toyData(20, 2, 1)
	reg, _ := New(Config{}, ids, cl)
	for _, fresh := range []bool{false, true} {
		cache := reg.NewScoreCache()
		loop, err := NewLoop(nil, cache, LoopConfig{FreshCache: fresh})
		if err != nil {
			t.Fatal(err)
		}
		net := &fakeNet{t: t}
		seen := func() int {
			n := 0
			for _, s := range cache.Seen {
				if s {
					n++
				}
			}
			return n
		}
		for _, b := range [][]int64{ids[:5], ids[5:10]} {
			if v, err := loop.Step(b, net); err != nil || v != 0 {
				t.Fatalf("baseline step: %v, %v", v, err)
			}
		}
		st, err := loop.EndEpoch(1)
		if err != nil || st.Evals != 0 || st.Projections != 0 || st.Steps != 2 || seen() != 10 {
			t.Fatalf("fresh %v: stats %+v, %d seen, err %v; want 2 steps, nothing else, 10 seen", fresh, st, seen(), err)
		}
		if _, err := loop.Step(ids[10:13], net); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 13, true: 3}[fresh]; seen() != want {
			t.Errorf("fresh %v: %d seen in epoch 2, want %d", fresh, seen(), want)
		}
	}
	// No cache either: nothing reads scores, none are asked for.
	loop, err := NewLoop(nil, nil, LoopConfig{})
	if err != nil {
		t.Fatal(err)
	}
	net := &fakeNet{t: t}
	if _, err := loop.Step(ids[:4], net); err != nil || len(net.scores[0]) != 0 || net.updates != 1 {
		t.Fatalf("no cache: scores %v, %d updates, err %v", net.scores, net.updates, err)
	}
}

func TestNewLoopErrors(t *testing.T) {
	ids, cl := toyData(10, 2, 1)
	reg, _ := New(Config{}, ids, cl)
	other, _ := New(Config{}, ids, cl)
	through, _ := New(Config{}, ids, cl)
	if err := through.ProjectThrough(exactProjectors(through)); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		reg   *Regularizer
		cache *ScoreCache
		cfg   LoopConfig
	}{
		"unknown schedule":   {reg, reg.NewScoreCache(), LoopConfig{Projection: "sometimes"}},
		"negative alpha":     {reg, reg.NewScoreCache(), LoopConfig{Alpha: -1}},
		"NaN alpha":          {reg, reg.NewScoreCache(), LoopConfig{Alpha: math.NaN()}},
		"infinite alpha":     {nil, nil, LoopConfig{Alpha: math.Inf(1)}},
		"no cache":           {reg, nil, LoopConfig{}},
		"another's cache":    {reg, other.NewScoreCache(), LoopConfig{}},
		"graph, not through": {reg, reg.NewScoreCache(), LoopConfig{Projection: ProjectionGraph}},
		"epoch, but through": {through, through.NewScoreCache(), LoopConfig{}},
		"step, but through":  {through, through.NewScoreCache(), LoopConfig{Projection: ProjectionStep}},
		"baseline, unknown":  {nil, nil, LoopConfig{Projection: "graphs"}},
	} {
		if _, err := NewLoop(c.reg, c.cache, c.cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewLoop(through, through.NewScoreCache(), LoopConfig{Projection: ProjectionGraph, Alpha: 2}); err != nil {
		t.Errorf("graph schedule through the projection refused: %v", err)
	}
}
