package dual

import (
	"errors"
	"fmt"
	"math"
)

// LinearConfig configures Linear.
type LinearConfig struct {
	Reg    Config `json:"reg"`
	Epochs int    `json:"epochs"`
	// Steps is T, inner steps per epoch (default ⌈N/Batch⌉).
	Steps int `json:"steps,omitempty"`
	// Batch is the minibatch size B (default 32), drawn by Sampler.
	Batch      int        `json:"batch,omitempty"`
	Projection Projection `json:"schedule,omitempty"` // default ProjectionEpoch
	// LRW is Adam's step size for the head w (default Reg.LR, or 1e-2 when
	// that is relative).
	LRW float64 `json:"lr_w,omitempty"`
	// LRPower decays both primal step sizes as lr·e^(−LRPower) at epoch e
	// (0 keeps them constant).
	LRPower float64 `json:"lr_power,omitempty"`
	// Box, if > 0, keeps |w_k| ≤ Box (clipped after every step). The
	// problem is linear in w; the box keeps its optimum attained and the
	// comparison with an LP solver well posed.
	Box float64 `json:"box,omitempty"`
	// AverageFrom, if > 0, makes the driver keep the running mean WAvg of W
	// at the end of epochs ≥ AverageFrom. The Lagrangian is linear in W, so
	// the last iterate of a primal–dual method keeps oscillating around the
	// optimum; the ergodic average is the standard way to read a primal
	// solution off it.
	AverageFrom int    `json:"average_from,omitempty"`
	Seed        uint64 `json:"seed"`
}

// Linear runs Algorithm 1 for a linear size head on fixed features: scores
// s_ih = W_h·a_i, no ERM term, W trained by Adam together with τ, ε. It is
// the check of the Loop that `segtune finetune` drives with a network in
// place of the fixed features: its optimum is an LP's (dual/lp_test.go).
type Linear struct {
	cfg     LinearConfig
	x       [][]float64
	classes []int

	Reg   *Regularizer
	Cache *ScoreCache
	// W holds the heads row-major: W[h·d+k].
	W []float64
	// WAvg is the running mean of W over epochs ≥ AverageFrom (nil before).
	WAvg []float64
	// Epoch counts completed epochs; Projections counts Π_C applications
	// (one per term each).
	Epoch, Projections int

	sampler *Sampler
	nAvg    int
	mW, vW  []float64
	stepW   int
	d       int
	lrW     float64   // this epoch's step size for W
	gW      []float64 // per-step buffer
}

// NewLinear builds the driver for features x (one row per example, ids
// 0..N−1) and size classes.
func NewLinear(x [][]float64, classes []int, cfg LinearConfig) (*Linear, error) {
	if len(x) == 0 || len(x) != len(classes) {
		return nil, errors.New("dual: NewLinear: need one feature row per class label")
	}
	d := len(x[0])
	for _, row := range x {
		if len(row) != d {
			return nil, errors.New("dual: NewLinear: ragged features")
		}
	}
	if cfg.Epochs < 1 {
		return nil, errors.New("dual: NewLinear: Epochs < 1")
	}
	if cfg.Batch == 0 {
		cfg.Batch = 32
	}
	if cfg.Steps == 0 {
		cfg.Steps = (len(x) + cfg.Batch - 1) / cfg.Batch
	}
	if cfg.Projection == "" {
		cfg.Projection = ProjectionEpoch
	}
	if cfg.Projection != ProjectionEpoch && cfg.Projection != ProjectionStep && cfg.Projection != ProjectionGraph {
		return nil, fmt.Errorf("dual: unknown schedule %q", cfg.Projection)
	}
	cfg.Reg = cfg.Reg.withDefaults()
	if cfg.LRW == 0 {
		cfg.LRW = cfg.Reg.LR
		if cfg.LRW == 0 {
			cfg.LRW = 1e-2
		}
	}
	ids := make([]int64, len(x))
	for i := range ids {
		ids[i] = int64(i)
	}
	reg, err := New(cfg.Reg, ids, classes)
	if err != nil {
		return nil, err
	}
	if err := attachProjectors(reg, cfg.Projection); err != nil {
		return nil, err
	}
	s, err := NewSampler(ids, classes, cfg.Batch, cfg.Seed)
	if err != nil {
		return nil, err
	}
	H := reg.Heads()
	return &Linear{
		cfg: cfg, x: x, classes: classes, d: d,
		Reg: reg, Cache: reg.NewScoreCache(), sampler: s,
		W: make([]float64, H*d), mW: make([]float64, H*d), vW: make([]float64, H*d),
		gW: make([]float64, H*d),
	}, nil
}

// attachProjectors switches reg to the graph schedule when s asks for it.
func attachProjectors(reg *Regularizer, s Projection) error {
	if s != ProjectionGraph {
		return nil
	}
	return reg.ProjectThrough(exactProjectors(reg))
}

// Config returns the configuration with defaults filled in.
func (l *Linear) Config() LinearConfig { return l.cfg }

// score returns W_h·a_i.
func (l *Linear) score(i, h int) float64 {
	s := 0.0
	for k, a := range l.x[i] {
		s += l.W[h*l.d+k] * a
	}
	return s
}

// RunEpoch runs one epoch of Algorithm 1 (Loop.RunEpoch) with W as the
// network, after decaying the primal step sizes.
func (l *Linear) RunEpoch() error {
	e := l.Epoch + 1
	lrScale := math.Pow(float64(e), -l.cfg.LRPower)
	l.Reg.cfg.LR = l.cfg.Reg.LR * lrScale
	l.Reg.cfg.LRRel = l.cfg.Reg.LRRel * lrScale
	l.lrW = l.cfg.LRW * lrScale
	// A Loop per epoch: Reg and Cache are exported fields that may be
	// replaced between epochs (the resume test restores them).
	loop, err := NewLoop(l.Reg, l.Cache, LoopConfig{Projection: l.cfg.Projection, Alpha: 1})
	if err != nil {
		return err
	}
	st, err := loop.RunEpoch(e, l.cfg.Steps, l.sampler, (*linearNet)(l))
	if err != nil {
		return err
	}
	l.Projections += st.Projections
	l.Epoch = e
	if a := l.cfg.AverageFrom; a > 0 && e >= a {
		if l.WAvg == nil {
			l.WAvg = make([]float64, len(l.W))
		}
		l.nAvg++
		for k, w := range l.W {
			l.WAvg[k] += (w - l.WAvg[k]) / float64(l.nAvg)
		}
	}
	return nil
}

// linearNet is Linear as the Loop's Network: the features times W.
type linearNet Linear

func (n *linearNet) Forward(b *Batch) error {
	l := (*Linear)(n)
	H := l.Reg.Heads()
	for r, id := range b.IDs {
		for h := range H {
			b.Scores[r*H+h] = l.score(int(id), h)
		}
	}
	return nil
}

// Update back-propagates ∂L̂/∂s through the scores into W and takes
// Adam's step.
func (n *linearNet) Update(b *Batch) error {
	l := (*Linear)(n)
	H := l.Reg.Heads()
	clear(l.gW)
	for r, id := range b.IDs {
		for h := range H {
			g := b.DScores[r*H+h]
			if g == 0 {
				continue
			}
			for k, a := range l.x[id] {
				l.gW[h*l.d+k] += g * a
			}
		}
	}
	l.adamW(l.lrW)
	return nil
}

// adamW takes Adam's step on W with the gradient in gW, then clips W to
// the box.
func (l *Linear) adamW(lr float64) {
	l.stepW++
	t := float64(l.stepW)
	lr *= math.Sqrt(1-math.Pow(adamB2, t)) / (1 - math.Pow(adamB1, t))
	for k, g := range l.gW {
		l.mW[k] = adamB1*l.mW[k] + (1-adamB1)*g
		l.vW[k] = adamB2*l.vW[k] + (1-adamB2)*g*g
		l.W[k] -= lr * l.mW[k] / (math.Sqrt(l.vW[k]) + adamEps)
		if b := l.cfg.Box; b > 0 {
			l.W[k] = math.Max(-b, math.Min(b, l.W[k]))
		}
	}
}

// Run runs the remaining epochs up to Config().Epochs.
func (l *Linear) Run() error {
	for l.Epoch < l.cfg.Epochs {
		if err := l.RunEpoch(); err != nil {
			return err
		}
	}
	return nil
}

// Value returns the objective of the F_β problem (Problem 2 with β²n) at
// the current head: for fixed scores the best feasible (τ, ε) is found
// exactly (FBetaValue), so this is the regulariser's true value at W, not
// the Lagrangian. Terms are combined with their weights (one-vs-rest sums
// over heads). Only F_β objectives have this value.
func (l *Linear) Value() (float64, error) { return l.ValueAt(l.W) }

// ValueAt is Value for the head w (same layout as W), e.g. WAvg.
func (l *Linear) ValueAt(w []float64) (float64, error) {
	if len(w) != len(l.W) {
		return 0, errors.New("dual: ValueAt: wrong head size")
	}
	saved := l.W
	l.W = w
	defer func() { l.W = saved }()
	total := 0.0
	for _, t := range l.Reg.terms {
		fb, ok := t.Family.(FBeta)
		if !ok {
			return 0, fmt.Errorf("dual: Value: objective %q is not F_β", t.Family.Name())
		}
		var pos, neg []float64
		for i, c := range l.classes {
			if c == t.Class {
				pos = append(pos, l.score(i, t.Head))
			} else {
				neg = append(neg, l.score(i, t.Head))
			}
		}
		total += t.Weight * FBetaValue(pos, neg, fb.Beta)
	}
	return total, nil
}

// FBetaValue is the optimal value of the F_β problem for fixed scores:
//
//	min_{ε ≥ 0, τ} β²nε + Σ_j max(0, ε + neg_j)  s.t. τ_i ≤ min(ε, pos_i), Σ τ_i = 1.
//
// The objective increases with ε and a feasible τ exists iff
// Σ_i min(ε, pos_i) ≥ 1, so ε* is the root of that increasing function
// (found by bisection). It is +Inf when even ε → ∞ is infeasible
// (Σ pos_i < 1). The F_β bound at these scores is (1+β²)/(1+value).
func FBetaValue(pos, neg []float64, beta float64) float64 {
	g := func(e float64) float64 {
		s := 0.0
		for _, p := range pos {
			s += math.Min(e, p)
		}
		return s
	}
	hi := 0.0
	for _, p := range pos {
		hi = math.Max(hi, p)
	}
	if len(pos) == 0 || g(hi) < 1 {
		return math.Inf(1)
	}
	lo := 0.0
	for range 200 {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if g(mid) >= 1 {
			hi = mid
		} else {
			lo = mid
		}
	}
	v := beta * beta * float64(len(pos)) * hi
	for _, s := range neg {
		v += math.Max(0, hi+s)
	}
	return v
}
