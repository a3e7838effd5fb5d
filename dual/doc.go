// Package dual holds the state and the updates of segtune's reparameterised
// Lagrangian (docs/method.md §3–§6): per-example τ_i and λ_i, per-term ε, μ
// (and ρ for rate constraints), minibatch estimates of the Lagrangian and
// its gradients, the projection Π_C (package projection), the dual step of
// Algorithm 1, a balanced sampler, JSON checkpoints, and Loop, the one
// orchestration of Algorithm 1 (evaluate, primal steps, projection
// schedule, dual step at the end of an epoch) around a Network: `segtune
// finetune`'s ONNX network, the S-MNIST experiment's classifier, or Linear,
// a linear size head on fixed features that the LP checks solve.
//
// # The Lagrangian
//
// Every objective is a sum of terms. A term looks at one score column s
// (s_i = w_h·a_i for head h), a positive set S+ (n examples) and its
// complement S− (m examples), and has the Lagrangian
//
//	L = A·ε + B·Σ_{j∈S−} max(0, ε + s_j) + C + μ(Σ_{i∈S+} τ_i − 1) + Σ_{i∈S+} λ_i(τ_i − s_i)
//
// minimised over (ε, τ) ∈ C = {τ_i ≤ ε, ε ≥ 0} and the scores, maximised
// over λ ≥ 0, μ (and ρ ≥ 0). The families differ only in (A, B, C):
//
//	F_β                A = β²n        B = 1     C = 0
//	P@R (recall ≥ r)   A = ρ·r·n      B = 1     C = −ρ
//	R@P (prec. ≥ p)    A = n          B = ρ·p   C = −ρ(1−p)
//	R@FPR (fpr ≤ f)    A = n − ρ·f·m  B = ρ     C = 0
//
// Gradients: ∂L/∂ε = A + B·Σ_{S−} 1[ε+s_j>0], ∂L/∂τ_i = μ + λ_i,
// ∂L/∂s_j = B·1[ε+s_j>0] (j ∈ S−), ∂L/∂s_i = −λ_i (i ∈ S+), and
// ∂L/∂ρ = the dualised rate constraint (below).
//
// # Derivation of the F_β linear program (Eban et al. 2017)
//
// With tp + fn = n, F_β = (1+β²)tp / ((1+β²)tp + β²fn + fp)
// = (1+β²)tp / (tp + β²n + fp). Eban et al. bound tp from below by
// tp_l = Σ_{S+} τ_i with τ_i ≤ 1, τ_i ≤ s_i (a hinge), and fp from above by
// fp_u = Σ_{S−} max(0, 1 + s_j). Maximising F_β is minimising the ratio
// (tp_l + β²n + fp_u)/tp_l, a linear-fractional program. The Charnes–Cooper
// substitution t = 1/tp_l, ε = t, τ' = tτ, w' = tw (so s' = ts) makes it
// linear: τ'_i ≤ ε, τ'_i ≤ s'_i, Σ τ'_i = t·tp_l = 1, t·fp_u =
// Σ max(0, ε + s'_j), and the objective becomes Σ τ' + β²nε + Σ max(0, ε+s'_j)
// = 1 + β²nε + Σ max(0, ε + s'_j). Dropping the constant 1 (Σ τ' = 1 on the
// feasible set) gives
//
//	min β²nε + Σ_{j∈S−} max(0, ε + w·a_j)  s.t.  τ_i ≤ ε, τ_i ≤ w·a_i, Σ τ_i = 1, ε ≥ 0,
//
// the paper's Problem 2 with n replaced by β²n; its value V gives the
// bound F_β ≥ (1+β²)/(1+V). β = 1 is Problem 2 exactly.
//
// # Rate constraints (Cotter et al. 2019)
//
// The same substitution with t = 1/tp_l handles precision and recall as
// constraints: recall = tp/n = 1/(nε), precision = tp/(tp+fp).
//
//   - P@R: maximise precision ⇔ minimise fp/tp = Σ max(0, ε+s_j) subject to
//     recall ≥ r ⇔ r·n·ε ≤ 1; dualised with ρ ≥ 0: ∂L/∂ρ = r·n·ε − 1.
//   - R@P: maximise recall ⇔ minimise nε (= 1/recall) subject to
//     precision ≥ p ⇔ p·fp ≤ (1−p)·tp ⇔ p·Σ max(0, ε+s_j) ≤ 1−p;
//     ∂L/∂ρ = p·H − (1−p), H = Σ_{S−} max(0, ε + s_j).
//   - R@FPR: maximise recall subject to fp ≤ f·m ⇔ H ≤ f·m·ε;
//     ∂L/∂ρ = H − f·m·ε.
//
// AUC-ROC is the area under recall (TPR) against FPR, approximated by the
// mean of R@FPR terms over a grid of FPR levels ("auc-roc"); AUC-PR by the
// mean of R@P terms over a grid of precision levels ("auc-pr", the
// "average of R@P points" of docs/method.md §4). Every grid point has its own ε,
// τ, λ, μ, ρ (its own operating threshold) and all share the score column.
//
// # Size values p > 2
//
// With p size classes (labels 0..p−1) the objective is one-vs-rest: head j
// scores class j, its terms take S+ = S^j and S− = the rest, and λ_ij lives
// on the examples of S^j (docs/method.md §4). Binary problems (labels 0/1) have
// one head and S+ = label 1.
//
// # Minibatches and normalisation
//
// A minibatch estimates each sum over S+, S− by Horvitz–Thompson weights:
// an example of size class c counts |S^c| / (examples of class c in the
// batch), which for binary problems is the paper's "set size / examples
// drawn" and stays unbiased for the unions of classes that form S− under
// one-vs-rest with the stratified Sampler. The regulariser that α
// multiplies is L/N with Normalization "mean" (the default, shared with
// `segtune finetune`: a mean over examples like the network's loss, so α
// is the F1 term's weight relative to the cross entropy) or L itself with
// "sum" (as in the paper; L grows with N). The caller adds α·∂L/∂s to the
// network's gradient; τ, ε are stepped by Adam on the normalised L (Adam
// makes their update invariant to the constant factor α), with a step of
// LRRel/n by default: τ and ε live at the scale 1/n.
//
// # Dynamics between projections
//
// Adam steps (τ, ε), and ∂L/∂ε is always positive, so without a repair ε
// drifts below 0 between projections and switches the hinges off.
// Config.Feasibility repairs cheaply after every step: ε ≥ 0 ("clip"), and
// by default also the τ_i the step moved projected with ε ("batch";
// projection.PairRule, the paper's batch-size-2 rule, when it moved one).
// The dual step comes every Config.DualEvery steps as well as at the end
// of the epoch (by default DefaultDualsPerEpoch an epoch), each with the
// share of η = c/e that its steps are of the epoch, so λ leaves its start
// within the first epoch (docs/method.md §6, §12).
//
// # Projection schedules
//
// Between the repairs above (τ, ε) may still leave C: the τ_j a step did
// not move can exceed a lower ε. Algorithm 1 calls ProjectPrimal once per
// epoch, the "full projections" baseline after every step (Loop applies
// the Schedule). The third schedule trains through the
// projection (docs/method.md §8, the relu form): after ProjectThrough, τ and ε
// are free variables τ̃, ε̃, Term.Tau and Term.Eps always hold Π_C(τ̃, ε̃)
// (feasible at every step), and PrimalStep applies the chain rule through
// Π_C, whose Jacobian is piecewise linear: with ō = ε* and the active set
// A = {i : τ̃_i > ō}, ∂ō/∂τ̃_i = ∂ō/∂ε̃ = 1/(|A|+1) for i ∈ A (when ō > 0),
// and τ_i = τ̃_i outside A. A Projector supplies Π_C and that product:
// ExactProjector in Go, or projection/onnxgraph.Projector, which runs the
// projection graph and its gradient in ONNX Runtime (what `segtune finetune
// --projection graph` uses). The gradient is dense on A, so Adam is dense
// under this schedule, and every step costs two projections (one for the
// gradient, one for the new point).
//
// # Checkpoints
//
// State is serialised as JSON: float64 values round-trip exactly
// (encoding/json writes the shortest representation that parses back to the
// same bits), the files are readable by other tools (Python, jq) for the
// experiments, and the format does not depend on Go type identities as
// encoding/gob does. Restoring a checkpoint and continuing reproduces the
// uninterrupted run bit for bit (TestLinearResumeIdentical).
package dual
