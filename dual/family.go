package dual

import "fmt"

// Family is one objective family: it fixes the coefficients (A, B, C) of a
// term's Lagrangian L = A·ε + B·Σ_{S−} max(0, ε+s_j) + C + μ(Στ − 1) +
// Σ λ_i(τ_i − s_i) (see the package documentation) and, for rate
// constraints, the gradient of L in their multiplier ρ.
type Family interface {
	// Name is the family's identifier in Config and checkpoints.
	Name() string
	// Coeffs returns (A, B, C) for a term with n positives, m negatives and
	// rate multiplier rho.
	Coeffs(n, m int, rho float64) (a, b, c float64)
	// RhoGrad returns ∂L/∂ρ (the constraint value, > 0 when violated)
	// given ε and the hinge sum H = Σ_{S−} max(0, ε + s_j); 0 if HasRho is
	// false.
	RhoGrad(n, m int, eps, hinge float64) float64
	// HasRho reports whether the family has a rate multiplier.
	HasRho() bool
}

// FBeta is the F_β measure, β ∈ (0, 1]; FBeta{1} is the paper's F1
// (Problem 2).
type FBeta struct{ Beta float64 }

// Name implements Family.
func (FBeta) Name() string { return "fbeta" }

// Coeffs implements Family: A = β²n, B = 1, C = 0.
func (f FBeta) Coeffs(n, m int, rho float64) (float64, float64, float64) {
	return f.Beta * f.Beta * float64(n), 1, 0
}

// RhoGrad implements Family (no rate multiplier).
func (FBeta) RhoGrad(n, m int, eps, hinge float64) float64 { return 0 }

// HasRho implements Family.
func (FBeta) HasRho() bool { return false }

// PrecisionAtRecall maximises precision subject to recall ≥ Recall.
type PrecisionAtRecall struct{ Recall float64 }

// Name implements Family.
func (PrecisionAtRecall) Name() string { return "p@r" }

// Coeffs implements Family: A = ρ·r·n, B = 1, C = −ρ.
func (f PrecisionAtRecall) Coeffs(n, m int, rho float64) (float64, float64, float64) {
	return rho * f.Recall * float64(n), 1, -rho
}

// RhoGrad implements Family: r·n·ε − 1 (recall ≥ r ⇔ r·n·ε ≤ 1).
func (f PrecisionAtRecall) RhoGrad(n, m int, eps, hinge float64) float64 {
	return f.Recall*float64(n)*eps - 1
}

// HasRho implements Family.
func (PrecisionAtRecall) HasRho() bool { return true }

// RecallAtPrecision maximises recall subject to precision ≥ Precision.
type RecallAtPrecision struct{ Precision float64 }

// Name implements Family.
func (RecallAtPrecision) Name() string { return "r@p" }

// Coeffs implements Family: A = n, B = ρ·p, C = −ρ(1−p).
func (f RecallAtPrecision) Coeffs(n, m int, rho float64) (float64, float64, float64) {
	return float64(n), rho * f.Precision, -rho * (1 - f.Precision)
}

// RhoGrad implements Family: p·H − (1−p).
func (f RecallAtPrecision) RhoGrad(n, m int, eps, hinge float64) float64 {
	return f.Precision*hinge - (1 - f.Precision)
}

// HasRho implements Family.
func (RecallAtPrecision) HasRho() bool { return true }

// RecallAtFPR maximises recall (TPR) subject to false-positive rate ≤ FPR;
// averaged over a grid of FPR levels it approximates AUC-ROC.
type RecallAtFPR struct{ FPR float64 }

// Name implements Family.
func (RecallAtFPR) Name() string { return "r@fpr" }

// Coeffs implements Family: A = n − ρ·f·m, B = ρ, C = 0.
func (f RecallAtFPR) Coeffs(n, m int, rho float64) (float64, float64, float64) {
	return float64(n) - rho*f.FPR*float64(m), rho, 0
}

// RhoGrad implements Family: H − f·m·ε.
func (f RecallAtFPR) RhoGrad(n, m int, eps, hinge float64) float64 {
	return hinge - f.FPR*float64(m)*eps
}

// HasRho implements Family.
func (RecallAtFPR) HasRho() bool { return true }

// families expands a Config into the families of the terms of one head and
// their weights.
func families(c Config) ([]Family, error) {
	inUnit := func(x float64) bool { return x > 0 && x < 1 }
	switch c.Objective {
	case "", "fbeta", "f1":
		b := c.Beta
		if b == 0 {
			b = 1
		}
		if !(b > 0 && b <= 1) {
			return nil, fmt.Errorf("dual: beta %v outside (0, 1]", b)
		}
		return []Family{FBeta{b}}, nil
	case "p@r":
		if !inUnit(c.Level) {
			return nil, fmt.Errorf("dual: p@r recall level %v outside (0, 1)", c.Level)
		}
		return []Family{PrecisionAtRecall{c.Level}}, nil
	case "r@p":
		if !inUnit(c.Level) {
			return nil, fmt.Errorf("dual: r@p precision level %v outside (0, 1)", c.Level)
		}
		return []Family{RecallAtPrecision{c.Level}}, nil
	case "auc-roc", "auc-pr":
		if len(c.Grid) == 0 {
			return nil, fmt.Errorf("dual: %s needs a grid", c.Objective)
		}
		fs := make([]Family, len(c.Grid))
		for i, g := range c.Grid {
			if !inUnit(g) {
				return nil, fmt.Errorf("dual: grid level %v outside (0, 1)", g)
			}
			if c.Objective == "auc-roc" {
				fs[i] = RecallAtFPR{g}
			} else {
				fs[i] = RecallAtPrecision{g}
			}
		}
		return fs, nil
	}
	return nil, fmt.Errorf("dual: unknown objective %q", c.Objective)
}
