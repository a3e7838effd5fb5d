package dual

import (
	"fmt"

	"github.com/segtune/segtune/projection"
)

// ExactProjector is a Projector in Go: Π_C by projection.ThresholdPivot and
// its vector–Jacobian product in closed form. With ō = ε* and the active set
// A = {i : τ_i > ō} (k = |A|), Π_C is piecewise linear:
//
//	ō > 0:  ∂F/∂τ_i = c_i (i ∉ A),  ∂F/∂τ_i = ∂F/∂δ = (d + Σ_{j∈A} c_j)/(k+1) (i ∈ A)
//	ō = 0:  ∂F/∂τ_i = c_i where τ_i ≤ 0, 0 elsewhere;  ∂F/∂δ = 0
//
// for upstream gradients c = ∂F/∂τ* and d = ∂F/∂ō. At kinks it takes the
// same side as the ONNX graph of projection/onnxgraph (a coordinate equal
// to ō is inactive), so the two agree everywhere.
type ExactProjector struct {
	scratch []float64
}

// Apply implements Projector.
func (p *ExactProjector) Apply(tau []float64, delta float64, dTauProj []float64, dThreshold float64,
	tauProj, dTau []float64) (threshold, dDelta float64, err error) {
	n := len(tau)
	if len(dTauProj) != n || len(tauProj) != n || len(dTau) != n {
		return 0, 0, fmt.Errorf("dual: ExactProjector: lengths %d, %d, %d, %d differ", n, len(dTauProj), len(tauProj), len(dTau))
	}
	if cap(p.scratch) < n {
		p.scratch = make([]float64, n)
	}
	o, err := projection.ThresholdPivot(delta, tau, p.scratch[:n])
	if err != nil {
		return 0, 0, err
	}
	projection.ClampTo(tauProj, o, tau)
	if o <= 0 {
		for i, x := range tau {
			dTau[i] = 0
			if x <= 0 {
				dTau[i] = dTauProj[i]
			}
		}
		return o, 0, nil
	}
	k, sum := 0, dThreshold
	for i, x := range tau {
		if x > o {
			k++
			sum += dTauProj[i]
		}
	}
	share := sum / float64(k+1)
	for i, x := range tau {
		if x > o {
			dTau[i] = share
		} else {
			dTau[i] = dTauProj[i]
		}
	}
	return o, share, nil
}

// exactProjectors returns one ExactProjector per term of r.
func exactProjectors(r *Regularizer) []Projector {
	ps := make([]Projector, len(r.Terms()))
	for k := range ps {
		ps[k] = &ExactProjector{}
	}
	return ps
}
