// Package projection computes the Euclidean projection Π_C onto the cone
//
//	C = {(ε, τ) ∈ R × R^n : τ_i ≤ ε for all i, ε ≥ 0}
//
// used by segtune's reparameterised dual ascent (docs/method.md §7, §8).
//
// # The math
//
// Projecting a point (δ, γ) means minimising (ε−δ)² + Σ_i (τ_i−γ_i)² over C.
// For a fixed ε the best τ_i is min(γ_i, ε), which leaves the convex scalar
// problem f(ε) = (ε−δ)² + Σ_i max(γ_i−ε, 0)². Its unconstrained minimiser θ*
// is the unique root of the increasing function
//
//	h(θ) = θ − δ − Σ_i max(γ_i − θ, 0),
//
// and the constraint ε ≥ 0 clips it: ε* = max(0, θ*), τ*_i = min(γ_i, ε*).
// With γ sorted descending (g_1 ≥ g_2 ≥ …), θ* = (δ + g_1 + … + g_k)/(k+1)
// for the k with g_{k+1} ≤ θ* < g_k: the "average of the top k coordinates,
// δ included" of the paper's Algorithm 2. The threshold ō = ε* is what the
// functions here return; Π_C(τ) = min(ō, τ) elementwise is then a relu
// (Clamp), which is how the projection can sit inside a forward pass.
//
// Two exact algorithms are provided:
//
//   - ProjectSort / ThresholdSort: sort a copy of γ, scan the top-k averages;
//     O(n log n).
//   - ProjectPivot / ThresholdPivot: one filtering pass keeps only elements
//     above a running lower bound of θ* (any subset average that includes δ
//     is ≤ θ*, because h is ≤ 0 there), then a quickselect-style pivoting
//     search on the survivors (as for simplex projections, Duchi et al. 2008,
//     Condat 2016); O(n) expected, no sort.
//
// Both are generic over float32 and float64 inputs and accumulate in
// float64. Inputs containing NaN or ±Inf are rejected with ErrNonFinite.
// Inputs so large that float64 sums could overflow (|x| > 2^900) are
// rescaled by an exact power of two before accumulating.
//
// Also here: the batch-size-2 rule of the paper (PairRule, ProjectPair) and
// a checker of the KKT conditions of the projection problem (KKT). The
// paper's sampled ("sketch") estimate of ō is measured in the tests
// (sketch_test.go), not offered: it is biased low, and ProjectPivot already
// costs about one pass over the data.
package projection
