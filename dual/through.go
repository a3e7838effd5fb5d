package dual

import (
	"errors"
	"fmt"
	"math"
)

// Projector is Π_C together with its vector–Jacobian product: the
// differentiable projection of docs/method.md §8 that Regularizer.ProjectThrough
// trains through. projection/onnxgraph.Projector computes it in ONNX
// Runtime; ExactProjector is the closed form in Go.
type Projector interface {
	// Apply projects (δ, τ) = (delta, tau) onto C = {τ_i ≤ ε, ε ≥ 0}:
	// it writes τ* = min(τ, ō) to tauProj and returns ō = ε*. With the
	// upstream gradients dTauProj (len n) and dThreshold of some F(τ*, ō)
	// it writes ∂F/∂τ to dTau and returns ∂F/∂δ.
	Apply(tau []float64, delta float64, dTauProj []float64, dThreshold float64,
		tauProj, dTau []float64) (threshold, dDelta float64, err error)
}

// through is the state of the "graph" schedule of one term: the free
// (unprojected) primal variables that Adam moves, and scratch.
type through struct {
	proj   Projector
	raw    []float64 // τ̃; Term.Tau holds its projection
	rawEps float64   // ε̃; Term.Eps holds its projection
	up, g  []float64 // dense upstream gradient and ∂/∂τ̃
}

// ProjectThrough switches r to the in-graph relu form (docs/method.md §8, the
// "graph" projection schedule): τ and ε become free variables τ̃, ε̃, the
// Lagrangian reads their projection (Term.Tau, Term.Eps hold Π_C(τ̃, ε̃) at
// all times, so they stay feasible), and PrimalStep back-propagates through
// the projection with projs[k] (one per term, sized for it) instead of
// leaving ProjectPrimal to restore feasibility. Each primal step then runs
// two projections per term: one for the gradient, one for the new point.
//
// The free variables start at the current (τ, ε), or at the values a
// restored checkpoint carries. ProjectThrough must be called again after
// UnmarshalJSON.
func (r *Regularizer) ProjectThrough(projs []Projector) error {
	if len(projs) != len(r.terms) {
		return fmt.Errorf("dual: ProjectThrough: %d projectors for %d terms", len(projs), len(r.terms))
	}
	for k, t := range r.terms {
		if projs[k] == nil {
			return errors.New("dual: ProjectThrough: nil projector")
		}
		th := t.through
		if th == nil {
			th = &through{raw: append([]float64(nil), t.Tau...), rawEps: t.Eps}
		}
		th.proj = projs[k]
		th.up, th.g = make([]float64, t.n), make([]float64, t.n)
		t.through = th
		if err := r.view(t); err != nil {
			return err
		}
	}
	return nil
}

// Through reports whether r trains through the projection (ProjectThrough).
func (r *Regularizer) Through() bool {
	return len(r.terms) > 0 && r.terms[0].through != nil && r.terms[0].through.proj != nil
}

// ThroughProjections is the number of projections the graph schedule has
// computed since ProjectThrough (every Projector.Apply call).
func (r *Regularizer) ThroughProjections() int { return r.throughRuns }

// view sets (Term.Tau, Term.Eps) = Π_C(τ̃, ε̃).
func (r *Regularizer) view(t *Term) error {
	th := t.through
	clear(th.up)
	eps, _, err := th.proj.Apply(th.raw, th.rawEps, th.up, 0, t.Tau, th.g)
	r.throughRuns++
	if err != nil {
		return fmt.Errorf("dual: projection: %w", err)
	}
	t.Eps = eps
	return nil
}

// primalStepThrough is PrimalStep of the graph schedule: the chain rule
// through Π_C makes the gradient dense on the active coordinates (all of
// them move with ō), so Adam is dense here.
func (r *Regularizer) primalStepThrough(bias float64) error {
	for _, t := range r.terms {
		lr := r.termLR(t) * bias
		th := t.through
		clear(th.up)
		for _, k := range t.touched {
			th.up[k] = t.gTau[k]
		}
		_, gEps, err := th.proj.Apply(th.raw, th.rawEps, th.up, t.gEps, t.Tau, th.g)
		r.throughRuns++
		if err != nil {
			return fmt.Errorf("dual: projection gradient: %w", err)
		}
		for k, g := range th.g {
			t.mTau[k] = adamB1*t.mTau[k] + (1-adamB1)*g
			t.vTau[k] = adamB2*t.vTau[k] + (1-adamB2)*g*g
			th.raw[k] -= lr * t.mTau[k] / (math.Sqrt(t.vTau[k]) + adamEps)
		}
		t.mEps = adamB1*t.mEps + (1-adamB1)*gEps
		t.vEps = adamB2*t.vEps + (1-adamB2)*gEps*gEps
		th.rawEps -= lr * t.mEps / (math.Sqrt(t.vEps) + adamEps)
		if err := r.view(t); err != nil {
			return err
		}
	}
	return nil
}
