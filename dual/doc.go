// Package dual holds the state and the updates of segtune's reparameterised
// Lagrangian: per-example τ_i and λ_i, per-term ε, μ (and ρ for rate
// constraints), minibatch estimates of the Lagrangian and its gradients,
// the projection Π_C (package projection), the dual step of Algorithm 1, a
// balanced sampler, JSON checkpoints, and Loop, the one orchestration of
// Algorithm 1 (evaluate, primal steps, projection, dual step) around a
// Network: `segtune finetune`'s ONNX network or the S-MNIST experiment's
// classifier.
//
// docs/method.md is the reference: the Lagrangian of each objective family
// (F_β, P@R, R@P, R@FPR and the AUC grids) and its gradients (§3, §4, §13),
// minibatch weights and the normalisation of α (§5), Algorithm 1 and its
// dynamics between projections (§6, §12), the relu form that trains through
// the projection (§8) and the three projection schedules (§9).
//
// Checkpoints are JSON: float64 values round-trip exactly (encoding/json
// writes the shortest representation that parses back to the same bits),
// other tools (Python, jq) read them, and the format does not depend on Go
// type identities as encoding/gob does. Restoring a checkpoint and
// continuing reproduces the uninterrupted run bit for bit.
package dual
