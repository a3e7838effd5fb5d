package projection

// PairRule is the batch-size-2 projection rule of the paper (its §3.3; see
// docs/method.md §7): after an update that moved only ε and one τ_i away
// from a feasible point, clip ε at 0, then if τ_i > ε set both to
// (τ_i + ε)/2.
//
// It is O(1). It equals the exact projection of the pair (ProjectPair)
// whenever the updated ε is ≥ 0 or τ_i ≤ max(ε, 0). When ε < 0 and τ_i > 0
// the rule clips first and averages second, which lands at τ_i/2 instead of
// the exact max(0, (ε+τ_i)/2); and if ε decreased, other coordinates τ_j
// may exceed the new ε, which only a full projection repairs. Use it where
// the paper does (tiny batches, ε kept away from 0).
func PairRule[T Float](eps, tau T) (T, T) {
	if eps < 0 {
		eps = 0
	}
	if tau > eps {
		m := T((float64(tau) + float64(eps)) / 2)
		return m, m
	}
	return eps, tau
}

// ProjectPair is the exact projection of one pair (δ, γ) onto
// {(ε, τ): τ ≤ ε, ε ≥ 0}: θ = (δ+γ)/2 if γ > δ else δ, ε = max(0, θ),
// τ = min(γ, ε).
func ProjectPair[T Float](delta, gamma T) (eps, tau T) {
	theta := float64(delta)
	if gamma > delta {
		theta = (float64(delta) + float64(gamma)) / 2
	}
	eps = T(max(0, theta))
	return eps, min(gamma, eps)
}
