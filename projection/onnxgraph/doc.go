// Package onnxgraph expresses the exact projection Π_C onto
//
//	C = {(ε, τ) : τ_i ≤ ε for all i, ε ≥ 0}
//
// in standard ONNX operators (docs/method.md §8, "The relu form: training through the
// projection"), so that it can sit inside a training graph compiled by
// onnx/grad and be back-propagated through. package projection is the Go
// reference it is tested against.
//
// # Construction
//
// Append(g, opset, tau, delta, prefix) appends, for τ of shape [n] (or
// [B..., n], projected along the last axis) and δ of shape [1] (or
// [B..., 1]), these default-domain nodes (valid from opset 13 on; every
// name starts with prefix + "/"):
//
//	n         = Slice(Shape(τ), [-1:])                      K of TopK, [1]
//	g, order  = TopK(τ, n, axis=-1, largest=1, sorted=1)    g_1 ≥ … ≥ g_n
//	c         = CumSum(Concat(δ, g), axis=-1)               [δ, δ+g_1, …, δ+g_1+…+g_n]
//	θ_k       = c_k / (k+1),  k = 0…n                       Div by Cast(Range(1, n+2))
//	k*        = ReduceSum(Cast(Less(θ_{1…n}, g), int64))     #{k ≥ 1 : θ_k < g_k}
//	θ*        = GatherElements(θ_{0…n}, k*, axis=-1)
//	ō         = Relu(θ*)                                    threshold = ε*
//	τ*        = Min(τ, ō)                                   the relu form of §5
//
// θ_k is the average of the top k coordinates with δ included (θ_0 = δ),
// and θ* = θ_{k*} for the k* with g_{k*+1} ≤ θ_{k*} < g_{k*} (docs/method.md §7).
// Counting works because the comparison holds exactly on a prefix: θ_k is
// the weighted mean (k·θ_{k−1} + g_k)/(k+1), so θ_k < g_k ⟺ θ_{k−1} < g_k,
// and θ_{k−1} < g_k is the activity test of the sorted scan, true for
// k ≤ k* and false after (the paper's Lemma 1). k* = 0 (no coordinate above
// δ) gives θ* = δ; n = 1 needs no special case. Ties need none either: tied
// values are adjacent after the sort, the strict comparison leaves a
// coordinate equal to θ* inactive, and θ_{k*} = θ_{k*+1} there, so either
// reading gives the same θ*.
//
// All of this is exact up to rounding in the graph's precision: against
// projection.Project the threshold agrees to ~1e-7 of the input's magnitude
// in float32 (n up to 1e5) and ~1e-16 in float64 (ONNX Runtime has double
// kernels for every operator used).
//
// # Gradient
//
// Only TopK (values), Concat, CumSum, Div (numerator), GatherElements,
// Relu and Min carry gradient; Shape/Slice/Range/Cast feed constants and
// Less/ReduceSum produce the integer k*, which carries none. onnx/grad's
// rules give, away from ties (γ_i ≠ θ*, θ* ≠ 0), with A = {i : γ_i > θ*}
// the k* active coordinates:
//
//	θ* > 0:  ∂ō/∂δ = ∂ō/∂γ_i = 1/(k*+1) for i ∈ A, ∂ō/∂γ_i = 0 for i ∉ A;
//	         ∂τ*_i/∂γ_i = 1 for i ∉ A, and τ*_i = ō for i ∈ A;
//	θ* < 0:  ō = 0 and ∂ō/∂(δ, γ) = 0; ∂τ*_i/∂γ_i = 1 where γ_i < 0.
//
// Back-propagation goes GatherElements (the upstream ∂/∂θ* lands on entry
// k*), Div (÷ (k*+1)), CumSum (reverse cumulative sum: 1/(k*+1) on c_0…c_k*),
// Concat (split into δ and g), TopK (scatter back through the sort
// permutation). So for F = Σ c_i τ*_i + d·ō, ∂F/∂δ = ∂F/∂γ_i (i ∈ A) =
// (d + Σ_{j∈A} c_j)/(k*+1) and ∂F/∂γ_i = c_i (i ∉ A): the Jacobian of the
// projection, which is piecewise linear. At kinks the graph returns the
// gradient of the piece where tied coordinates are inactive (Less is strict,
// Min gives ties to τ, Relu's gradient at 0 is 0), an element of the Clarke
// subdifferential, never NaN.
//
// Tests check the forward pass against projection.Project and projection.KKT
// (random, tied, all-negative, all-equal, n = 1, n = 1e5, batched, opsets
// 13–21), the gradient with gradcheck (finite differences in float64)
// and against the closed form above, including at ties.
//
// # Cost
//
// The TopK with k = n is a full sort and dominates: on ONNX Runtime's CPU
// provider the graph costs O(n log n) and, with the call overhead, about
// 100–200× more than projection.ProjectPivot (O(n) expected) — see
// bench_test.go. The in-graph form is for when the projection must be
// differentiated or must stay on the device with the rest of the graph, not
// for the once-per-epoch projection of Algorithm 1.
package onnxgraph
