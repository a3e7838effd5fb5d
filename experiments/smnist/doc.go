// Package smnist reproduces Experiment 1 of the paper (docs/method.md §11,
// S-MNIST) with segtune's own components: MNIST read from its IDX files,
// S-MNIST built from it (MNIST plus a copy whose foreground is rescaled to
// double size, s = foreground pixel count above the training mean), the
// one-layer network of models.LinearClassifier with an extra S-measure
// node, a training graph compiled by onnx/grad and run by ONNX Runtime,
// Adam from finetune/optim, and the F1 Lagrangian of package dual optimised
// by Algorithm 1 (one projection per epoch) or by "full projections" (one
// after every step).
//
// # How the regulariser reaches the network
//
// The batch's Lagrangian is linear in the scores s up to a hinge:
// L̂ = Σ_b pos_b·s_b + neg_b·max(0, ε + s_b) + (terms free of s), with
// coefficients that depend only on the batch ids and the dual state, not on
// the scores (dual.Regularizer.Coefficients). So they are known before the
// forward pass, and the training graph computes the term itself:
// Run appends reg_term = Σ α·pos·s + α·neg·relu(ε + s) on the S-measure
// output and compiles it with grad_in/reg_term fed 1, so one ONNX Runtime
// call returns ∂(CE + α·L̂)/∂θ for every parameter. This is the route of
// finetune/sizeregularizer.go; it needs no second forward pass and no
// hand-written gradient, and it stays correct whatever feeds the S-measure
// node. dual.Loop drives the steps (InGraph): it fills the coefficients
// before the pass, evaluates L̂ on the returned scores for the primal Adam
// step on (τ, ε), caches the scores for the dual step (only the epoch's:
// FreshCache) and applies the projection schedule.
//
// # Where the S-measure node reads from
//
// Head "input" is the literal reading of "a single layer network with an
// extra node": models.LinearClassifier with extraOutputs = 1, whose
// s_measure unit is a sibling of the ten class units on the same input.
// Its weights are disjoint from the classifier's, so the regulariser's
// gradient never reaches the class units: with the same batches the
// classifier's trajectory is the baseline's (exactly, up to floating-point
// reassociation). Head "logits" is docs/method.md §2's reading (the size head w
// on the representation a_l that the network computes, here the layer's
// output): s = v·logits + c, so ∂L̂/∂s flows back into the class weights.
// Both are offered; docs/smnist.md reports both.
package smnist
