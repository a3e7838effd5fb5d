package dual

import (
	"errors"
	"fmt"
	"math"

	"github.com/segtune/segtune/projection"
)

// Normalization says what the regularisation weight α multiplies.
type Normalization string

const (
	// NormSum is the paper's choice: α·L, with L summing over examples (it
	// grows with N).
	NormSum Normalization = "sum"
	// NormMean is α·L/N (the default): L/N is a mean over the training
	// examples like a network's mean loss, so α is the weight of the F1
	// term relative to the cross entropy: with balanced batches each
	// example's term weighs α·2|S^c|/(N·B) ≈ α/B, as its cross entropy
	// weighs 1/B (docs/method.md §5).
	NormMean Normalization = "mean"
)

// Feasibility says how (τ, ε) are kept near C = {τ_i ≤ ε, ε ≥ 0} between
// projections (after every primal step; docs/method.md §6).
type Feasibility string

const (
	// FeasBatch (the default): ε ← max(0, ε), and the τ_i the step moved
	// are projected onto C together with ε — projection.PairRule when the
	// step moved one τ_i (the paper's batch-size-2 rule), the exact
	// projection of those coordinates and ε otherwise. O(batch) per step;
	// τ_j the step did not move are left for the next full projection.
	FeasBatch Feasibility = "batch"
	// FeasClip only clips ε at 0 after every step (as abhay-venkatesh/f1-cv).
	FeasClip Feasibility = "clip"
	// FeasNone leaves (τ, ε) free between projections (the paper's
	// Algorithm 1 as written): ∂L/∂ε > 0 always, so ε drifts below 0.
	FeasNone Feasibility = "none"
)

// Defaults of the dynamics that keep the regulariser alive, chosen from the
// pilots of docs/method.md §12.
const (
	// DefaultLRRel is Adam's step for τ and ε in units of 1/n.
	DefaultLRRel = 0.03
	// DefaultCLambda and DefaultCMu are c_λ and c_μ of the dual step. The
	// paper's 1e-3 and 1e-5 leave λ at 1e-4 on CamVid and let Σ τ drift
	// to −1.8 within three epochs (docs/method.md §12). c_λ = 1 is what the
	// CamVid study selected from {1, 10} (docs/study.md): as alive over 10
	// epochs, at a lower training loss than 10.
	DefaultCLambda = 1.0
	DefaultCMu     = 1.0
	// DefaultDualsPerEpoch is how many dual steps an epoch of T steps takes
	// when Config.DualEvery is 0: one after every ⌈T/D⌉-th step and the
	// last one at its end.
	DefaultDualsPerEpoch = 4
)

// Config configures a Regularizer. Zero fields take the defaults noted.
type Config struct {
	// Objective is "fbeta" (default; "f1" is an alias), "p@r", "r@p",
	// "auc-roc" (mean of R@FPR over Grid) or "auc-pr" (mean of R@P over Grid).
	Objective string `json:"objective"`
	// Beta is β ∈ (0, 1] for "fbeta" (default 1).
	Beta float64 `json:"beta,omitempty"`
	// Level is the recall target of "p@r" or the precision target of "r@p".
	Level float64 `json:"level,omitempty"`
	// Grid holds the FPR ("auc-roc") or precision ("auc-pr") levels.
	Grid []float64 `json:"grid,omitempty"`
	// Normalization is NormMean (default) or NormSum.
	Normalization Normalization `json:"normalization,omitempty"`
	// Feasibility is FeasBatch (default), FeasClip or FeasNone.
	Feasibility Feasibility `json:"feasibility,omitempty"`
	// LambdaInit is the initial λ_i of every large example (default 0, the
	// paper's). `segtune finetune` starts at 0.01, which gave S-MNIST's size
	// head a training F1 of 0.90 instead of 0.83 (three seeds); the library
	// keeps 0 because a positive start biases the graph schedule on the LP
	// of dual/lp_test.go (+2.0–2.8 % against +1.7–2.1 % over five seeds;
	// docs/method.md §12).
	LambdaInit float64 `json:"lambda_init,omitempty"`
	// DualEvery is K: with K > 0 a Loop takes the dual step after every
	// K-th inner step of an epoch as well as at its end, each with the
	// fraction of η = c/e that its steps are of the epoch's
	// (DualStepFraction), so that K sets how often λ moves, not how far. 0 means K = ⌈T/DefaultDualsPerEpoch⌉ for a Loop
	// that knows the epoch's length T (LoopConfig.StepsPerEpoch, RunEpoch),
	// and epoch ends only otherwise; a negative value steps only at epoch
	// ends (the paper's Algorithm 1).
	DualEvery int `json:"dual_every,omitempty"`
	// LR, when > 0, is Adam's step size for τ and ε (the paper's 1e-2).
	// When 0, a term with n large examples steps LRRel/n: τ and ε live at
	// the scale 1/n (Σ τ = 1, τ_i ≤ ε), and Adam moves a variable by about
	// its step size whatever the gradient's magnitude, so an absolute step
	// of 1e-2 is 500 times the scale of τ on S-MNIST (n = 52 634) and
	// drives Σ τ to ±10³ within an epoch (docs/method.md §12).
	LR float64 `json:"lr,omitempty"`
	// LRRel is the step relative to 1/n used when LR is 0 (default
	// DefaultLRRel).
	LRRel float64 `json:"lr_rel,omitempty"`
	// CLambda, CMu, CRho are the dual step constants c of η_d = c/epoch for
	// λ, μ and ρ (defaults DefaultCLambda, DefaultCMu, 1e-3; docs/method.md
	// §10, §12; the paper's are 1e-3, 1e-5, 1e-3). Scale matters:
	// Σ τ = 1 makes the violations τ_i − s_i of order 1/n while the optimal
	// λ_i are of order 1 (with NormSum), so on small linear problems c_λ of
	// order 1–10 (n = 100) converges where 1e-3 barely moves λ; see the
	// acceptance test in lp_test.go.
	CLambda float64 `json:"c_lambda,omitempty"`
	CMu     float64 `json:"c_mu,omitempty"`
	CRho    float64 `json:"c_rho,omitempty"`
}

func (c Config) withDefaults() Config {
	if c.Objective == "" {
		c.Objective = "fbeta"
	}
	if c.Normalization == "" {
		c.Normalization = NormMean
	}
	if c.Feasibility == "" {
		c.Feasibility = FeasBatch
	}
	if c.LR == 0 && c.LRRel == 0 {
		c.LRRel = DefaultLRRel
	}
	if c.CLambda == 0 {
		c.CLambda = DefaultCLambda
	}
	if c.CMu == 0 {
		c.CMu = DefaultCMu
	}
	if c.CRho == 0 {
		c.CRho = 1e-3
	}
	return c
}

// Adam's moment decay rates and denominator guard (the usual defaults).
const (
	adamB1  = 0.9
	adamB2  = 0.999
	adamEps = 1e-8
)

// Term is the state of one reparameterised sub-problem: one score column,
// one positive class, its own τ, λ (slot k ↔ the k-th example of the class),
// ε, μ and ρ, and Adam moments for τ and ε. Fields are exported for
// inspection; mutate them only through the Regularizer.
type Term struct {
	Family Family
	Head   int     // score column read
	Class  int     // S+ = examples of this class
	Weight float64 // multiplies this term's Lagrangian (1/K on a grid)

	Tau, Lambda []float64
	Eps, Mu     float64
	Rho         float64

	mTau, vTau []float64
	mEps, vEps float64

	n, m    int       // |S+|, |S−|
	gTau    []float64 // ∂L̂/∂τ of the last Eval (sparse, see touched)
	mark    []bool    // mark[k]: k is in touched
	touched []int
	gEps    float64

	through *through // the graph schedule's free variables (ProjectThrough)
}

// Regularizer is the state of the reparameterised Lagrangian over a fixed
// training set: every example has a stable int64 id and a size class.
type Regularizer struct {
	cfg     Config
	ids     []int64
	class   []int
	index   map[int64]int // id → global index
	slot    []int         // global index → position within its class
	members [][]int       // class → global indices, in slot order
	heads   int
	terms   []*Term
	step    int // Adam steps taken (bias correction)
	scratch []float64
	hw      []float64 // per-class Horvitz–Thompson weights of the last batch
	cnt     []int

	throughRuns int // projections of the graph schedule (ThroughProjections)

	// Counters for the Loop's statistics: negatives evaluated, and those
	// with an active hinge ε + s > 0 (every term).
	negEvals, negActive int
	gathered            []float64 // PrimalStep's buffer of moved τ_i
}

// New builds a Regularizer over examples ids with size classes classes
// (0/1 for binary size, S+ = 1; 0..p−1 for p > 2 size values, one-vs-rest).
// τ starts at 1/n and ε at 1/n (a feasible point of Problem 2's
// constraints Σ τ = 1, τ ≤ ε), λ at Config.LambdaInit, μ and ρ at 0.
func New(cfg Config, ids []int64, classes []int) (*Regularizer, error) {
	cfg = cfg.withDefaults()
	if len(ids) != len(classes) {
		return nil, errors.New("dual: len(ids) != len(classes)")
	}
	if cfg.Normalization != NormSum && cfg.Normalization != NormMean {
		return nil, fmt.Errorf("dual: unknown normalization %q", cfg.Normalization)
	}
	if cfg.Feasibility != FeasBatch && cfg.Feasibility != FeasClip && cfg.Feasibility != FeasNone {
		return nil, fmt.Errorf("dual: unknown feasibility %q (want batch, clip or none)", cfg.Feasibility)
	}
	if !(cfg.LR >= 0) || !(cfg.LRRel >= 0) || math.IsInf(cfg.LR+cfg.LRRel, 0) {
		return nil, fmt.Errorf("dual: step sizes lr %v, lr_rel %v must be finite and ≥ 0", cfg.LR, cfg.LRRel)
	}
	if !(cfg.LambdaInit >= 0) || math.IsInf(cfg.LambdaInit, 1) {
		return nil, fmt.Errorf("dual: initial λ %v must be finite and ≥ 0", cfg.LambdaInit)
	}
	fams, err := families(cfg)
	if err != nil {
		return nil, err
	}
	p := 0
	for _, c := range classes {
		if c < 0 {
			return nil, fmt.Errorf("dual: negative class %d", c)
		}
		p = max(p, c+1)
	}
	if p < 2 {
		return nil, errors.New("dual: need at least two size classes (0 and 1)")
	}
	r := &Regularizer{
		cfg:     cfg,
		ids:     append([]int64(nil), ids...),
		class:   append([]int(nil), classes...),
		index:   make(map[int64]int, len(ids)),
		slot:    make([]int, len(ids)),
		members: make([][]int, p),
		hw:      make([]float64, p),
		cnt:     make([]int, p),
	}
	for i, id := range ids {
		if _, dup := r.index[id]; dup {
			return nil, fmt.Errorf("dual: duplicate id %d", id)
		}
		r.index[id] = i
		c := classes[i]
		r.slot[i] = len(r.members[c])
		r.members[c] = append(r.members[c], i)
	}
	posClasses := []int{1}
	if p > 2 {
		posClasses = make([]int, p)
		for c := range posClasses {
			posClasses[c] = c
		}
	}
	r.heads = len(posClasses)
	maxN := 0
	for h, c := range posClasses {
		n := len(r.members[c])
		if n == 0 {
			return nil, fmt.Errorf("dual: size class %d has no examples", c)
		}
		maxN = max(maxN, n)
		for _, f := range fams {
			t := &Term{
				Family: f, Head: h, Class: c, Weight: 1 / float64(len(fams)),
				Tau: make([]float64, n), Lambda: make([]float64, n),
				Eps:  1 / float64(n),
				mTau: make([]float64, n), vTau: make([]float64, n),
				gTau: make([]float64, n), mark: make([]bool, n),
				n: n, m: len(ids) - n,
			}
			for i := range t.Tau {
				t.Tau[i] = 1 / float64(n)
				t.Lambda[i] = cfg.LambdaInit
			}
			r.terms = append(r.terms, t)
		}
	}
	r.scratch = make([]float64, maxN)
	return r, nil
}

// Config returns the configuration with defaults filled in.
func (r *Regularizer) Config() Config { return r.cfg }

// Heads is the number of score columns the objective reads (1 for binary
// size, p for p > 2 size values).
func (r *Regularizer) Heads() int { return r.heads }

// Terms returns the terms (shared, not copied).
func (r *Regularizer) Terms() []*Term { return r.terms }

// N is the number of training examples.
func (r *Regularizer) N() int { return len(r.ids) }

// Index returns the position of id in the training set.
func (r *Regularizer) Index(id int64) (int, bool) {
	i, ok := r.index[id]
	return i, ok
}

// norm is the factor that turns L into the regulariser α multiplies.
func (r *Regularizer) norm() float64 {
	if r.cfg.Normalization == NormMean {
		return 1 / float64(len(r.ids))
	}
	return 1
}

// Eval returns the minibatch estimate of the (normalised) Lagrangian for
// the examples ids with scores (row-major, len(ids)·Heads(): score of row b
// for head h at b·Heads()+h). If dScores is non-nil (same length) it
// receives ∂L̂/∂scores; the gradients in τ and ε are kept for PrimalStep.
// Sums over S+ and S− are scaled by Horvitz–Thompson weights, see the
// package documentation. Ids may repeat (their terms add up).
func (r *Regularizer) Eval(ids []int64, scores, dScores []float64) (float64, error) {
	H := r.heads
	if len(scores) != len(ids)*H || (dScores != nil && len(dScores) != len(scores)) {
		return 0, fmt.Errorf("dual: Eval: %d ids, %d heads, %d scores, %d dScores", len(ids), H, len(scores), len(dScores))
	}
	for b, id := range ids {
		if s := scores[b*H : b*H+H]; !finite(s) {
			return 0, fmt.Errorf("dual: Eval: non-finite score for id %d", id)
		}
	}
	idx, err := r.batchWeights(ids)
	if err != nil {
		return 0, fmt.Errorf("dual: Eval: %w", err)
	}
	if dScores != nil {
		clear(dScores)
	}
	f := r.norm()
	total := 0.0
	for _, t := range r.terms {
		for _, k := range t.touched {
			t.gTau[k], t.mark[k] = 0, false
		}
		t.touched = t.touched[:0]
		a, bc, c := t.Family.Coeffs(t.n, t.m, t.Rho)
		val := a*t.Eps + c - t.Mu
		gEps := a
		scale := f * t.Weight
		for b, i := range idx {
			s := scores[b*H+t.Head]
			w := r.hw[r.class[i]]
			if r.class[i] == t.Class {
				k := r.slot[i]
				val += w * (t.Mu*t.Tau[k] + t.Lambda[k]*(t.Tau[k]-s))
				if !t.mark[k] {
					t.mark[k] = true
					t.touched = append(t.touched, k)
				}
				t.gTau[k] += scale * w * (t.Mu + t.Lambda[k])
				if dScores != nil {
					dScores[b*H+t.Head] -= scale * w * t.Lambda[k]
				}
			} else {
				r.negEvals++
				if z := t.Eps + s; z > 0 {
					r.negActive++
					val += w * bc * z
					gEps += w * bc
					if dScores != nil {
						dScores[b*H+t.Head] += scale * w * bc
					}
				}
			}
		}
		t.gEps = scale * gEps
		total += t.Weight * val
	}
	return f * total, nil
}

func finite(xs []float64) bool {
	for _, x := range xs {
		if x-x != 0 {
			return false
		}
	}
	return true
}

// PrimalStep applies one Adam step to τ and ε with the gradients of the last
// Eval. τ uses lazy (sparse) Adam: only coordinates present in the batch
// move, so a step costs O(batch), not O(n). After ProjectThrough the step
// goes through the projection instead (dense, see ProjectThrough); only
// then can it fail.
func (r *Regularizer) PrimalStep() error {
	r.step++
	bias := math.Sqrt(1-math.Pow(adamB2, float64(r.step))) / (1 - math.Pow(adamB1, float64(r.step)))
	if r.Through() {
		return r.primalStepThrough(bias)
	}
	for _, t := range r.terms {
		lr := r.termLR(t) * bias
		for _, k := range t.touched {
			g := t.gTau[k]
			t.mTau[k] = adamB1*t.mTau[k] + (1-adamB1)*g
			t.vTau[k] = adamB2*t.vTau[k] + (1-adamB2)*g*g
			t.Tau[k] -= lr * t.mTau[k] / (math.Sqrt(t.vTau[k]) + adamEps)
		}
		g := t.gEps
		t.mEps = adamB1*t.mEps + (1-adamB1)*g
		t.vEps = adamB2*t.vEps + (1-adamB2)*g*g
		t.Eps -= lr * t.mEps / (math.Sqrt(t.vEps) + adamEps)
		if err := r.repair(t); err != nil {
			return err
		}
	}
	return nil
}

// termLR is the step size of t's τ and ε (Config.LR, or LRRel/n).
func (r *Regularizer) termLR(t *Term) float64 {
	if r.cfg.LR > 0 {
		return r.cfg.LR
	}
	return r.cfg.LRRel / float64(t.n)
}

// repair brings (ε, τ) of t back towards C after a primal step, as
// Config.Feasibility says (O(batch)).
func (r *Regularizer) repair(t *Term) error {
	switch r.cfg.Feasibility {
	case FeasClip:
		t.Eps = math.Max(0, t.Eps)
	case FeasBatch:
		switch len(t.touched) {
		case 0:
			t.Eps = math.Max(0, t.Eps)
		case 1:
			k := t.touched[0]
			t.Eps, t.Tau[k] = projection.PairRule(t.Eps, t.Tau[k])
		default:
			g := r.gathered[:0]
			for _, k := range t.touched {
				g = append(g, t.Tau[k])
			}
			eps, err := projection.ProjectPivot(t.Eps, g, r.scratch)
			if err != nil {
				return fmt.Errorf("dual: PrimalStep: %w", err)
			}
			for j, k := range t.touched {
				t.Tau[k] = g[j]
			}
			t.Eps, r.gathered = eps, g
		}
	}
	return nil
}

// ProjectPrimal applies Π_C to (ε, τ) of every term (O(n) expected each,
// projection.ProjectPivot) and returns the number of projections done.
func (r *Regularizer) ProjectPrimal() (int, error) {
	for _, t := range r.terms {
		eps, err := projection.ProjectPivot(t.Eps, t.Tau, r.scratch)
		if err != nil {
			return 0, fmt.Errorf("dual: ProjectPrimal: %w", err)
		}
		t.Eps = eps
	}
	return len(r.terms), nil
}

// DualStep is the dual ascent of Algorithm 1 at epoch e ≥ 1, with step
// sizes η = c/e: λ_i ← max(0, λ_i + η_λ(τ_i − s_i)) for every i ∈ S+,
// μ ← μ + η_μ(Σ τ − 1), ρ ← max(0, ρ + η_ρ ∂L/∂ρ). The scores s come from
// cache (the value recorded when each example was last seen); examples
// never seen keep their λ, and the hinge sum H of ∂L/∂ρ is estimated from
// the seen negatives, scaled by |S−|/seen.
func (r *Regularizer) DualStep(epoch int, cache *ScoreCache) error {
	return r.DualStepFraction(epoch, 1, cache)
}

// DualStepFraction is DualStep with the step sizes multiplied by frac ∈
// (0, 1]: a Loop that takes several dual steps in an epoch gives each the
// fraction of the epoch's steps it follows, so that the epoch's dual steps
// add up to one step of η = c/e, whatever their number.
func (r *Regularizer) DualStepFraction(epoch int, frac float64, cache *ScoreCache) error {
	if epoch < 1 {
		return fmt.Errorf("dual: DualStep: epoch %d < 1", epoch)
	}
	if !(frac > 0 && frac <= 1) {
		return fmt.Errorf("dual: DualStep: fraction %v outside (0, 1]", frac)
	}
	if cache == nil || cache.heads != r.heads || len(cache.Seen) != len(r.ids) {
		return errors.New("dual: DualStep: score cache does not match")
	}
	e := float64(epoch) / frac
	etaL, etaM, etaR := r.cfg.CLambda/e, r.cfg.CMu/e, r.cfg.CRho/e
	H := r.heads
	for _, t := range r.terms {
		sum := 0.0
		for k, i := range r.members[t.Class] {
			sum += t.Tau[k]
			if cache.Seen[i] {
				t.Lambda[k] = math.Max(0, t.Lambda[k]+etaL*(t.Tau[k]-cache.Scores[i*H+t.Head]))
			}
		}
		t.Mu += etaM * (sum - 1)
		if t.Family.HasRho() {
			hinge, seen := 0.0, 0
			for i, c := range r.class {
				if c != t.Class && cache.Seen[i] {
					hinge += math.Max(0, t.Eps+cache.Scores[i*H+t.Head])
					seen++
				}
			}
			if seen > 0 {
				hinge *= float64(t.m) / float64(seen)
			}
			t.Rho = math.Max(0, t.Rho+etaR*t.Family.RhoGrad(t.n, t.m, t.Eps, hinge))
		}
	}
	return nil
}

// ScoreCache records the latest scores of every example (docs/method.md §6:
// "w·a_i for the dual step may be the value cached when example i was last
// seen").
type ScoreCache struct {
	Scores []float64 `json:"scores"` // N·heads, row-major by global index
	Seen   []bool    `json:"seen"`
	heads  int
	reg    *Regularizer
}

// NewScoreCache returns an empty cache for r's examples.
func (r *Regularizer) NewScoreCache() *ScoreCache {
	return &ScoreCache{
		Scores: make([]float64, len(r.ids)*r.heads),
		Seen:   make([]bool, len(r.ids)),
		heads:  r.heads,
		reg:    r,
	}
}

// Put records the scores (row-major, Heads() per id) of a batch.
func (c *ScoreCache) Put(ids []int64, scores []float64) error {
	if len(scores) != len(ids)*c.heads {
		return errors.New("dual: ScoreCache.Put: length mismatch")
	}
	for b, id := range ids {
		i, ok := c.reg.index[id]
		if !ok {
			return fmt.Errorf("dual: ScoreCache.Put: unknown id %d", id)
		}
		copy(c.Scores[i*c.heads:(i+1)*c.heads], scores[b*c.heads:(b+1)*c.heads])
		c.Seen[i] = true
	}
	return nil
}

// Reset forgets every recorded score.
func (c *ScoreCache) Reset() { clear(c.Seen) }
