package dual

import "fmt"

// Coefficients writes the batch's Lagrangian as a function of the scores,
// the form a training graph can compute and differentiate itself: for row b
// and term t, with s = scores[b·Heads()+Terms()[t].Head],
//
//	L̂ = Σ_{b,t} pos[b·T+t]·s + neg[b·T+t]·max(0, eps[t] + s) + (terms free of s)
//
// where T = len(Terms()). Hence ∂L̂/∂s = pos + neg·1[eps + s > 0], which is
// what Eval puts in dScores. pos and neg must hold len(ids)·T values and
// eps T values. The weights are Eval's: normalisation, term weight and the
// Horvitz–Thompson scale of the batch.
func (r *Regularizer) Coefficients(ids []int64, pos, neg, eps []float64) error {
	T := len(r.terms)
	if len(pos) != len(ids)*T || len(neg) != len(ids)*T || len(eps) != T {
		return fmt.Errorf("dual: Coefficients: %d ids and %d terms need %d coefficients and %d eps, got %d, %d, %d",
			len(ids), T, len(ids)*T, T, len(pos), len(neg), len(eps))
	}
	idx, err := r.batchWeights(ids)
	if err != nil {
		return err
	}
	f := r.norm()
	for ti, t := range r.terms {
		_, bc, _ := t.Family.Coeffs(t.n, t.m, t.Rho)
		scale := f * t.Weight
		eps[ti] = t.Eps
		for b, i := range idx {
			w := r.hw[r.class[i]]
			pos[b*T+ti], neg[b*T+ti] = 0, 0
			if r.class[i] == t.Class {
				pos[b*T+ti] = -scale * w * t.Lambda[r.slot[i]]
			} else {
				neg[b*T+ti] = scale * w * bc
			}
		}
	}
	return nil
}

// batchWeights maps ids to global indices and sets the Horvitz–Thompson
// weights r.hw of the batch: class size over examples drawn from it.
func (r *Regularizer) batchWeights(ids []int64) ([]int, error) {
	idx := make([]int, len(ids))
	clear(r.cnt)
	for b, id := range ids {
		i, ok := r.index[id]
		if !ok {
			return nil, fmt.Errorf("dual: unknown id %d", id)
		}
		idx[b] = i
		r.cnt[r.class[i]]++
	}
	for c, k := range r.cnt {
		r.hw[c] = 0
		if k > 0 {
			r.hw[c] = float64(len(r.members[c])) / float64(k)
		}
	}
	return idx, nil
}
