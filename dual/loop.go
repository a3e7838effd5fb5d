package dual

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/segtune/segtune/internal/setting"
)

// Projection says when Π_C is applied in Algorithm 1.
type Projection string

const (
	// ProjectionEpoch is Algorithm 1: one projection per epoch, before the
	// dual step.
	ProjectionEpoch Projection = "epoch"
	// ProjectionStep is the "full projections" baseline: a projection after
	// every inner step (and none extra at the end of the epoch).
	ProjectionStep Projection = "step"
	// ProjectionGraph trains through the projection (docs/method.md §8, the relu
	// form): the Lagrangian reads Π_C of free τ̃, ε̃ and every step
	// back-propagates through it (Regularizer.ProjectThrough, with
	// ExactProjector), so no separate projection step is needed.
	ProjectionGraph Projection = "graph"
)

// Network is the primal side of Algorithm 1 that a Loop drives: the model
// whose scores the Lagrangian reads, with its own optimiser. Loop is the
// method and Network the problem, as gonum/optimize separates a Method
// from the Problem it minimises: `segtune finetune` plugs in an ONNX
// segmentation network, and the S-MNIST experiment a linear classifier.
type Network interface {
	// Forward computes the scores of the examples b.IDs at the current
	// weights into b.Scores. A network whose training graph contains the
	// regulariser's term (LoopConfig.InGraph) feeds it b.Pos, b.Neg and
	// b.Eps and computes its gradient in the same pass.
	Forward(b *Batch) error
	// Update takes the network's optimiser step on the batch; without
	// InGraph, b.DScores holds the regulariser's gradient to back-propagate.
	Update(b *Batch) error
}

// Batch is one inner step of Algorithm 1 as a Network sees it. Its slices
// belong to the Loop and are reused from step to step.
type Batch struct {
	// IDs are the examples of the minibatch.
	IDs []int64
	// Scores receives the network's scores, len(IDs)·Heads() row-major; nil
	// when the Loop has neither a Regularizer nor a ScoreCache (nothing
	// reads them).
	Scores []float64
	// Pos, Neg (len(IDs)·T, T terms) and Eps (T) are the batch's
	// Regularizer.Coefficients, Pos and Neg multiplied by α, so that the
	// term the graph computes is α·L̂ up to constants. Set before Forward
	// under InGraph; nil otherwise.
	Pos, Neg, Eps []float64
	// DScores is α·∂L̂/∂scores, set before Update unless InGraph; nil
	// otherwise.
	DScores []float64
}

// CoefficientsFloat32 writes Pos, Neg and Eps as float32 into pos, neg
// and eps (of the same lengths): the form an ONNX training graph is fed.
func (b *Batch) CoefficientsFloat32(pos, neg, eps []float32) {
	for i, v := range b.Pos {
		pos[i] = float32(v)
	}
	for i, v := range b.Neg {
		neg[i] = float32(v)
	}
	for i, v := range b.Eps {
		eps[i] = float32(v)
	}
}

// LoopConfig configures a Loop.
type LoopConfig struct {
	// Projection says when Π_C is applied (default ProjectionEpoch).
	// ProjectionGraph needs a Regularizer that trains through the projection
	// (Regularizer.ProjectThrough), and only that schedule accepts one.
	Projection Projection
	// Alpha is the regulariser's weight α: the network minimises its own
	// loss plus α·L̂. It scales the coefficients and the gradient handed to
	// the Network, not the Lagrangian's own primal and dual steps.
	Alpha float64
	// InGraph says the Network computes the regulariser's term in its own
	// training graph from the coefficients (Batch.Pos, Neg, Eps) instead of
	// back-propagating Batch.DScores.
	InGraph bool
	// FreshCache forgets the cached scores at the start of every epoch, so
	// that the dual step reads only the scores of that epoch. By default a
	// score stays until its example is seen again (docs/method.md §6).
	FreshCache bool
	// Epoch is the epoch e ≥ 1 the first Step belongs to (default 1), and
	// StepInEpoch the steps of it already taken: a Loop built to resume a
	// run in the middle of epoch e takes its next dual steps where the
	// uninterrupted run would have, with its η = c/e.
	Epoch, StepInEpoch int
	// StepsPerEpoch, when > 0, is the epoch's length: no dual step is
	// taken after its last step, which EndEpoch ends with one anyway.
	// RunEpoch sets it from its steps.
	StepsPerEpoch int
}

// EpochStats describes one epoch of a Loop.
type EpochStats struct {
	// Steps is the number of inner steps.
	Steps int
	// Evals is the number of Lagrangian evaluations (one a step with a
	// Regularizer, none without) and Lagrangian their mean L̂ (before α; 0
	// without evaluations).
	Evals      int
	Lagrangian float64
	// Projections counts the applications of Π_C, one per term each; under
	// ProjectionGraph two per term and step (the gradient, the new point).
	Projections int
	// ProjectionTime is the time spent projecting: ProjectPrimal, and under
	// ProjectionGraph the primal steps, which are made of projections.
	ProjectionTime time.Duration
	// DualSteps counts the dual steps: the epoch's last, and one after
	// every Config.DualEvery-th step before it.
	DualSteps int
	// The state at the end of the epoch, averaged over the terms: ε just
	// before and just after the epoch's last projection (under
	// ProjectionGraph the free ε̃ and its projection ε; without any
	// projection both are the current ε), Σ τ and the mean and maximum λ
	// over the large examples after the dual step. HingeActive is the
	// fraction of the small examples of the epoch's batches whose hinge
	// ε + s was active (> 0) when evaluated. All 0 without a Regularizer.
	EpsBefore, EpsAfter   float64
	TauSum                float64
	LambdaMean, LambdaMax float64
	HingeActive           float64
}

// Loop is the one orchestration of Algorithm 1 (docs/method.md §6): for
// every inner step it hands the Network the batch's coefficients, takes
// the network's scores, evaluates the Lagrangian, records the scores in
// the ScoreCache, lets the Network take its step, steps (τ, ε) and, under
// ProjectionStep, projects; at the end of an epoch it projects under
// ProjectionEpoch and takes the dual step. A Loop without a Regularizer only
// runs the network (the α = 0 baseline), still recording scores when it
// has a cache.
//
// The caller draws the batches (Step, EndEpoch) or hands a Sampler
// (RunEpoch). A Loop keeps no state worth a checkpoint beyond the running
// epoch's statistics: build a new one over a restored Regularizer and
// cache, after ProjectThrough.
type Loop struct {
	cfg   LoopConfig
	reg   *Regularizer
	cache *ScoreCache
	heads int
	b     Batch
	ids   []int64 // RunEpoch's sampler buffer

	// The running epoch.
	stats     EpochStats
	lagrSum   float64
	mark      int  // reg.ThroughProjections() at the start of the epoch
	freshNext bool // the next Step starts an epoch
	epoch     int  // e of the running epoch
	inEpoch   int  // steps of the running epoch taken
	lastDual  int  // inEpoch at the last mid-epoch dual step
	// ε around the epoch's last projection (recorded by project).
	epsBefore, epsAfter float64
	projected           bool
	negEvals, negActive int // reg's counters at the start of the epoch
}

// AlphaRange is the regularizer weights α a loop takes: finite and ≥ 0 (0
// trains the baseline).
var AlphaRange = setting.Range{Min: 0, Max: math.Inf(1)}

// NewLoop returns a Loop over reg and cache (cache must be reg's; reg may
// be nil for the baseline, and then cache may be nil too).
func NewLoop(reg *Regularizer, cache *ScoreCache, cfg LoopConfig) (*Loop, error) {
	if cfg.Projection == "" {
		cfg.Projection = ProjectionEpoch
	}
	if cfg.Projection != ProjectionEpoch && cfg.Projection != ProjectionStep && cfg.Projection != ProjectionGraph {
		return nil, fmt.Errorf("dual: unknown schedule %q", cfg.Projection)
	}
	if err := AlphaRange.Check("alpha", cfg.Alpha, false); err != nil {
		return nil, fmt.Errorf("dual: NewLoop: %w", err)
	}
	if cfg.Epoch < 0 || cfg.StepInEpoch < 0 || cfg.StepsPerEpoch < 0 {
		return nil, fmt.Errorf("dual: NewLoop: epoch %d, step %d, steps per epoch %d must not be negative", cfg.Epoch, cfg.StepInEpoch, cfg.StepsPerEpoch)
	}
	if cfg.Epoch == 0 {
		cfg.Epoch = 1
	}
	l := &Loop{cfg: cfg, reg: reg, cache: cache, freshNext: cfg.StepInEpoch == 0, epoch: cfg.Epoch, inEpoch: cfg.StepInEpoch}
	if cache != nil {
		l.heads = cache.heads
	}
	if reg != nil {
		if cache == nil || cache.reg != reg {
			return nil, errors.New("dual: NewLoop: the score cache must be the Regularizer's")
		}
		// Projecting (ε, τ) that are a view of free variables would break
		// the view; under the graph schedule a plain state would never be
		// projected at all.
		switch through := reg.Through(); {
		case through && cfg.Projection != ProjectionGraph:
			return nil, fmt.Errorf("dual: NewLoop: schedule %q, but the Regularizer trains through the projection (ProjectThrough)", cfg.Projection)
		case !through && cfg.Projection == ProjectionGraph:
			return nil, errors.New("dual: NewLoop: schedule \"graph\" needs a Regularizer that trains through the projection (ProjectThrough)")
		}
		l.mark = reg.ThroughProjections()
		l.negEvals, l.negActive = reg.negEvals, reg.negActive
		if k := l.dualEvery(); k > 0 {
			l.lastDual = cfg.StepInEpoch / k * k // the resumed epoch's last mid-epoch dual step
		}
	}
	return l, nil
}

// Step runs one inner step of Algorithm 1 on the examples ids and returns
// the batch's Lagrangian L̂ (before α; 0 without a Regularizer).
func (l *Loop) Step(ids []int64, net Network) (float64, error) {
	if l.freshNext {
		if l.cfg.FreshCache && l.cache != nil {
			l.cache.Reset()
		}
		l.freshNext = false
	}
	b := &l.b
	b.IDs = ids
	if l.cache != nil {
		b.Scores = resize(b.Scores, len(ids)*l.heads)
	}
	reg := l.reg
	if reg != nil && l.cfg.InGraph {
		T := len(reg.terms)
		b.Pos, b.Neg, b.Eps = resize(b.Pos, len(ids)*T), resize(b.Neg, len(ids)*T), resize(b.Eps, T)
		if err := reg.Coefficients(ids, b.Pos, b.Neg, b.Eps); err != nil {
			return 0, err
		}
		for i := range b.Pos {
			b.Pos[i] *= l.cfg.Alpha
			b.Neg[i] *= l.cfg.Alpha
		}
	}
	if err := net.Forward(b); err != nil {
		return 0, err
	}
	var val float64
	if reg != nil {
		var d []float64
		if !l.cfg.InGraph {
			b.DScores = resize(b.DScores, len(b.Scores))
			d = b.DScores
		}
		var err error
		if val, err = reg.Eval(ids, b.Scores, d); err != nil {
			return 0, err
		}
		for i := range d {
			d[i] *= l.cfg.Alpha
		}
		l.lagrSum += val
		l.stats.Evals++
	}
	if l.cache != nil {
		if err := l.cache.Put(ids, b.Scores); err != nil {
			return 0, err
		}
	}
	if err := net.Update(b); err != nil {
		return 0, err
	}
	if reg != nil {
		t0 := time.Now()
		if err := reg.PrimalStep(); err != nil {
			return 0, err
		}
		if reg.Through() {
			l.stats.ProjectionTime += time.Since(t0)
		}
		if l.cfg.Projection == ProjectionStep {
			if err := l.project(); err != nil {
				return 0, err
			}
		}
	}
	l.stats.Steps++
	l.inEpoch++
	if k := l.dualEvery(); k > 0 && l.inEpoch%k == 0 && l.inEpoch != l.cfg.StepsPerEpoch {
		if err := l.reg.DualStepFraction(l.epoch, l.fraction(l.inEpoch-l.lastDual, 0), l.cache); err != nil {
			return 0, err
		}
		l.lastDual = l.inEpoch
		l.stats.DualSteps++
	}
	return val, nil
}

// fraction is the share of the epoch that since steps are: of
// StepsPerEpoch when known, else of the epoch's steps so far (at its end)
// or the whole step (η = c/e) when neither is known.
func (l *Loop) fraction(since, sofar int) float64 {
	T := l.cfg.StepsPerEpoch
	if T <= 0 {
		T = sofar
	}
	if T <= 0 || since <= 0 {
		return 1
	}
	return min(1, float64(since)/float64(T))
}

// dualEvery is K of the mid-epoch dual steps, 0 for none.
func (l *Loop) dualEvery() int {
	if l.reg == nil {
		return 0
	}
	switch k := l.reg.cfg.DualEvery; {
	case k > 0:
		return k
	case k == 0 && l.cfg.StepsPerEpoch > 0:
		return (l.cfg.StepsPerEpoch + DefaultDualsPerEpoch - 1) / DefaultDualsPerEpoch
	}
	return 0
}

// project applies Π_C to every term, counted and timed, and records ε
// before and after.
func (l *Loop) project() error {
	l.epsBefore = l.meanEps()
	t0 := time.Now()
	n, err := l.reg.ProjectPrimal()
	l.stats.ProjectionTime += time.Since(t0)
	l.stats.Projections += n
	l.epsAfter, l.projected = l.meanEps(), true
	return err
}

// meanEps is the mean ε over the terms.
func (l *Loop) meanEps() float64 {
	s := 0.0
	for _, t := range l.reg.terms {
		s += t.Eps
	}
	return s / float64(len(l.reg.terms))
}

// endStats fills the state part of the epoch's statistics.
func (l *Loop) endStats(st *EpochStats) {
	reg := l.reg
	switch {
	case reg.Through():
		raw := 0.0
		for _, t := range reg.terms {
			raw += t.through.rawEps
		}
		st.EpsBefore, st.EpsAfter = raw/float64(len(reg.terms)), l.meanEps()
	case l.projected:
		st.EpsBefore, st.EpsAfter = l.epsBefore, l.epsAfter
	default:
		st.EpsBefore = l.meanEps()
		st.EpsAfter = st.EpsBefore
	}
	var lamSum float64
	var lamN int
	for _, t := range reg.terms {
		for k, lam := range t.Lambda {
			st.TauSum += t.Tau[k]
			lamSum += lam
			st.LambdaMax = math.Max(st.LambdaMax, lam)
		}
		lamN += len(t.Lambda)
	}
	st.TauSum /= float64(len(reg.terms))
	if lamN > 0 {
		st.LambdaMean = lamSum / float64(lamN)
	}
	if n := reg.negEvals - l.negEvals; n > 0 {
		st.HingeActive = float64(reg.negActive-l.negActive) / float64(n)
	}
	l.negEvals, l.negActive = reg.negEvals, reg.negActive
}

// EndEpoch ends epoch e ≥ 1: Π_C under ProjectionEpoch, then the dual step
// with η = c/e on the cached scores. It returns the epoch's statistics and
// starts the next epoch's.
func (l *Loop) EndEpoch(e int) (EpochStats, error) {
	if reg := l.reg; reg != nil {
		if l.cfg.Projection == ProjectionEpoch {
			if err := l.project(); err != nil {
				return EpochStats{}, err
			}
		}
		l.stats.Projections += reg.ThroughProjections() - l.mark
		if err := reg.DualStepFraction(e, l.fraction(l.inEpoch-l.lastDual, l.inEpoch), l.cache); err != nil {
			return EpochStats{}, err
		}
		l.stats.DualSteps++
		l.mark = reg.ThroughProjections()
		l.endStats(&l.stats)
	}
	st := l.stats
	if st.Evals > 0 {
		st.Lagrangian = l.lagrSum / float64(st.Evals)
	}
	l.stats, l.lagrSum, l.freshNext = EpochStats{}, 0, true
	l.epoch, l.inEpoch, l.lastDual, l.projected = e+1, 0, 0, false
	return st, nil
}

// RunEpoch runs epoch e ≥ 1 whole: steps inner steps on the batches s
// draws, then EndEpoch(e).
func (l *Loop) RunEpoch(e, steps int, s *Sampler, net Network) (EpochStats, error) {
	l.epoch, l.cfg.StepsPerEpoch = e, steps
	for range steps {
		l.ids = s.Next(l.ids)
		if _, err := l.Step(l.ids, net); err != nil {
			return EpochStats{}, err
		}
	}
	return l.EndEpoch(e)
}

// resize returns s with length n, reusing its storage when it can.
func resize(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}
