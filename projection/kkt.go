package projection

import (
	"errors"
	"math"
)

// KKTReport holds the violations of the KKT conditions of
//
//	min ‖(ε, τ) − (δ, γ)‖²/2  s.t.  τ_i − ε ≤ 0 (multiplier ν_i),  −ε ≤ 0 (multiplier κ)
//
// at a candidate (ε, τ). The multipliers are the ones stationarity forces,
// ν_i = γ_i − τ_i and κ = ε − δ − Σ ν_i. Residuals are relative: per-element
// quantities are divided by Scale; κ, a sum over up to 2n+2 numbers, is
// divided by Scale·SumScale, SumScale = (|ε| + |δ| + Σ_{ν_i≠0} |γ_i|+|τ_i|)/Scale,
// the magnitude of what it sums: κ moves by (k+1)·Δε when ε moves by Δε
// with k active elements, so an ε rounded to relative precision u shows up
// as a κ of relative size about u, not (k+1)·u.
type KKTReport struct {
	// Primal is max(0, max_i(τ_i − ε), −ε): infeasibility of the candidate.
	Primal float64
	// Dual is max(0, max_i(−ν_i), −κ): how negative the multipliers are.
	Dual float64
	// Stationarity is the residual of the stationarity equations left by the
	// nearest dual-feasible multipliers ν⁺ = max(ν, 0), κ⁺ = max(κ', 0) with
	// κ' = ε − δ − Σ ν⁺.
	Stationarity float64
	// Complementarity is max(max_i |ν⁺_i (τ_i − ε)|, |κ⁺ ε|/SumScale) / Scale².
	Complementarity float64
	// Scale is max(|δ|, |ε|, max|γ_i|, max|τ_i|), or 1 if all are 0.
	Scale float64
	// SumScale is the relative magnitude of the terms summed into κ (≥ 1).
	SumScale float64
}

// Max returns the largest of the four relative violations.
func (r KKTReport) Max() float64 {
	return max(r.Primal, r.Dual, r.Stationarity, r.Complementarity)
}

// OK reports whether every violation is ≤ tol.
func (r KKTReport) OK(tol float64) bool { return r.Max() <= tol }

// DefaultTol is a tolerance for KKT reports of projections computed in
// precision T on n elements: the multiplier sums accumulate up to n
// roundings of the threshold, so it grows linearly with n. Inputs in the
// subnormal range (Scale below ~1e-290 for float64) have only absolute
// precision and can exceed it.
func DefaultTol[T Float](n int) float64 {
	eps := 0x1p-52
	if T(1)+T(0x1p-30) == T(1) { // float32 (or a type defined on it)
		eps = 0x1p-23
	}
	return 8 * float64(n+2) * eps
}

// KKT checks a candidate (eps, tau) for the projection of (delta, gamma)
// onto C. It fails only on mismatched lengths or non-finite input.
func KKT[T Float](delta T, gamma []T, eps T, tau []T) (KKTReport, error) {
	if len(gamma) != len(tau) {
		return KKTReport{}, errors.New("projection: KKT: len(gamma) != len(tau)")
	}
	d, e := float64(delta), float64(eps)
	if !isFinite(d) || !isFinite(e) {
		return KKTReport{}, ErrNonFinite
	}
	scale := math.Max(math.Abs(d), math.Abs(e))
	for i := range gamma {
		g, t := float64(gamma[i]), float64(tau[i])
		if !isFinite(g) || !isFinite(t) {
			return KKTReport{}, ErrNonFinite
		}
		scale = math.Max(scale, math.Max(math.Abs(g), math.Abs(t)))
	}
	if scale == 0 {
		scale = 1
	}
	var r KKTReport
	r.Scale = scale
	es, ds := e/scale, d/scale
	r.Primal = math.Max(0, -es)
	var sumNu, sumNuPos, sumAbs, comp float64
	for i := range gamma {
		g, t := float64(gamma[i])/scale, float64(tau[i])/scale
		nu := g - t
		sumNu += nu
		if nu != 0 {
			sumAbs += math.Abs(g) + math.Abs(t)
		}
		r.Primal = math.Max(r.Primal, t-es)
		r.Dual = math.Max(r.Dual, -nu)
		if nu > 0 {
			sumNuPos += nu
			comp = math.Max(comp, math.Abs(nu*(t-es)))
		} else {
			// ν⁺ = 0 leaves the τ_i equation with residual −ν.
			r.Stationarity = math.Max(r.Stationarity, -nu)
		}
	}
	ss := math.Max(1, math.Abs(es)+math.Abs(ds)+sumAbs)
	r.SumScale = ss
	kappa := (es - ds - sumNu) / ss
	r.Dual = math.Max(r.Dual, -kappa)
	kPrime := (es - ds - sumNuPos) / ss
	kPos := math.Max(kPrime, 0)
	r.Stationarity = math.Max(r.Stationarity, math.Abs(kPrime-kPos))
	comp = math.Max(comp, math.Abs(kPos*es))
	r.Complementarity = comp
	return r, nil
}
